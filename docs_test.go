package gantry_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gantry/models/run"
)

// checkedDocs name paths a newcomer follows: each path they name in backticks must exist.
var checkedDocs = []string{"README.md", "docs/development.md", "docs/features.md", "docs/operations.md",
	"docs/change-history.md", "docs/runners.md"}

// generatedPaths are named in the documents but made by running things, not committed.
var generatedPaths = []string{".data", ".bench", "bin/", "~/"}

// slashWords have a slash and are no path: the executors' names, a unit, Kubernetes
// API groups and resources.
var slashWords = []string{"tofu/process", "tofu/oci", "tofu/kubernetes", "ns/op", "batch/v1", "pods/log"}

var (
	backticked   = regexp.MustCompile("`([^`\n]+)`")
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// namedPaths are the repository paths doc names: backticked words with a slash that
// are not URLs, routes, flags or patterns.
func namedPaths(doc string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(doc, -1) {
		tok := strings.TrimRight(m[1], ".,;:")
		switch {
		case !strings.Contains(tok, "/"), strings.ContainsAny(tok, " <>{}*$=:?|\"'()"),
			strings.HasPrefix(tok, "/"), strings.HasPrefix(tok, "-"), strings.HasPrefix(tok, "gantry."):
			continue
		}
		first, _, _ := strings.Cut(tok, "/")
		skip := slices.Contains(slashWords, tok) || // a module path (k8s.io/kubernetes) names no file here
			strings.Contains(first, ".") && !strings.HasPrefix(first, ".")
		for _, g := range generatedPaths {
			skip = skip || strings.HasPrefix(tok, g)
		}
		if !skip {
			out = append(out, tok)
		}
	}
	return out
}

// pathExists: the path, or a Go identifier qualified by a package path
// (models/notify.Payload names models/notify).
func pathExists(root, p string) bool {
	if _, err := os.Stat(filepath.Join(root, p)); err == nil {
		return true
	}
	dir, last := filepath.Split(strings.TrimSuffix(p, "/"))
	if pkg, _, ok := strings.Cut(last, "."); ok && pkg != "" {
		if fi, err := os.Stat(filepath.Join(root, dir, pkg)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// missingPaths lists what doc names that root does not hold, and every link that leaves
// the repository.
func missingPaths(root, name, doc string) []string {
	var out []string
	for _, p := range namedPaths(doc) {
		if strings.HasPrefix(p, "../") || !pathExists(root, p) {
			out = append(out, name+" names "+p+", which the repository does not hold")
		}
	}
	for _, m := range markdownLink.FindAllStringSubmatch(doc, -1) {
		target := m[1]
		if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "#") {
			continue
		}
		path, _, _ := strings.Cut(target, "#")
		rel := filepath.Join(filepath.Dir(name), path)
		if strings.HasPrefix(rel, "..") || !pathExists(root, rel) {
			out = append(out, name+" links "+target+", outside the repository or missing")
		}
	}
	if strings.Contains(doc, "../shared/") {
		out = append(out, name+" refers to ../shared/, outside the repository")
	}
	return out
}

// TestDocsNamePathsThatExist: the README, the development guide and the documents they
// lead to name only paths the repository holds, and link nowhere outside it.
func TestDocsNamePathsThatExist(t *testing.T) {
	t.Parallel()
	for _, name := range checkedDocs {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(namedPaths(string(raw))) == 0 {
			t.Errorf("%s names no path: the check would hold nothing", name)
		}
		for _, m := range missingPaths(".", name, string(raw)) {
			t.Error(m)
		}
	}
}

// TestDocsCheckCatchesAMissingPath: a moved file, a link out of the repository and a
// reference to the old shared design are each reported.
func TestDocsCheckCatchesAMissingPath(t *testing.T) {
	t.Parallel()
	doc := "See `models/run/rules.go`, `models/notify.Payload` and `models/run/gone.go`; [design](../DESIGN.md), " +
		"`../shared/DESIGN.md`, `/runs/<id>`, `.data/dev-keys`.\n"
	got := missingPaths(".", "README.md", doc)
	want := []string{"README.md names models/run/gone.go, which the repository does not hold",
		"README.md names ../shared/DESIGN.md, which the repository does not hold",
		"README.md links ../DESIGN.md, outside the repository or missing",
		"README.md refers to ../shared/, outside the repository"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestReadmeStaysShort: the README is the essentials (at most 150 lines); the rest lives in
// docs/.
func TestReadmeStaysShort(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n > 150 {
		t.Errorf("README.md has %d lines; keep it to 150 and move the detail into docs/", n)
	}
}

// TestAPIDocsListEveryEnding: docs/api.md's table of endings has every code of the rule,
// with the states it ends a run in.
func TestAPIDocsListEveryEnding(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range run.Endings() {
		row := regexp.MustCompile("(?m)^\\| `" + string(e) + "` \\| ([A-Z_, ]+) \\|")
		m := row.FindStringSubmatch(string(raw))
		if m == nil {
			t.Errorf("docs/api.md does not list the ending %s", e)
			continue
		}
		for st := range strings.SplitSeq(m[1], ", ") {
			if !e.EndsIn(run.State(st)) {
				t.Errorf("docs/api.md says %s ends a run %s; the rule says it does not", e, st)
			}
		}
	}
}

// TestAPIDocsListEveryQueuePhase: docs/api.md's apply queue names every phase of a
// queue's holder (models/run/queue.go), and only those.
func TestAPIDocsListEveryQueuePhase(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	if problems := queuePhaseProblems(string(raw)); len(problems) > 0 {
		t.Errorf("docs/api.md, the apply queue:\n  %s", strings.Join(problems, "\n  "))
	}
	// The check fires: a phase left out, and one the rule does not have.
	planted := strings.Replace(string(raw), "`checking_drift`,", "`idling`,", 1)
	if got := queuePhaseProblems(planted); !slices.Equal(got, []string{"does not list checking_drift", "lists idling, which is no phase"}) {
		t.Errorf("a planted list: %q", got)
	}
}

// queuePhaseProblems compares the phases the sentence "`phase` is one of …" lists in doc
// with the rule's.
func queuePhaseProblems(doc string) []string {
	m := regexp.MustCompile("`phase` is one\\s+of ([^(]+)\\(").FindStringSubmatch(doc)
	if m == nil {
		return []string{"no sentence lists the phases (\"`phase` is one of …\")"}
	}
	listed := map[string]bool{}
	for _, w := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[1], -1) {
		listed[w[1]] = true
	}
	var problems []string
	for _, p := range run.HolderPhases() {
		if !listed[string(p)] {
			problems = append(problems, "does not list "+string(p))
		}
		delete(listed, string(p))
	}
	for _, w := range slices.Sorted(maps.Keys(listed)) {
		problems = append(problems, "lists "+w+", which is no phase")
	}
	return problems
}
