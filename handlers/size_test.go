package handlers

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

// A handler binds the request, makes one call to a read model or a service, and renders
// or redirects (issue 33): what a page shows is read in models/pages (or the aggregate
// the page is about), not gathered here. A function of handlers/ over maxLines lines is
// the sign of work that belongs below.
const maxLines = 40

// longFunctions lists the functions of the Go files in dir (tests and generated code
// left out) longer than maxLines, as "Receiver.name" or "name".
func longFunctions(t *testing.T, files map[string]string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var long []string
	for name, src := range files {
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxLines {
				long = append(long, funcName(fn))
			}
		}
	}
	slices.Sort(long)
	return long
}

// funcName is fn's name with its receiver's type, if it has one.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// sources reads the package's own Go files (tests and generated code left out).
func sources(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = string(b)
	}
	return files
}

// TestHandlersStayShort: no function of handlers/ is over maxLines lines.
func TestHandlersStayShort(t *testing.T) {
	t.Parallel()
	long := longFunctions(t, sources(t))
	for _, name := range long {
		t.Errorf("%s is over %d lines: read what its page shows in one call (models/pages) instead of gathering it here", name, maxLines)
	}
}

// TestLongHandlerIsCaught: a planted function of maxLines+1 lines is reported, one of
// maxLines is not, whether a method or a function.
func TestLongHandlerIsCaught(t *testing.T) {
	t.Parallel()
	body := func(lines int) string { return strings.Repeat("\t_ = 1\n", lines-2) }
	src := fmt.Sprintf("package handlers\n\ntype Planted struct{}\n\nfunc (h Planted) long() {\n%s}\n\nfunc fits() {\n%s}\n\nfunc alsoLong() {\n%s}\n",
		body(maxLines+1), body(maxLines), body(maxLines+1))
	got := longFunctions(t, map[string]string{"planted.go": src})
	if want := []string{"Planted.long", "alsoLong"}; !slices.Equal(got, want) {
		t.Errorf("planted functions: got %v, want %v", got, want)
	}
}
