// Package gantry_test holds repository-wide checks. TestDependencyDirection keeps the
// folder roles of CONVENTIONS.md true: cmd -> web -> handlers -> views, models;
// models never reach up; views do no I/O; handlers and web never touch the database;
// the run aggregate asks other aggregates through interfaces instead of importing
// them. `go tool task lint` runs it, and TestDependencyRulesFire shows every rule
// catches a planted import. TestLiveTestsCarryTheFastTag keeps `go tool task test:fast`
// true: a test file that needs a browser, runc, Kubernetes or live OpenTofu is left out of
// it by its build constraint; TestPlantedLiveTestIsCaught shows the rule fire.
// TestRunRolesStayNarrow (roles_test.go) keeps models/run a set of small roles.
// TestViewsTypeNoRuleWords (views_words_test.go) keeps the rules' words, the decision
// window and run state names out of views.
package gantry_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath string
	Name       string
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
	// Foundations below the run lifecycle (issue 32): they implement what runs need with
	// models/runport's vocabulary and are handed to runs by the composition root.
	{Prefix: "gantry/models/org", Bans: []string{"gantry/models/run"},
		Why: "members stand below runs: what runs need of them is in models/runport"},
	{Prefix: "gantry/models/state", Bans: []string{"gantry/models/run"},
		Why: "the state backend stands below runs: what runs need of it is in models/runport"},
	{Prefix: "gantry/models/catalog", Bans: []string{"gantry/models/run"},
		Why: "the catalog stands below runs: what runs need of it is in models/runport"},
	{Prefix: "gantry/models/identity", Bans: []string{"gantry/models/run", "gantry/models/breakglass"},
		Why: "the workload issuer stands below what its tokens are granted for: it asks a window or a run's phase whether a grant holds through the interfaces of models/identity/introspect.go"},
	{Prefix: "gantry/models/governance", Bans: []string{"gantry/models/run"},
		Why: "governance reports on settings and counts handed to it: the drift findings' words are in models/runport"},
	{Prefix: "gantry/models", Bans: []string{"gantry/models/pages"}, Except: []string{"gantry/models/pages"},
		Why: "the pages' read models stand above the aggregates they read: only handlers (and the wiring) read them"},
	{Prefix: "gantry/models/runport", Bans: []string{"gantry/models/run", "gantry/models/org", "gantry/models/state", "gantry/models/catalog",
		"gantry/models/db", "gorm.io"},
		Why: "the vocabulary runs share with their foundations is a leaf: no aggregate, no database"},
	{Prefix: "gantry/models/secret", Bans: []string{"gantry/"},
		Why: "the redacted secret values runs hand to runners are a leaf: both sides import it, it imports neither"},
	{Prefix: "gantry/models/moves", Bans: []string{"gantry/"},
		Why: "the log of state moves runs and break-glass windows keep is a leaf: neither entity's rules are in it"},
	{Prefix: "gantry/views", Bans: []string{"gantry/models", "gantry/handlers", "gantry/web", "gantry/cmd", "gorm.io", "github.com/labstack/echo", "net/http!"},
		Why: "views are pure: typed props in, HTML out, no I/O"},
	{Prefix: "gantry/handlers", Bans: []string{"gorm.io", "gantry/models/db", "gantry/web", "gantry/cmd", "github.com/riverqueue"},
		Why: "handlers call services; they never see the database, the queue or the web shell above them (what they stand on is in handlers/ or views/)"},
	// web/ is the top shell only (issue 33): server, middleware, sign-in, error handler, and
	// the development identity provider and mail catcher it serves. What handlers and views
	// stand on lives under them (views/paths, handlers/render, handlers/openapi), and the
	// whole-app test harness beside the composition root (cmd/gantry/webtest).
	{Prefix: "gantry/web", Bans: []string{"gorm.io", "gantry/models/db!", "gantry/cmd", "github.com/riverqueue"},
		Why: "web takes services from the composition root (cmd/gantry/assemble), never the database, and is imported by nothing but cmd/"},
	{Prefix: "gantry", Bans: []string{"gantry/web"}, Except: []string{"gantry/web", "gantry/cmd"},
		Why: "web is the top shell: only the composition root and the binaries under cmd/ import it"},
	{Prefix: "gantry/views/paths", Bans: []string{"gantry/"},
		Why: "URL helpers depend on nothing of Gantry"},
	{Prefix: "gantry/policies", Bans: []string{"gantry/"},
		Why: "the policy engine is a leaf"},
	{Prefix: "gantry/runner", Bans: []string{"gantry/web", "gantry/handlers", "gantry/views", "gantry/cmd"},
		Why: "workers drive services; they serve no pages"},
	{Prefix: "gantry/handlers/openapi", Bans: []string{"gantry/"},
		Why: "the API's description is built from the operations handlers register; it knows nothing of Gantry"},
	{Prefix: "gantry/telemetry", Bans: []string{"gantry/"},
		Why: "the metrics are a leaf: the composition root hands them their gauges' reads"},
	{Prefix: "gantry/syncio", Bans: []string{"gantry/"},
		Why: "the shared writers are a leaf: runners and the tests under cmd/ and deploy/ all use them"},
	{Prefix: "gantry/bench", Bans: []string{"gantry/"},
		Why: "benchmark support is a leaf"},
	{Prefix: "gantry", Bans: []string{"gantry/bench"}, Except: []string{"gantry/bench", "gantry/tools/benchtable", "gantry/cmd/gantry/webtest",
		"gantry/runner/kube/kubecluster/kubetest", "gantry/models/db/dbtest", "gantry/runner/tofu/tofutest"},
		Why: "only tests, benchmarks, their harnesses (webtest, kubetest, dbtest, tofutest: budgets for their waits) and the summary tool use benchmark support; the product never does"},
	{Prefix: "gantry", Bans: []string{"gantry/deploy"}, Except: []string{"gantry/deploy", "gantry/tools"},
		Why: "deploy/ holds the Helm chart and its checks (render, validate, install, the portal's image): tests and tasks use them, the product never does"},
	{Prefix: "gantry", Bans: []string{"gantry/tools"}, Except: []string{"gantry/tools"},
		Why: "tools/ holds the developer tools (test wrapper, builds, images, summaries): nothing that ships imports them"},
}

