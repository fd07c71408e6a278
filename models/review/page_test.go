package review

import (
	"reflect"
	"testing"

	"gantry/models/classify"
)

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i * 2 // not their own positions
	}
	return s
}

func TestSection(t *testing.T) {
	t.Parallel()
	s120 := seq(120)
	tests := []struct {
		name                 string
		indexes              []int
		number, size         int
		items                []int
		num, sz, total, page int
	}{
		{"first page", s120, 1, 50, s120[:50], 1, 50, 120, 3},
		{"middle page", s120, 2, 50, s120[50:100], 2, 50, 120, 3},
		{"short last page", s120, 3, 50, s120[100:], 3, 50, 120, 3},
		{"past the end clamps to the last page", s120, 9, 50, s120[100:], 3, 50, 120, 3},
		{"zero is the first page", s120, 0, 50, s120[:50], 1, 50, 120, 3},
		{"negative is the first page", s120, -4, 50, s120[:50], 1, 50, 120, 3},
		{"size 0 is 50", s120, 2, 0, s120[50:100], 2, 50, 120, 3},
		{"negative size is 50", s120, 1, -1, s120[:50], 1, 50, 120, 3},
		{"exact multiple", seq(100), 3, 50, seq(100)[50:], 2, 50, 100, 2},
		{"one item per page", seq(3), 2, 1, []int{2}, 2, 1, 3, 3},
		{"empty section: page 1 of 1", nil, 5, 10, nil, 1, 10, 0, 1},
	}
	for _, tt := range tests {
		p := Section(tt.indexes, tt.number, tt.size)
		want := Page{Items: tt.items, Number: tt.num, Size: tt.sz, Total: tt.total, Pages: tt.page}
		if !reflect.DeepEqual(p, want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, p, want)
		}
	}
	// Appending to a page's items never writes into the section.
	s := seq(10)
	p := Section(s, 1, 4)
	_ = append(p.Items, -1)
	if s[4] != 8 {
		t.Errorf("append to Items overwrote the section: %v", s)
	}
}

func TestIndexes(t *testing.T) {
	t.Parallel()
	res := classifyFile(t, "replace_network.json")
	for class, want := range map[classify.Class][]int{
		classify.ClassReplace: {0, 3},
		classify.ClassUpdate:  {1, 4},
		classify.ClassNoOp:    {2, 5, 6},
		classify.ClassCreate:  nil,
		classify.ClassDestroy: nil,
		classify.ClassRead:    nil,
		"bogus":               nil,
	} {
		if got := Indexes(res, class); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", class, got, want)
		}
	}
	// Replace and destroy come from the classification's own lists.
	res.Replaces = []int{3}
	if got := Indexes(res, classify.ClassReplace); !reflect.DeepEqual(got, []int{3}) {
		t.Errorf("replaces %v, want res.Replaces", got)
	}
	res = classifyFile(t, "mix.json")
	if got := Indexes(res, classify.ClassRead); !reflect.DeepEqual(got, []int{0, 7}) {
		t.Errorf("reads %v", got)
	}
	if got := Indexes(res, classify.ClassDestroy); !reflect.DeepEqual(got, []int{5}) {
		t.Errorf("destroys %v", got)
	}
}
