// Package gantry_test holds repository-wide checks. TestDependencyDirection keeps the
// folder roles of CONVENTIONS.md true: cmd -> web -> handlers -> views, models;
// models never reach up; views do no I/O; handlers and web never touch the database;
// the run aggregate asks other aggregates through interfaces instead of importing
// them. `go tool task lint` runs it, and TestDependencyRulesFire shows every rule
// catches a planted import.
package gantry_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath string
	Imports    []string
}

// listPackages lists the module's packages (non-test imports only; -e: a planted import
// may make a cycle, which go list reports but still lists); overlay, when set,
// is a `go list -overlay` file that plants files without writing into the tree.
func listPackages(t *testing.T, overlay string) []pkg {
	t.Helper()
	args := []string{"list", "-e", "-json"}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	out, err := exec.Command("go", append(args, "./...")...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rule forbids packages under Prefix (the package and its subpackages, except those
// listed in Except) to import any of Bans. A ban is a package and its subpackages, or
// with a trailing "!" that package alone.
type rule struct {
	Prefix string
	Bans   []string
	Except []string
	Why    string
}

var rules = []rule{
	{Prefix: "gantry/models", Bans: []string{"gantry/web", "gantry/handlers", "gantry/views", "gantry/cmd", "gantry/runner",
		"github.com/labstack/echo", "github.com/a-h/templ"},
		Why: "the domain layer knows nothing of HTTP, pages, workers or wiring"},
	{Prefix: "gantry/models/run", Bans: []string{"gantry/models/state", "gantry/models/org", "gantry/models/catalog", "gantry/models/identity"},
		Why: "runs ask other aggregates through the interfaces in models/run/deps.go, never by importing (and querying) them"},
	{Prefix: "gantry/views", Bans: []string{"gantry/models", "gantry/handlers", "gantry/cmd", "gorm.io", "github.com/labstack/echo", "net/http!"},
		Why: "views are pure: typed props in, HTML out, no I/O"},
	{Prefix: "gantry/handlers", Bans: []string{"gorm.io", "gantry/models/db", "gantry/web!", "gantry/cmd", "github.com/riverqueue"},
		Why: "handlers call services; they never see the database, the queue or the web assembly"},
	{Prefix: "gantry/web", Bans: []string{"gorm.io", "gantry/models/db!", "gantry/cmd", "github.com/riverqueue"},
		Except: []string{"gantry/web/webtest", "gantry/web/e2e"},
		Why:    "web takes services from the composition root (cmd/gantry/assemble), never the database (the test harness stands in for main)"},
	{Prefix: "gantry/web/paths", Bans: []string{"gantry/"},
		Why: "URL helpers depend on nothing of Gantry"},
	{Prefix: "gantry/policies", Bans: []string{"gantry/"},
		Why: "the policy engine is a leaf"},
	{Prefix: "gantry/runner", Bans: []string{"gantry/web", "gantry/handlers", "gantry/views", "gantry/cmd"},
		Why: "workers drive services; they serve no pages"},
	{Prefix: "gantry/web/openapi", Bans: []string{"gantry/"},
		Why: "the API's description is built from the operations handlers register; it knows nothing of Gantry"},
	{Prefix: "gantry/telemetry", Bans: []string{"gantry/"},
		Why: "the metrics are a leaf: the composition root hands them their gauges' reads"},
	{Prefix: "gantry/bench", Bans: []string{"gantry/"},
		Why: "benchmark support is a leaf"},
	{Prefix: "gantry", Bans: []string{"gantry/bench"}, Except: []string{"gantry/bench", "gantry/cmd/benchtable", "gantry/web/webtest",
		"gantry/runner/kube/kubecluster/kubetest", "gantry/models/db/dbtest"},
		Why: "only tests, benchmarks, their harnesses (webtest, kubetest, dbtest: budgets for their waits) and the summary tool use benchmark support; the product never does"},
	{Prefix: "gantry", Bans: []string{"gantry/deploy"}, Except: []string{"gantry/deploy"},
		Why: "deploy/ holds the Helm chart and its checks (render, validate, install, the portal's image): tests and tasks use them, the product never does"},
}

// violations lists what pkgs break of rules.
func violations(pkgs []pkg, rules []rule) []string {
	var out []string
	for _, p := range pkgs {
		for _, r := range rules {
			if !under(p.ImportPath, r.Prefix) || exempt(p.ImportPath, r.Except) {
				continue
			}
			for _, imp := range p.Imports {
				for _, ban := range r.Bans {
					if banned(imp, ban) {
						out = append(out, fmt.Sprintf("%s imports %s: not allowed for %s (%s)", p.ImportPath, imp, r.Prefix, r.Why))
					}
				}
			}
		}
	}
	return out
}

func under(path, prefix string) bool { return path == prefix || strings.HasPrefix(path, prefix+"/") }

func exempt(path string, except []string) bool {
	for _, e := range except {
		if under(path, e) {
			return true
		}
	}
	return false
}

func banned(imp, ban string) bool {
	if exact, ok := strings.CutSuffix(ban, "!"); ok {
		return imp == exact
	}
	return under(imp, strings.TrimSuffix(ban, "/"))
}

func TestDependencyDirection(t *testing.T) {
	for _, v := range violations(listPackages(t, ""), rules) {
		t.Error(v)
	}
}

// TestDependencyRulesFire: a rule is only worth having if a planted violation makes it
// fire. Every ban of every rule is planted once into a package under its prefix, and
// must be reported; the exceptions must not be.
func TestDependencyRulesFire(t *testing.T) {
	t.Parallel()
	for _, r := range rules {
		for _, ban := range r.Bans {
			imp := strings.TrimSuffix(ban, "!")
			if strings.HasSuffix(imp, "/") {
				imp += "planted"
			}
			planted := pkg{ImportPath: r.Prefix + "/planted", Imports: []string{imp}}
			if got := violations([]pkg{planted}, []rule{r}); len(got) != 1 {
				t.Errorf("rule %s did not fire on %s importing %s: %v", r.Prefix, planted.ImportPath, imp, got)
			}
			// The exact bans leave the banned package's subpackages alone.
			if exact, ok := strings.CutSuffix(ban, "!"); ok {
				sub := pkg{ImportPath: r.Prefix + "/planted", Imports: []string{exact + "/sub"}}
				if got := violations([]pkg{sub}, []rule{r}); len(got) != 0 {
					t.Errorf("rule %s: %s! banned a subpackage: %v", r.Prefix, exact, got)
				}
			}
			for _, e := range r.Except {
				if got := violations([]pkg{{ImportPath: e, Imports: []string{imp}}}, []rule{r}); len(got) != 0 {
					t.Errorf("rule %s fired on its exception %s: %v", r.Prefix, e, got)
				}
			}
		}
	}
}

// TestPlantedImportIsCaught plants a real Go file into the tree as go list sees it
// (through -overlay, so nothing is written into the repository): models/run importing
// the state aggregate and views doing HTTP. The real check must report both.
func TestPlantedImportIsCaught(t *testing.T) {
	t.Parallel()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		filepath.Join(root, "models", "run", "planted_import.go"): "package run\n\nimport _ \"gantry/models/state\"\n",
		filepath.Join(root, "views", "planted_import.go"):         "package views\n\nimport _ \"net/http\"\n",
	}
	replace := map[string]string{}
	i := 0
	for target, src := range files {
		i++
		p := filepath.Join(dir, fmt.Sprintf("planted%d.go", i))
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[target] = p
	}
	raw, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlay, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(violations(listPackages(t, overlay), rules), "\n")
	for _, want := range []string{"gantry/models/run imports gantry/models/state", "gantry/views imports net/http"} {
		if !strings.Contains(got, want) {
			t.Errorf("the planted import was not caught: want %q in\n%s", want, got)
		}
	}
}