// mainHomes are where a command may live, each saying what it is by where it is:
// cmd/ what ships (the portal, the in-container helpers, the provider runs use),
// tools/ what developers and CI run, sandbox/cmd the development cloud's server.
var mainHomes = []string{"gantry/cmd", "gantry/tools", "gantry/sandbox/cmd"}

// misplacedMains lists the commands that live anywhere else.
func misplacedMains(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		if p.Name == "main" && !exempt(p.ImportPath, mainHomes) {
			out = append(out, fmt.Sprintf("%s is a command outside cmd/ (what ships), tools/ (developer tools) and sandbox/cmd", p.ImportPath))
		}
	}
	return out
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
	pkgs := listPackages(t, "")
	for _, v := range violations(pkgs, rules) {
		t.Error(v)
	}
	for _, v := range misplacedMains(pkgs) {
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
// the state aggregate, views doing HTTP and handlers reaching up into the web shell. The
// real check must report all three.
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
		filepath.Join(root, "handlers", "planted_import.go"):      "package handlers\n\nimport _ \"gantry/web/devmail\"\n",
		filepath.Join(root, "bench", "planted_main", "main.go"):   "package main\n\nfunc main() {}\n",
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
	pkgs := listPackages(t, overlay)
	got := strings.Join(append(violations(pkgs, rules), misplacedMains(pkgs)...), "\n")
	for _, want := range []string{"gantry/models/run imports gantry/models/state", "gantry/views imports net/http",
		"gantry/handlers imports gantry/web/devmail", "gantry/bench/planted_main is a command outside cmd/"} {
		if !strings.Contains(got, want) {
			t.Errorf("the planted import was not caught: want %q in\n%s", want, got)
		}
	}
}

