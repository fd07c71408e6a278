package review

import (
	"strings"
	"testing"

	"gantry/bench"
	"gantry/models/classify"
	"gantry/models/classify/classifytest"
)

// BenchmarkLoad10k loads the 10,000-change plan for review, against a plain decode of
// it in the same run (goal: ratio ≤ 2, bench/goals.go).
func BenchmarkLoad10k(b *testing.B) {
	data := classifytest.Plan10kFile(b)
	b.SetBytes(int64(len(data)))
	bench.Ratio(b, classifytest.PlainDecode(b, data), func() {
		d, err := Load(data)
		if err != nil || d.Len() != 4*classifytest.Groups {
			b.Fatal(err)
		}
	})
}

func BenchmarkGraph10k(b *testing.B) {
	res, err := classify.Classify(classifytest.Plan10kFile(b), classify.Options{Irreversible: []string{"sandbox_database"}})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		svg := Graph(res, 60)
		if !strings.Contains(svg, "more resources") {
			b.Fatal("no truncation")
		}
	}
}

// BenchmarkAttributes10k is the cost of one page of 50 diffs of the 10k plan.
func BenchmarkAttributes10k(b *testing.B) {
	d, err := Load(classifytest.Plan10kFile(b))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		for i := range 50 {
			if _, err := d.Attributes(i); err != nil {
				b.Fatal(err)
			}
		}
	}
}
