// Command benchtable runs Gantry's benchmarks and writes the summary table every issue
// quotes: each goal of bench/goals.go with the figure of this run and whether it is met.
//
//	go run ./tools/benchtable [-quick] [-timeout 45m] [-out .bench/summary.md] [packages]
//
// It runs `go test -p 1 -run ^$ -bench <pattern> -benchmem -json -timeout <timeout>`, prints the
// benchmark lines as they come, and writes the table even when a package fails or runs
// out of time (its benchmarks then have no figure, which is not met). Each row says how
// busy the machine was when its benchmark started (the load average; above 1 the row is
// marked "not idle") and the wall and CPU seconds of go test's process tree while it ran.
// It exits 1 when go test failed, and with -fail-ratio when a ratio goal is missed: a
// ratio is measured against its yardstick in the same run, so load does not skew it,
// while an absolute figure (ns/op, bytes) is the table's news, not a failure.
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
	failRatio := flag.Bool("fail-ratio", false, "exit 1 when a ratio goal is missed (CI)")
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
	results := parse(stdout, os.Stdout, procProbe{root: cmd.Process.Pid})
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
	missed := MissedRatios(goals, results)
	for _, m := range missed {
		fmt.Fprintln(os.Stderr, "benchtable: ratio goal missed:", m)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(runErr, &exit):
		fmt.Fprintln(os.Stderr, "benchtable: go test failed (see above); the table shows what finished")
		os.Exit(1)
	case runErr != nil:
		fatal(runErr)
	case *failRatio && len(missed) > 0:
		os.Exit(1)
	}
}

// MissedRatios are the ratio goals this run missed, each as "package Benchmark: ratio
// 2.31, goal ≤ 2". A ratio goal whose benchmark gave no figure is missed too, unless its
// package was not asked for (`bench:quick -- ./models/classify/`).
func MissedRatios(goals []bench.Goal, res Results) []string {
	var missed []string
	for _, g := range goals {
		if g.Metric != "ratio" || !res.Ran[g.Package] {
			continue
		}
		figure, ok := res.Figures[g.Package][g.Benchmark][g.Metric]
		switch {
		case !ok:
			missed = append(missed, fmt.Sprintf("%s %s: no ratio (did not run or did not finish), goal %s", g.Package, g.Benchmark, g.Text()))
		case !g.Met(figure):
			missed = append(missed, fmt.Sprintf("%s %s: ratio %s, goal %s", g.Package, g.Benchmark, bench.Format(figure), g.Text()))
		}
	}
	return missed
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchtable:", err)
	os.Exit(2)
}

// Results are the figures of one run: package → benchmark → metric → figure, and how
// each benchmark ran.
type Results struct {
	Figures map[string]map[string]map[string]float64
	Runs    map[string]map[string]Run
	// Ran holds every package go test reported on, benchmarks or not.
	Ran map[string]bool
}

// Run is how one benchmark ran: the load average when it started, its wall time and
// the CPU time of go test's process tree meanwhile. A benchmark starts when the one
// before it in its package ended, or when its package started: the testing package
// runs a benchmark once before it prints its name, so the name is not its start.
type Run struct {
	Load float64
	Wall time.Duration
	CPU  time.Duration
}

// Idle says whether the machine was idle enough for an absolute figure to mean much.
func (r Run) Idle() bool { return r.Load <= 1 }

// Probe reads the machine: the clock, the 1-minute load average and the CPU time of
// the benchmarks' process tree.
type Probe interface {
	Now() time.Time
	Load() float64
	CPU() time.Duration
}

// sample is a probe's reading at one moment.
type sample struct {
	at   time.Time
	load float64
	cpu  time.Duration
}

func read(p Probe) sample { return sample{at: p.Now(), load: p.Load(), cpu: p.CPU()} }

// benchLine is a result line: "BenchmarkX-2   \t       1\t  123 ns/op\t   0.98 ratio".
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+(\d+)\s+(.*)$`)

// parse reads go test -json events, echoes the benchmark results and failures to echo,
// and returns the figures with how each benchmark ran, read from probe.
func parse(r io.Reader, echo io.Writer, probe Probe) Results {
	res := Results{Figures: map[string]map[string]map[string]float64{}, Runs: map[string]map[string]Run{}, Ran: map[string]bool{}}
	// A package's output can arrive in pieces (the testing package prints a benchmark's
	// name, runs it, then prints its figures): lines are put back together per package.
	partial := map[string]string{}
	// Where each package's next benchmark starts: its first event, then each result.
	starts := map[string]sample{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		var ev struct{ Action, Package, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if _, ok := starts[ev.Package]; !ok {
			starts[ev.Package] = read(probe)
			res.Ran[ev.Package] = true
		}
		if ev.Action != "output" {
			continue
		}
		text := partial[ev.Package] + ev.Output
		if !strings.HasSuffix(text, "\n") {
			partial[ev.Package] = text
			continue
		}
		delete(partial, ev.Package)
		for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			if name := record(res, ev.Package, line, echo); name != "" {
				now, start := read(probe), starts[ev.Package]
				if res.Runs[ev.Package] == nil {
					res.Runs[ev.Package] = map[string]Run{}
				}
				res.Runs[ev.Package][name] = Run{Load: start.load, Wall: now.at.Sub(start.at), CPU: now.cpu - start.cpu}
				starts[ev.Package] = now
			}
		}
	}
	return res
}

// record echoes a result or failure line and keeps a result's figures; it returns the
// benchmark's name when the line was its result.
func record(res Results, pkg, line string, echo io.Writer) string {
	if strings.HasPrefix(line, "--- FAIL") || strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "panic:") ||
		strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "ok  ") {
		fmt.Fprintln(echo, line)
	}
	m := benchLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return ""
	}
	fields := strings.Fields(m[4])
	if len(fields)%2 != 0 {
		return ""
	}
	fmt.Fprintf(echo, "%s %s\n", pkg, strings.TrimSpace(line))
	if res.Figures[pkg] == nil {
		res.Figures[pkg] = map[string]map[string]float64{}
	}
	metrics := map[string]float64{}
	for i := 0; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err == nil {
			metrics[fields[i+1]] = v
		}
	}
	res.Figures[pkg][m[1]] = metrics
	return m[1]
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
	b.WriteString("Load is the 1-minute load average when the benchmark started (above 1: not idle, its absolute figures are high); wall and CPU are seconds of go test's process tree while it ran.\n\n")
	b.WriteString("| Package | Benchmark | Metric | Figure | Goal | Met | Load | Wall s | CPU s |\n|---|---|---|---|---|---|---|---|---|\n")
	met, total := 0, 0
	for _, g := range goals {
		metrics := res.Figures[g.Package][g.Benchmark]
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
		load, wall, cpu := "", "", ""
		if run, ok := res.Runs[g.Package][g.Benchmark]; ok {
			load = strconv.FormatFloat(run.Load, 'f', 2, 64)
			if !run.Idle() {
				load += " (not idle)"
			}
			wall = strconv.FormatFloat(run.Wall.Seconds(), 'f', 1, 64)
			cpu = strconv.FormatFloat(run.CPU.Seconds(), 'f', 1, 64)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(g.Package, "gantry/"), g.Benchmark, g.Metric, shown, g.Text(), verdict, load, wall, cpu)
	}
	fmt.Fprintf(&b, "\n%d of %d goals met.\n", met, total)
	return b.String()
}