// A live test needs what `go tool task test:fast` leaves out: a browser, runc, the
// Kubernetes test cluster, live OpenTofu (built from tools/tofu) or root. Its file says so with a
// build constraint, so that `go test -tags fast` skips it, and a line that names the need:
//
//	//go:build !fast
//
//	// Live: needs runc, as root.
//
// TestLiveTestsCarryTheFastTag holds this for every use of a liveMarker and every test
// that fails unless it runs as root. A test that
// reaches one through a helper of a tagged file fails to compile with -tags fast (`go vet
// -tags fast ./...` in lint); what a child process does (`gantry dev` builds OpenTofu) is
// beyond both, and its file is tagged by hand.

// liveMarker is a package, or some of its identifiers, whose use makes a test live.
type liveMarker struct {
	Path  string   // the import path; with a trailing "/", every package under it
	Names []string // the identifiers that need it; none: any use of the package
	Needs string
}

var liveMarkers = []liveMarker{
	{Path: "github.com/chromedp/", Needs: "a browser"},
	{Path: "gantry/runner/kube/kubecluster/kubetest", Needs: "the Kubernetes test cluster"},
	{Path: "gantry/runner/kube/kubecluster", Names: []string{"Start", "Stop"}, Needs: "the Kubernetes test cluster"},
	{Path: "gantry/runner/oci", Names: []string{"Executor"}, Needs: "runc"},
	{Path: "gantry/runner/tofurun", Names: []string{"NewOCI", "OCIConfig"}, Needs: "runc"},
	{Path: "gantry/runner/tofurun", Names: []string{"Process"}, Needs: "live OpenTofu"},
	{Path: "gantry/runner/tofu", Names: []string{"PrepareToolchain", "Build", "EnsureBinary", "EnsureBinaryIn", "BuildProvider", "BuildFwd"},
		Needs: "live OpenTofu"},
	{Path: "gantry/runner/tofu/tofutest", Names: []string{"Toolchain", "Build", "Binary"}, Needs: "live OpenTofu"},
	{Path: "gantry/runner/kube", Names: []string{"BuildPhase", "RunnerImage"}, Needs: "live OpenTofu"},
	{Path: "gantry/cmd/gantry/webtest", Names: []string{"StartLive"}, Needs: "live OpenTofu"},
	{Path: "gantry/runner/targets/seaweed", Names: []string{"EnsureBinary", "Start"}, Needs: "the pinned SeaweedFS"},
}

func (m liveMarker) matches(path, name string) bool {
	if prefix, ok := strings.CutSuffix(m.Path, "/"); ok {
		if !under(path, prefix) {
			return false
		}
	} else if path != m.Path {
		return false
	}
	return len(m.Names) == 0 || slices.Contains(m.Names, name)
}

// liveNeeds lists what the test file at path (relative to the module root) needs of
// liveMarkers, or an empty list.
func liveNeeds(path string, src []byte) ([]string, *ast.File, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	var needs []string
	need := func(m liveMarker, what string) {
		if n := m.Needs + " (" + what + ")"; !slices.Contains(needs, n) {
			needs = append(needs, n)
		}
	}
	imports := map[string]string{} // local name -> import path
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil {
			return nil, nil, err
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
		for _, m := range liveMarkers {
			if len(m.Names) == 0 && m.matches(p, "") {
				need(m, p)
			}
		}
	}
	// pkg.Name, pkg an import: a use of a marked package. (A local that shadows an import
	// name is resolved by the parser and has an Obj.)
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Obj == nil {
				if p, ok := imports[x.Name]; ok {
					for _, m := range liveMarkers {
						if len(m.Names) > 0 && m.matches(p, sel.Sel.Name) {
							need(m, x.Name+"."+sel.Sel.Name)
						}
					}
				}
			}
		}
		return true
	})
	// `if os.Geteuid() != 0 { t.Fatal(...) }` (or an error returned): a test that fails
	// unless it runs as root, which test:fast never needs.
	ast.Inspect(f, func(n ast.Node) bool {
		if stmt, ok := n.(*ast.IfStmt); ok && notRoot(stmt.Cond, imports) && fails(stmt.Body) {
			need(liveMarker{Needs: "root"}, "os.Geteuid() != 0 fails it")
		}
		return true
	})
	// Inside a marked package (its own tests), the names it declares elsewhere are used
	// unqualified: the parser leaves them unresolved (selectors and composite literal keys
	// are never on that list).
	if !strings.HasSuffix(f.Name.Name, "_test") {
		self := "gantry"
		if dir := filepath.ToSlash(filepath.Dir(path)); dir != "." {
			self += "/" + dir
		}
		for _, id := range f.Unresolved {
			for _, m := range liveMarkers {
				if len(m.Names) > 0 && m.matches(self, id.Name) {
					need(m, id.Name)
				}
			}
		}
	}
	return needs, f, nil
}

