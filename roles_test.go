package gantry_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxMethods is the most methods a type of models/run may have: the run lifecycle is
// a set of small roles (models/run/roles.go), not one service every caller holds.
const maxMethods = 25

// runSources reads the non-test Go files of models/run.
func runSources(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("models/run/*.go")
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string][]byte{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		srcs[p] = b
	}
	if len(srcs) < 10 {
		t.Fatalf("found %d files in models/run: the check reads the wrong directory", len(srcs))
	}
	return srcs
}

// roleProblems reads a package's files and names every type with more than
// maxMethods methods (exported or not) and every struct type with methods that
// embeds another type: a role holds another role in a named field, so what it may
// call shows in its type, and no type gathers the others' methods again.
func roleProblems(srcs map[string][]byte) ([]string, error) {
	fset := token.NewFileSet()
	methods := map[string]int{}
	embeds := map[string][]string{}
	for name, src := range srcs {
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					methods[receiverType(d.Recv.List[0].Type)]++
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, field := range st.Fields.List {
						if len(field.Names) == 0 {
							embeds[ts.Name.Name] = append(embeds[ts.Name.Name], receiverType(field.Type))
						}
					}
				}
			}
		}
	}
	var out []string
	for typ, n := range methods {
		if n > maxMethods {
			out = append(out, fmt.Sprintf("%s has %d methods (at most %d)", typ, n, maxMethods))
		}
		for _, e := range embeds[typ] {
			out = append(out, fmt.Sprintf("%s embeds %s: hold it in a named field", typ, e))
		}
	}
	slices.Sort(out)
	return out, nil
}

// receiverType is the name of a receiver's or an embedded field's type: T for T, *T,
// T[P] and pkg.T.
func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.SelectorExpr:
		return receiverType(e.X) + "." + e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return fmt.Sprintf("%T", e)
}

// TestRunRolesStayNarrow: no type in models/run has more than 25 methods, and no type
// with methods embeds another (models/run/roles.go).
func TestRunRolesStayNarrow(t *testing.T) {
	problems, err := roleProblems(runSources(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("models/run:\n  %s", strings.Join(problems, "\n  "))
	}
}

// TestPlantedRoleProblemsAreCaught plants, beside the real files, a role that embeds
// another and a type with one method too many: the check names both, and only them.
func TestPlantedRoleProblemsAreCaught(t *testing.T) {
	srcs := runSources(t)
	var wide strings.Builder
	wide.WriteString("package run\n\ntype wide struct{}\n\n")
	for i := range maxMethods + 1 {
		fmt.Fprintf(&wide, "func (wide) m%d() {}\n", i)
	}
	srcs["models/run/planted_wide.go"] = []byte(wide.String())
	srcs["models/run/planted_facade.go"] = []byte("package run\n\n// Facade gathers two roles again.\n" +
		"type Facade struct {\n\t*Decisions\n\tReads *Reads\n}\n\nfunc (f *Facade) Name() string { return \"facade\" }\n")
	problems, err := roleProblems(srcs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Facade embeds Decisions: hold it in a named field",
		fmt.Sprintf("wide has %d methods (at most %d)", maxMethods+1, maxMethods),
	}
	if !slices.Equal(problems, want) {
		t.Errorf("planted problems:\n got %q\nwant %q", problems, want)
	}
}
