// Package testgoroutine defines an Analyzer that reports calls which end a test
// (require.*, t.Fatal*, t.FailNow, t.Skip*) made off the test's goroutine.
//
// testing says FailNow (and so Fatal, SkipNow, Skip and every require function) must
// be called from the goroutine running the test: it calls runtime.Goexit, which
// anywhere else only ends that goroutine, and the test goes on with partial results
// (or hangs on a WaitGroup that is never done). The check uses type information, so a
// helper that takes a testing.TB and calls require is caught through a fact, across
// packages (webtest.ReadBody called inside wg.Go).
package testgoroutine

import (
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"
)

// Analyzer reports test-ending calls inside goroutine bodies.
var Analyzer = &analysis.Analyzer{
	Name:      "testgoroutine",
	Doc:       "report require.*, t.Fatal*, t.FailNow and t.Skip* called off the test's goroutine, where they end only that goroutine",
	Run:       run,
	FactTypes: []analysis.Fact{new(failsTest)},
}

const (
	module      = "gantry" // facts are computed for this module's packages only
	testify     = "github.com/stretchr/testify/"
	requirePath = testify + "require"
	assertPath  = testify + "assert"
)

// failsTest marks a function of the module whose body, on its caller's goroutine,
// may end the test: it calls require or t.Fatal-like methods, or another function
// with this fact. It is exported on the *types.Func so importing packages see it.
type failsTest struct {
	Via string // what it calls that ends the test ("require", "t.Fatalf", "webtest.ReadBody")
}

func (*failsTest) AFact() {}

func (f *failsTest) String() string { return "failsTest(" + f.Via + ")" }

// place says where code runs when it is not on its caller's goroutine.
type place struct {
	where   string // e.g. "inside a go statement"
	hint    string // how to fix it, ends the message
	subtest bool   // a t.Run body: a test goroutine of its own, where FailNow is fine
}

var subtest = &place{subtest: true}

// site is a call, or a function handed over to run on another goroutine
// (require.Eventually(t, ready, ...), wg.Go(work)); in is the goroutine it runs on
// (nil: the one calling owner), owner the function or closure variable it is in.
type site struct {
	node  ast.Expr
	in    *place
	owner types.Object
}

// run records every call of the package with the goroutine it runs on, computes and
// exports the facts, then reports the calls off the test's goroutine that end the test.
func run(pass *analysis.Pass) (any, error) {
	// go vet runs the tool over every dependency, for facts; only this module's
	// packages can have any, and only they are reported on.
	if !inModule(pass.Pkg) {
		return nil, nil
	}
	w := &walker{pass: pass, facts: map[types.Object]string{}}
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			w.owner = nil
			if fd, ok := d.(*ast.FuncDecl); ok {
				w.owner = pass.TypesInfo.Defs[fd.Name]
			}
			w.walk(d, nil)
		}
	}
	w.exportFacts()

	for _, s := range w.sites {
		if s.in == nil || s.in.subtest {
			continue
		}
		if what, _ := endsTest(pass, s.node); what != "" {
			verb := "fails"
			if strings.Contains(what, ".Skip") {
				verb = "skips"
			}
			pass.Reportf(s.node.Pos(), "%s %s the test off the test's goroutine (%s): %s", what, verb, s.in.where, s.in.hint)
		} else if obj, via := w.target(s.node); via != "" {
			pass.Reportf(s.node.Pos(), "%s may fail the test (it calls %s) off the test's goroutine (%s): %s",
				name(obj, pass.Pkg), via, s.in.where, s.in.hint)
		}
	}
	return nil, nil
}

// exportFacts finds every function and closure variable of the package that calls, on
// its caller's goroutine, something that ends the test, and exports failsTest on the
// functions. They call each other in any order, so it iterates until none changes.
func (w *walker) exportFacts() {
	for changed := true; changed; {
		changed = false
		for _, s := range w.sites {
			if s.in != nil || s.owner == nil || w.facts[s.owner] != "" {
				continue
			}
			_, via := endsTest(w.pass, s.node)
			if via == "" {
				if obj, calls := w.target(s.node); calls != "" {
					via = name(obj, nil)
				}
			}
			if via != "" {
				w.facts[s.owner] = via
				changed = true
			}
		}
	}
	for obj, via := range w.facts {
		if fn, ok := obj.(*types.Func); ok {
			w.pass.ExportObjectFact(fn, &failsTest{Via: via})
		}
	}
}

