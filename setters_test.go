package gantry_test

import (
	"fmt"
	"go/ast"
	"go/types"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// The composition root builds every long-lived object of the portal, and builds it
// whole: dependencies go in through constructors. A method that assigns a receiver
// field of interface, func or pointer type is a setter (or a lazy wiring) that leaves
// the object half-built until someone calls it, and makes the order of lines in
// assemble.Build load-bearing. setterProblems finds them in every type assemble builds.

const assemblePkg = "gantry/cmd/gantry/assemble"

const loadMode = packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo

// builtTypes are the module's named types that the files of pkg build: the results of
// the calls they make and the composite literals they write.
func builtTypes(pkg *packages.Package) map[*types.TypeName]bool {
	out := map[*types.TypeName]bool{}
	add := func(t types.Type) {
		if tuple, ok := t.(*types.Tuple); ok {
			for i := range tuple.Len() {
				if named := namedOf(tuple.At(i).Type()); named != nil {
					out[named.Obj()] = true
				}
			}
			return
		}
		if named := namedOf(t); named != nil {
			out[named.Obj()] = true
		}
	}
	for _, f := range pkg.Syntax {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if tv, ok := pkg.TypesInfo.Types[n]; ok && !tv.IsType() {
					add(tv.Type)
				}
			case *ast.CompositeLit:
				add(pkg.TypesInfo.TypeOf(n))
			}
			return true
		})
	}
	return out
}

// namedOf is t's named type (through one pointer) when the module declares it.
func namedOf(t types.Type) *types.Named {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Pkg() == nil || !strings.HasPrefix(named.Obj().Pkg().Path(), "gantry/") {
		return nil
	}
	return named
}

// setterProblems loads the packages that declare the types assemble builds and names
// every method of theirs that assigns a receiver field (or a field of one) of
// interface, func or pointer type. overlay plants files, as go list's -overlay does.
func setterProblems(t *testing.T, overlay map[string][]byte) []string {
	t.Helper()
	cfg := &packages.Config{Mode: loadMode, Overlay: overlay, Tests: false}
	roots, err := packages.Load(cfg, assemblePkg)
	if err != nil || len(roots) != 1 || len(roots[0].Errors) > 0 {
		t.Fatalf("loading %s: %v %v", assemblePkg, err, roots)
	}
	built := builtTypes(roots[0])
	var paths []string
	for obj := range built {
		if !slices.Contains(paths, obj.Pkg().Path()) {
			paths = append(paths, obj.Pkg().Path())
		}
	}
	if len(built) < 20 {
		t.Fatalf("assemble builds %d types: the check reads the wrong package", len(built))
	}
	pkgs, err := packages.Load(cfg, paths...)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pkg := range pkgs {
		if len(pkg.Errors) > 0 {
			t.Fatalf("loading %s: %v", pkg.PkgPath, pkg.Errors)
		}
		for _, f := range pkg.Syntax {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv == nil || fd.Body == nil {
					continue
				}
				recv, typ := receiverOf(pkg, fd)
				if recv == nil || !builtByName(built, pkg.PkgPath, typ) {
					continue
				}
				for _, what := range assignedFields(pkg, fd.Body, recv) {
					out = append(out, fmt.Sprintf("%s.%s.%s assigns %s", filepath.Base(pkg.PkgPath), typ, fd.Name.Name, what))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// receiverOf is method fd's pointer receiver variable and the name of its type (nil
// for an unnamed receiver, which cannot assign anything, and for a value receiver,
// which assigns a copy: a method like web.Config.WithDefaults returns a new value).
func receiverOf(pkg *packages.Package, fd *ast.FuncDecl) (*types.Var, string) {
	field := fd.Recv.List[0]
	if len(field.Names) == 0 || field.Names[0].Name == "_" {
		return nil, ""
	}
	v, _ := pkg.TypesInfo.Defs[field.Names[0]].(*types.Var)
	if v == nil {
		return nil, ""
	}
	if _, pointer := v.Type().(*types.Pointer); !pointer {
		return nil, ""
	}
	named := namedOf(v.Type())
	if named == nil {
		return nil, ""
	}
	return v, named.Obj().Name()
}

// builtByName: the checks load each package again, so types are matched by package
// path and name.
func builtByName(built map[*types.TypeName]bool, path, name string) bool {
	for obj := range built {
		if obj.Pkg().Path() == path && obj.Name() == name {
			return true
		}
	}
	return false
}

// assignedFields names the fields of recv, or of fields of recv, of interface, func or
// pointer type that body assigns (in closures too).
func assignedFields(pkg *packages.Package, body *ast.BlockStmt, recv *types.Var) []string {
	var out []string
	ast.Inspect(body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok {
			return true
		}
		for _, lhs := range as.Lhs {
			sel, ok := ast.Unparen(lhs).(*ast.SelectorExpr)
			if !ok || !rootedAt(pkg, sel, recv) {
				continue
			}
			selection := pkg.TypesInfo.Selections[sel]
			if selection == nil || selection.Kind() != types.FieldVal {
				continue
			}
			switch selection.Type().Underlying().(type) {
			case *types.Interface, *types.Signature, *types.Pointer:
				out = append(out, fmt.Sprintf("%s (%s)", types.ExprString(sel), selection.Type()))
			}
		}
		return true
	})
	return out
}

// rootedAt: sel is recv.a or recv.a.b... .
func rootedAt(pkg *packages.Package, sel *ast.SelectorExpr, recv *types.Var) bool {
	for {
		switch x := ast.Unparen(sel.X).(type) {
		case *ast.Ident:
			return pkg.TypesInfo.Uses[x] == recv
		case *ast.SelectorExpr:
			sel = x
		case *ast.StarExpr:
			inner, ok := ast.Unparen(x.X).(*ast.SelectorExpr)
			if !ok {
				id, ok := ast.Unparen(x.X).(*ast.Ident)
				return ok && pkg.TypesInfo.Uses[id] == recv
			}
			sel = inner
		default:
			return false
		}
	}
}

// TestNoSetters: no type the composition root builds is wired after construction.
func TestNoSetters(t *testing.T) {
	if problems := setterProblems(t, nil); len(problems) > 0 {
		t.Errorf("setters (pass the dependency to the constructor instead):\n  %s", strings.Join(problems, "\n  "))
	}
}

// TestPlantedSetterIsCaught plants a setter on the job queue, the way Queue.Bind once
// wired the workers after construction: the check names it, and only it.
func TestPlantedSetterIsCaught(t *testing.T) {
	dir, err := filepath.Abs("runner")
	if err != nil {
		t.Fatal(err)
	}
	overlay := map[string][]byte{filepath.Join(dir, "planted_setter.go"): []byte(
		"package runner\n\n// BindPlanted wires the plan worker after construction.\nfunc (q *Queue) BindPlanted(p Plans) { q.plan.Plans = p }\n")}
	got := setterProblems(t, overlay)
	want := []string{"runner.Queue.BindPlanted assigns q.plan.Plans (gantry/runner.Plans)"}
	if !slices.Equal(got, want) {
		t.Errorf("planted setter:\n got %q\nwant %q", got, want)
	}
}
