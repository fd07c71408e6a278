// Command benchtable runs Gantry's benchmarks and writes the summary table every issue
// quotes: each goal of bench/goals.go with the figure of this run and whether it is met.
//
//	go run ./cmd/benchtable [-quick] [-timeout 45m] [-out .bench/summary.md] [packages]
//
// It runs `go test -p 1 -run ^$ -bench <pattern> -benchmem -json -timeout <timeout>`, prints the
// benchmark lines as they come, and writes the table even when a package fails or runs
// out of time (its benchmarks then have no figure, which is not met). It exits 1 when
// go test failed; an unmet goal is the table's news, not a failure.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gantry/bench"
)

func main() {
	quick := flag.Bool("quick", false, "run only the quick benchmarks (bench.QuickPattern)")
	timeout := flag.Duration("timeout", 45*time.Minute, "time limit of each package's benchmarks (go test -timeout)")
	out := flag.String("out", filepath.Join(".bench", "summary.md"), "where to write the summary table")
	flag.Parse()
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		pkgs = []string{"./..."}
	}
	pattern := "."
	if *quick {
		pattern = bench.QuickPattern()
	}
	// -p 1: one package's benchmarks at a time, so no benchmark shares the machine with
	// another (a cold start compiling OpenTofu would slow every figure beside it).
	args := append([]string{"test", "-p", "1", "-run", "^$", "-bench", pattern, "-benchmem", "-json", "-timeout", timeout.String()}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fatal(err)
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		fatal(err)
	}
	results := parse(stdout, os.Stdout)
	runErr := cmd.Wait()

	goals := bench.Goals
	if *quick {
		goals = nil
		for _, g := range bench.Goals {
			if g.Quick {
				goals = append(goals, g)
			}
		}
	}
	table := Table(goals, results, time.Since(started), *quick)
	fmt.Print("\n" + table)
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fatal(err)
	}
	if err := os.WriteFile(*out, []byte(table), 0o644); err != nil {
		fatal(err)
	}
	fmt.Printf("\n(written to %s)\n", *out)
	var exit *exec.ExitError
	if errors.As(runErr, &exit) {
		fmt.Fprintln(os.Stderr, "benchtable: go test failed (see above); the table shows what finished")
		os.Exit(1)
	} else if runErr != nil {
		fatal(runErr)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchtable:", err)
	os.Exit(2)
}

// Results are the figures of one run: package → benchmark → metric → figure.
type Results map[string]map[string]map[string]float64

// benchLine is a result line: "BenchmarkX-2   \t       1\t  123 ns/op\t   0.98 ratio".
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+(\d+)\s+(.*)$`)

// parse reads go test -json events, echoes the benchmark results and failures to echo,
// and returns the figures.
func parse(r io.Reader, echo io.Writer) Results {
	res := Results{}
	// A package's output can arrive in pieces (the testing package prints a benchmark's
	// name, runs it, then prints its figures): lines are put back together per package.
	partial := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		var ev struct{ Action, Package, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Action != "output" {
			continue
		}
		text := partial[ev.Package] + ev.Output
		if !strings.HasSuffix(text, "\n") {
			partial[ev.Package] = text
			continue
		}
		delete(partial, ev.Package)
		for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			record(res, ev.Package, line, echo)
		}
	}
	return res
}

// record echoes a result or failure line and keeps a result's figures.
func record(res Results, pkg, line string, echo io.Writer) {
	if strings.HasPrefix(line, "--- FAIL") || strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "panic:") ||
		strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "ok  ") {
		fmt.Fprintln(echo, line)
	}
	m := benchLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return
	}
	fields := strings.Fields(m[4])
	if len(fields)%2 != 0 {
		return
	}
	fmt.Fprintf(echo, "%s %s\n", pkg, strings.TrimSpace(line))
	if res[pkg] == nil {
		res[pkg] = map[string]map[string]float64{}
	}
	metrics := map[string]float64{}
	for i := 0; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err == nil {
			metrics[fields[i+1]] = v
		}
	}
	res[pkg][m[1]] = metrics
}

// Table renders the summary: one row per goal, with this run's figure and whether it
// met the goal. A benchmark that reported timeouts met none of its goals (its figures
// are lower bounds); one with no figure did not run or did not finish.
func Table(goals []bench.Goal, res Results, took time.Duration, quick bool) string {
	var b strings.Builder
	kind := "all benchmarks"
	if quick {
		kind = "quick benchmarks"
	}
	fmt.Fprintf(&b, "# Benchmark summary\n\n%s, %s, %s.\n\n", kind, time.Now().UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second))
	b.WriteString("| Package | Benchmark | Metric | Figure | Goal | Met |\n|---|---|---|---|---|---|\n")
	met, total := 0, 0
	for _, g := range goals {
		metrics := res[g.Package][g.Benchmark]
		figure, ok := metrics[g.Metric]
		verdict, shown := "no", "no figure (did not run or did not finish)"
		switch {
		case !ok:
		case metrics["timeouts"] > 0 && g.Metric != "timeouts":
			shown = "≥ " + bench.Format(figure) + " (timed out)"
		default:
			shown = bench.Format(figure)
			if g.Met(figure) {
				verdict = "yes"
			}
		}
		if verdict == "yes" {
			met++
		}
		total++
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(g.Package, "gantry/"), g.Benchmark, g.Metric, shown, g.Text(), verdict)
	}
	fmt.Fprintf(&b, "\n%d of %d goals met.\n", met, total)
	return b.String()
}