// walker records every call with the goroutine it runs on.
type walker struct {
	pass  *analysis.Pass
	owner types.Object
	sites []site
	facts map[types.Object]string // the package's functions and closures that end the test
}

func (w *walker) walk(root ast.Node, in *place) {
	ast.Inspect(root, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			// The arguments are evaluated on the caller's goroutine, the call on the new one.
			off := &place{where: "inside a go statement", hint: "keep the error and check it after the goroutine ends"}
			if lit, ok := n.Call.Fun.(*ast.FuncLit); ok {
				w.walk(lit.Body, off)
			} else {
				w.sites = append(w.sites, site{n.Call, off, w.owner})
				w.walk(n.Call.Fun, in)
			}
			for _, a := range n.Call.Args {
				w.walk(a, in)
			}
			return false
		case *ast.CallExpr:
			w.sites = append(w.sites, site{n, in, w.owner})
			body := w.bodyPlace(n)
			if body == nil {
				return true
			}
			w.walk(n.Fun, in)
			for _, a := range n.Args {
				if lit, ok := a.(*ast.FuncLit); ok {
					w.walk(lit.Body, body)
					continue
				}
				// wg.Go(work), Eventually(t, ready, ...): the named function runs there.
				// (Not wg.Go(newWorker(t)): that call runs here, the result there.)
				switch a.(type) {
				case *ast.Ident, *ast.SelectorExpr:
					if _, ok := w.pass.TypesInfo.TypeOf(a).(*types.Signature); ok && !body.subtest {
						w.sites = append(w.sites, site{a, body, w.owner})
					}
				}
				w.walk(a, in)
			}
			return false
		case *ast.AssignStmt:
			if len(n.Lhs) != len(n.Rhs) {
				return true
			}
			for i := range n.Lhs {
				w.walkValue(n.Lhs[i], n.Rhs[i], in)
			}
			return false
		case *ast.ValueSpec:
			if len(n.Names) != len(n.Values) {
				return true
			}
			for i := range n.Names {
				w.walkValue(n.Names[i], n.Values[i], in)
			}
			return false
		}
		return true
	})
}

// walkValue walks lhs = rhs. A closure kept in a variable (probe := func...) runs on
// the goroutine of whoever calls it, so it is walked as a function of its own: calls
// of the variable then count like calls of a function.
func (w *walker) walkValue(lhs, rhs ast.Expr, in *place) {
	lit, isLit := rhs.(*ast.FuncLit)
	id, isIdent := lhs.(*ast.Ident)
	if isLit && isIdent {
		if v, ok := w.pass.TypesInfo.ObjectOf(id).(*types.Var); ok {
			owner := w.owner
			w.owner = v
			w.walk(lit.Body, nil)
			w.owner = owner
			return
		}
	}
	w.walk(lhs, in)
	w.walk(rhs, in)
}

// bodyPlace says where a function literal passed to call runs, when not on the
// caller's goroutine: wg.Go and errgroup's Go start a goroutine, testify's
// Eventually/Never (and EventuallyWithT) run the condition on one, and t.Run runs its
// body on a test goroutine of its own.
func (w *walker) bodyPlace(call *ast.CallExpr) *place {
	fn, _ := typeutil.Callee(w.pass.TypesInfo, call).(*types.Func)
	if fn == nil {
		return nil
	}
	pkg := ""
	if fn.Pkg() != nil {
		pkg = fn.Pkg().Path()
	}
	recv := fn.Signature().Recv()
	switch {
	case fn.Name() == "Go" && recv != nil:
		x := "Go"
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			x = types.ExprString(sel.X) + ".Go"
		}
		return &place{where: "inside " + x, hint: "keep the error and check it after the goroutine ends"}
	case pkg == assertPath || pkg == requirePath:
		name := fn.Pkg().Name() + "." + fn.Name()
		where := "inside " + name + "'s condition, which testify runs on a goroutine of its own"
		switch fn.Name() {
		case "Eventually", "Eventuallyf", "Never", "Neverf":
			return &place{where: where, hint: "use require.EventuallyWithT with its *assert.CollectT, or return false"}
		case "EventuallyWithT", "EventuallyWithTf":
			// FailNow on the *assert.CollectT is fine (it is no testing value here);
			// on the test's t it is not.
			return &place{where: where, hint: "pass it the *assert.CollectT instead of the test"}
		}
	case pkg == "testing" && (fn.Name() == "Run" || fn.Name() == "Fuzz"):
		return subtest
	}
	return nil
}

