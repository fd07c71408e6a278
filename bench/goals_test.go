package bench

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var benchmarkFunc = regexp.MustCompile(`(?m)^func (Benchmark\w+)\(b \*testing\.B\)`)

// TestEveryBenchmarkHasAGoal: the summary lists every benchmark of the repository with
// its goal, so a benchmark with no goal, or a goal naming no benchmark, fails here.
func TestEveryBenchmarkHasAGoal(t *testing.T) {
	found := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." || d.Name() == "tools" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel("..", filepath.Dir(path))
		pkg := "gantry"
		if dir != "." {
			pkg += "/" + filepath.ToSlash(dir)
		}
		for _, m := range benchmarkFunc.FindAllStringSubmatch(string(src), -1) {
			found[pkg+"."+m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 5 {
		t.Fatalf("found only %d benchmarks: %v", len(found), found)
	}
	goals := map[string]bool{}
	for _, g := range Goals {
		key := g.Package + "." + g.Benchmark
		goals[key] = true
		if !found[key] {
			t.Errorf("goal for %s %s: no such benchmark", key, g.Metric)
		}
		if g.Metric == "" || g.Why == "" {
			t.Errorf("goal for %s: metric and why are required", key)
		}
	}
	for b := range found {
		if !goals[b] {
			t.Errorf("%s has no goal in bench/goals.go", b)
		}
	}
}

func TestGoalsAndQuickPattern(t *testing.T) {
	at := Goal{Max: 1.1}
	if !at.Met(1.1) || at.Met(1.11) || at.Text() != "≤ 1.1" {
		t.Errorf("at most: %v %v %q", at.Met(1.1), at.Met(1.11), at.Text())
	}
	least := Goal{Max: 3, AtLeast: true}
	if least.Met(2.9) || !least.Met(3) || least.Text() != "≥ 3" {
		t.Errorf("at least: %q", least.Text())
	}
	if r := (Goal{Report: true}); !r.Met(1e9) || r.Text() != "reported" {
		t.Error("a reported figure always counts as met")
	}
	p := regexp.MustCompile(QuickPattern())
	if !p.MatchString("BenchmarkClassify10k") || p.MatchString("BenchmarkColdDevStart") || p.MatchString("BenchmarkRequestToPendingApproval50") {
		t.Errorf("quick pattern %s", QuickPattern())
	}
}

func TestUntilWakesOnEventsAndReportsTimeOuts(t *testing.T) {
	var ready atomic.Bool
	wake := make(chan struct{}, 1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		ready.Store(true)
		wake <- struct{}{}
	}()
	// The poll is an hour: only the event can end this wait in time.
	if w := Until(wake, time.Hour, time.Minute, ready.Load); w.TimedOut || w.Took > 30*time.Second {
		t.Errorf("woken by the event: %+v", w)
	}
	w := Until(nil, 10*time.Millisecond, 50*time.Millisecond, func() bool { return false })
	if !w.TimedOut || w.Took < 50*time.Millisecond {
		t.Errorf("a deadline that passes is reported, not failed: %+v", w)
	}
	if Scale() < 1 || Deadline(time.Second) < 4*time.Second {
		t.Errorf("scale %v, deadline %v", Scale(), Deadline(time.Second))
	}
}

// TestOpenLoopKeepsItsRateAndCountsWaiting: a load at 200/s for half a second sends 100
// calls whatever they take; a call that waits is counted from its scheduled time, and
// failures are counted.
func TestOpenLoopKeepsItsRateAndCountsWaiting(t *testing.T) {
	var calls atomic.Int64
	l := OpenLoop(200, 500*time.Millisecond, func() error {
		n := calls.Add(1)
		time.Sleep(20 * time.Millisecond)
		if n%10 == 0 {
			return errors.New("refused")
		}
		return nil
	})
	if l.Sent != 100 || calls.Load() != 100 || l.Errors != 10 {
		t.Fatalf("sent %d, called %d, errors %d; want 100, 100, 10", l.Sent, calls.Load(), l.Errors)
	}
	if l.P50 < 20*time.Millisecond {
		t.Fatalf("every call took 20 ms at least, p50 says %v", l.P50)
	}
	if l.Achieved < 100 {
		t.Fatalf("a slow call does not hold the next one back: %.0f/s", l.Achieved)
	}
}
