package review

import "gantry/models/classify"

// Page is one page of a section of the review (the updates, the creates, ...).
type Page struct {
	Items  []int // indexes into classify.Result.Changes
	Number int   // 1-based
	Size   int
	Total  int // items in the whole section
	Pages  int // at least 1, even for an empty section
}

// DefaultPageSize is the page size when none is given.
const DefaultPageSize = 50

// Section returns page number (1-based) of indexes. A number below 1 is the
// first page, one past the end the last page; size <= 0 is DefaultPageSize.
// Items shares indexes' backing array, capped so an append cannot write into it.
func Section(indexes []int, number, size int) Page {
	if size <= 0 {
		size = DefaultPageSize
	}
	p := Page{Size: size, Total: len(indexes)}
	p.Pages = max(1, (p.Total+size-1)/size)
	p.Number = min(max(number, 1), p.Pages)
	lo := (p.Number - 1) * size
	hi := min(lo+size, p.Total)
	if lo < hi {
		p.Items = indexes[lo:hi:hi]
	}
	return p
}

// Indexes lists the changes of a class, in plan order. For ClassReplace and
// ClassDestroy it is res.Replaces and res.Destroys (shared, not copied).
func Indexes(res classify.Result, class classify.Class) []int {
	switch class {
	case classify.ClassReplace:
		return res.Replaces
	case classify.ClassDestroy:
		return res.Destroys
	}
	var out []int
	for i := range res.Changes {
		if res.Changes[i].Class == class {
			out = append(out, i)
		}
	}
	return out
}