// endsTest says whether call ends the test by itself: a require function given a
// testing value, or FailNow/Fatal*/Skip* on one. what names it for a message in this
// package, via for a fact.
func endsTest(pass *analysis.Pass, node ast.Expr) (what, via string) {
	call, ok := node.(*ast.CallExpr)
	if !ok {
		return "", ""
	}
	if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
		if s := pass.TypesInfo.Selections[sel]; s != nil && s.Kind() == types.MethodVal {
			switch sel.Sel.Name {
			case "FailNow", "Fatal", "Fatalf", "SkipNow", "Skip", "Skipf":
				if isTestingValue(s.Recv()) {
					name := types.ExprString(sel.X) + "." + sel.Sel.Name
					return name, name
				}
			}
			return "", ""
		}
	}
	fn, _ := typeutil.Callee(pass.TypesInfo, call).(*types.Func)
	if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != requirePath || fn.Signature().Recv() != nil {
		return "", ""
	}
	if len(call.Args) > 0 && isTestingValue(pass.TypesInfo.TypeOf(call.Args[0])) {
		return "require." + fn.Name(), "require"
	}
	return "", ""
}

// target returns what node calls (or, for a function handed over, is) and, when it
// ends the test, what it calls that does: from this package's facts and closures, or
// from the failsTest fact of a function of another package of the module.
func (w *walker) target(node ast.Expr) (types.Object, string) {
	var obj types.Object
	switch n := node.(type) {
	case *ast.CallExpr:
		obj = typeutil.Callee(w.pass.TypesInfo, n)
	case *ast.Ident:
		obj = w.pass.TypesInfo.Uses[n]
	case *ast.SelectorExpr:
		if sel := w.pass.TypesInfo.Selections[n]; sel != nil {
			obj = sel.Obj()
		} else {
			obj = w.pass.TypesInfo.Uses[n.Sel]
		}
	}
	if fn, ok := obj.(*types.Func); ok {
		obj = fn.Origin() // facts are on the generic declaration, not its instances
	}
	if obj == nil {
		return nil, ""
	}
	if via := w.facts[obj]; via != "" {
		return obj, via
	}
	fact := new(failsTest)
	if fn, ok := obj.(*types.Func); ok && inModule(fn.Pkg()) && fn.Pkg() != w.pass.Pkg && w.pass.ImportObjectFact(fn, fact) {
		return obj, fact.Via
	}
	return obj, ""
}

// isTestingValue says whether t can end a test: it has FailNow() (*testing.T, B, F,
// testing.TB, the module's own stand-ins). Types of testify are not: FailNow on an
// *assert.CollectT ends only the condition, which is what EventuallyWithT expects.
func isTestingValue(t types.Type) bool {
	if t == nil {
		return false
	}
	named := t
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		named = p.Elem()
	}
	if n, ok := types.Unalias(named).(*types.Named); ok && n.Obj().Pkg() != nil && strings.HasPrefix(n.Obj().Pkg().Path(), testify) {
		return false
	}
	obj, _, _ := types.LookupFieldOrMethod(t, true, nil, "FailNow")
	fn, ok := obj.(*types.Func)
	return ok && fn.Signature().Params().Len() == 0 && fn.Signature().Results().Len() == 0
}

func inModule(p *types.Package) bool {
	return p != nil && (p.Path() == module || strings.HasPrefix(p.Path(), module+"/"))
}

// name names a function as a reader of package from would write it:
// "webtest.ReadBody", "(*webtest.App).PostForm", without the package when it is from;
// a closure variable by its name.
func name(obj types.Object, from *types.Package) string {
	fn, ok := obj.(*types.Func)
	if !ok {
		return obj.Name()
	}
	qual := func(p *types.Package) string {
		if p == from {
			return ""
		}
		return p.Name()
	}
	if recv := fn.Signature().Recv(); recv != nil {
		return "(" + types.TypeString(recv.Type(), qual) + ")." + fn.Name()
	}
	if q := qual(fn.Pkg()); q != "" {
		return q + "." + fn.Name()
	}
	return fn.Name()
}