// notRoot reports whether cond is `os.Geteuid() != 0`.
func notRoot(cond ast.Expr, imports map[string]string) bool {
	b, ok := cond.(*ast.BinaryExpr)
	if !ok || b.Op != token.NEQ {
		return false
	}
	call, ok := b.X.(*ast.CallExpr)
	zero, _ := b.Y.(*ast.BasicLit)
	if !ok || zero == nil || zero.Value != "0" {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Geteuid" {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Obj == nil && imports[x.Name] == "os"
}

// fails reports whether body fails the test (t.Fatal, t.Fatalf, t.FailNow) or makes an
// error (errors.New, fmt.Errorf) for its caller to fail it with.
func fails(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				switch sel.Sel.Name {
				case "Fatal", "Fatalf", "FailNow", "New", "Errorf":
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// leftOutOfFast reports whether f's build constraint excludes it under -tags fast (on this
// machine's GOOS and GOARCH), and the "// Live: needs ..." line before its package clause.
func leftOutOfFast(f *ast.File) (excluded bool, says string) {
	for _, g := range f.Comments {
		if g.Pos() >= f.Package {
			break
		}
		for _, c := range g.List {
			if constraint.IsGoBuild(c.Text) {
				if expr, err := constraint.Parse(c.Text); err == nil {
					excluded = !expr.Eval(func(tag string) bool {
						return tag == "fast" || tag == runtime.GOOS || tag == runtime.GOARCH || tag == "unix"
					})
				}
			}
			if strings.HasPrefix(c.Text, "// Live: needs ") {
				says = c.Text
			}
		}
	}
	return excluded, says
}

// liveProblems is what the test file at path breaks of the rule.
func liveProblems(path string, src []byte) ([]string, error) {
	needs, f, err := liveNeeds(path, src)
	if err != nil {
		return nil, err
	}
	excluded, says := leftOutOfFast(f)
	var out []string
	if len(needs) > 0 && !excluded {
		out = append(out, fmt.Sprintf("%s needs %s: it must begin with `//go:build !fast` and a `// Live: needs ...` line, or test:fast runs it",
			path, strings.Join(needs, ", ")))
	}
	if excluded && says == "" {
		out = append(out, fmt.Sprintf("%s is left out of test:fast (//go:build !fast) without a `// Live: needs ...` line saying why", path))
	}
	return out, nil
}

// testFiles lists the module's _test.go files (testdata and other modules left out).
func testFiles(t *testing.T) []string {
	t.Helper()
	return moduleFiles(t, "_test.go")
}

// moduleFiles lists the module's files whose names end in suffix (testdata and other
// modules left out).
func moduleFiles(t *testing.T, suffix string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == "." {
				return nil
			}
			if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "bin" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (tools/tofu, tools/helm, ...)
			}
			return nil
		}
		if strings.HasSuffix(path, suffix) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestLiveTestsCarryTheFastTag: test:fast is chosen by what the tests use, not by a list
// of names: every test file that uses a liveMarker is left out by its build constraint and
// says why.
func TestLiveTestsCarryTheFastTag(t *testing.T) {
	t.Parallel()
	files := testFiles(t)
	live := 0
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		problems, err := liveProblems(path, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Error(p)
		}
		if needs, _, _ := liveNeeds(path, src); len(needs) > 0 {
			live++
		}
	}
	t.Logf("%d test files, %d of them use a live marker", len(files), live)
}

// TestPlantedLiveTestIsCaught: a rule is only worth having if a planted violation makes
// it fire. A real live file with its constraint removed, every marker used from an
// untagged file (and, inside its own package, unqualified), a test that fails unless it
// runs as root and a tagged file that does not say why are reported; the tagged forms and look-alikes (a method named Start) are not.
func TestPlantedLiveTestIsCaught(t *testing.T) {
	t.Parallel()
	caught := func(path, src string) []string {
		t.Helper()
		got, err := liveProblems(path, []byte(src))
		if err != nil {
			t.Fatalf("%s: %v\n%s", path, err, src)
		}
		return got
	}
	const tag = "//go:build !fast\n\n// Live: needs it.\n\n"

	// A live file of the tree, its constraint dropped.
	real, err := os.ReadFile(filepath.Join("web", "live_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	untagged := strings.Replace(string(real), "//go:build !fast", "", 1)
	if got := caught("web/live_test.go", untagged); len(got) != 1 || !strings.Contains(got[0], "webtest.StartLive") {
		t.Errorf("web/live_test.go without its constraint was not caught: %v", got)
	}
	if got := caught("web/live_test.go", string(real)); len(got) != 0 {
		t.Errorf("web/live_test.go as it is was reported: %v", got)
	}

	for _, m := range liveMarkers {
		path := strings.TrimSuffix(m.Path, "/")
		if strings.HasSuffix(m.Path, "/") {
			path += "/chromedp"
		}
		names := m.Names
		if len(names) == 0 {
			names = []string{""}
		}
		for _, name := range names {
			use := "var _ = m." + name + "\n"
			if name == "" {
				use = ""
			}
			src := fmt.Sprintf("package planted_test\n\nimport m %q\n\n%s", path, use)
			if got := caught("planted/planted_test.go", src); len(got) != 1 {
				t.Errorf("%s.%s used from an untagged file was not caught: %v", path, name, got)
			}
			if got := caught("planted/planted_test.go", tag+src); len(got) != 0 {
				t.Errorf("%s.%s used from a tagged file was reported: %v", path, name, got)
			}
			if name == "" || !strings.HasPrefix(path, "gantry/") {
				continue
			}
			// Inside the marked package itself, unqualified.
			dir := strings.TrimPrefix(path, "gantry/")
			inside := fmt.Sprintf("package %s\n\nvar _ = %s\n", filepath.Base(dir), name)
			if got := caught(dir+"/planted_test.go", inside); len(got) != 1 {
				t.Errorf("%s used unqualified inside %s was not caught: %v", name, path, got)
			}
		}
	}

	// Look-alikes: a method, a field, a struct key and a local of a marked name.
	alike := "package kubecluster\n\nimport \"os/exec\"\n\ntype opts struct{ Start int }\n\n" +
		"func f(c *exec.Cmd) { _ = c.Start(); _ = opts{Start: 1}; Stop := 2; _ = Stop }\n"
	if got := caught("runner/kube/kubecluster/planted_test.go", alike); len(got) != 0 {
		t.Errorf("look-alikes were reported: %v", got)
	}
	// A test that fails unless it runs as root; one that merely branches on it is fine.
	root := "package planted_test\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\n" +
		"func TestRoot(t *testing.T) {\n\tif os.Geteuid() != 0 {\n\t\tt.Fatal(\"needs root\")\n\t}\n}\n"
	if got := caught("planted/planted_test.go", root); len(got) != 1 || !strings.Contains(got[0], "root") {
		t.Errorf("a test that needs root was not caught: %v", got)
	}
	branches := strings.Replace(root, "t.Fatal(\"needs root\")", "t.Log(\"as itself\")", 1)
	if got := caught("planted/planted_test.go", branches); len(got) != 0 {
		t.Errorf("a test that branches on root was reported: %v", got)
	}
	if got := caught("planted/planted_test.go", "//go:build !fast\n\npackage planted_test\n"); len(got) != 1 {
		t.Errorf("a tagged file that does not say why was not caught: %v", got)
	}
}
