// Command cisummary reads the `go test -json` events of a test run (gotestsum's
// --jsonfile, which .ci/run asks for through GOTESTSUM_JSONFILE) and prints what CI
// says at its end: top-level tests and fuzz targets apart from their subtests, the
// packages that failed without a failing test (a build error, a panic in TestMain, a
// timeout), and the slowest top-level tests.
//
//	go run ./tools/cisummary [-slowest 10] test.json
//
// It exits 1 when the run had a failure of any kind, 2 when it cannot read the file.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

func main() {
	slowest := flag.Int("slowest", 10, "how many of the slowest top-level tests to list")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: cisummary [-slowest N] test.json")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cisummary:", err)
		os.Exit(2)
	}
	defer f.Close()
	s, err := Read(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cisummary:", err)
		os.Exit(2)
	}
	fmt.Print(s.Text(*slowest))
	if !s.OK() {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
	// FailedBuild names the package whose build failed (go 1.24 and later).
	FailedBuild string
}

// Count is how many passed, failed and were skipped.
type Count struct{ Passed, Failed, Skipped int }

func (c *Count) add(action string) {
	switch action {
	case "pass":
		c.Passed++
	case "fail":
		c.Failed++
	case "skip":
		c.Skipped++
	}
}

func (c Count) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", c.Passed, c.Failed, c.Skipped)
}

// Timed is a top-level test and how long it took.
type Timed struct {
	Name    string // "gantry/web.TestLoginEndToEnd"
	Elapsed time.Duration
}

// Summary is what one test run did.
type Summary struct {
	Tests, Fuzz, Subtests Count
	Packages              Count
	// PackageFailures are packages that failed with no failing test of their own: what a
	// count of failed tests alone would miss.
	PackageFailures []string
	// FailedTests are the failed top-level tests and fuzz targets.
	FailedTests []string
	Slowest     []Timed
}

// Read reads a `go test -json` stream. Lines that are not JSON (a stray print) are
// ignored, as go test itself would show them.
func Read(r io.Reader) (Summary, error) {
	var s Summary
	failedTests := map[string]int{} // package → failed tests in it
	lastOutput := map[string]string{}
	var timed []Timed
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.Action == "output" && ev.Test == "" {
			// A panic's first line says more than the stack under it.
			line := strings.TrimSpace(ev.Output)
			if line != "" && !strings.HasPrefix(line, "FAIL") && !strings.HasPrefix(line, "ok") &&
				!strings.HasPrefix(lastOutput[ev.Package], "panic:") {
				lastOutput[ev.Package] = line
			}
		}
		if ev.Action != "pass" && ev.Action != "fail" && ev.Action != "skip" {
			continue
		}
		switch {
		case ev.Test == "":
			s.Packages.add(ev.Action)
			if ev.Action == "fail" && failedTests[ev.Package] == 0 {
				why := lastOutput[ev.Package]
				if ev.FailedBuild != "" {
					why = "build failed"
				} else if why == "" {
					why = "no test failed"
				}
				s.PackageFailures = append(s.PackageFailures, ev.Package+": "+why)
			}
		case strings.Contains(ev.Test, "/"):
			s.Subtests.add(ev.Action)
		default:
			if strings.HasPrefix(ev.Test, "Fuzz") {
				s.Fuzz.add(ev.Action)
			} else {
				s.Tests.add(ev.Action)
			}
			name := ev.Package + "." + ev.Test
			if ev.Action == "fail" {
				failedTests[ev.Package]++
				s.FailedTests = append(s.FailedTests, name)
			}
			timed = append(timed, Timed{Name: name, Elapsed: time.Duration(ev.Elapsed * float64(time.Second))})
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	sort.SliceStable(timed, func(i, j int) bool { return timed[i].Elapsed > timed[j].Elapsed })
	s.Slowest = timed
	return s, nil
}

// OK says whether nothing failed and something ran.
func (s Summary) OK() bool {
	return s.Packages.Failed == 0 && s.Tests.Failed == 0 && s.Fuzz.Failed == 0 && s.Subtests.Failed == 0 &&
		s.Tests.Passed > 0
}

// Text is the summary as CI prints it, with the n slowest top-level tests.
func (s Summary) Text(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "top-level tests: %s\n", s.Tests)
	fmt.Fprintf(&b, "fuzz targets (seed corpora): %s\n", s.Fuzz)
	fmt.Fprintf(&b, "subtests: %s\n", s.Subtests)
	fmt.Fprintf(&b, "packages: %s\n", s.Packages)
	for _, name := range s.FailedTests {
		fmt.Fprintf(&b, "FAILED %s\n", name)
	}
	for _, p := range s.PackageFailures {
		fmt.Fprintf(&b, "FAILED package %s\n", p)
	}
	if n > len(s.Slowest) {
		n = len(s.Slowest)
	}
	if n > 0 {
		fmt.Fprintf(&b, "the %d slowest top-level tests:\n", n)
		for _, t := range s.Slowest[:n] {
			fmt.Fprintf(&b, "  %7.1f s  %s\n", t.Elapsed.Seconds(), t.Name)
		}
	}
	return b.String()
}
