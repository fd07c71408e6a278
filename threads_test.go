package gantry_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// A goroutine that locks its OS thread and ends without unlocking it ends the thread
// too, and Linux sends Pdeathsig to every child the thread forked: not only the locked
// goroutine's, but any process another goroutine started from that thread before (a runc
// job, a test's store, a Kubernetes component). That killed a runc apply halfway through
// a test, so no code of the module keeps a thread locked: every function that calls
// runtime.LockOSThread also calls runtime.UnlockOSThread.

// threadsLockedForGood names the functions in src that lock their thread and never
// unlock it.
func threadsLockedForGood(path string, src []byte) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, src, 0)
	if err != nil {
		return nil, err
	}
	runtimeName := ""
	for _, imp := range f.Imports {
		if imp.Path.Value == `"runtime"` {
			runtimeName = "runtime"
			if imp.Name != nil {
				runtimeName = imp.Name.Name
			}
		}
	}
	if runtimeName == "" {
		return nil, nil
	}
	// The innermost function literal or declaration holds the call: a goroutine's
	// func literal is where its lock must end.
	var out []string
	var visit func(name string, body ast.Node)
	visit = func(name string, body ast.Node) {
		locks, unlocks := false, false
		ast.Inspect(body, func(n ast.Node) bool {
			if lit, ok := n.(*ast.FuncLit); ok && n != body {
				visit(name+" (a func literal)", lit.Body)
				return false
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == runtimeName {
				locks = locks || sel.Sel.Name == "LockOSThread"
				unlocks = unlocks || sel.Sel.Name == "UnlockOSThread"
			}
			return true
		})
		if locks && !unlocks {
			out = append(out, path+": "+name+" locks its OS thread and never unlocks it")
		}
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
			visit(fn.Name.Name, fn.Body)
		}
	}
	return out, nil
}

// TestNoThreadIsLockedForGood checks every Go file of the module.
func TestNoThreadIsLockedForGood(t *testing.T) {
	t.Parallel()
	files := moduleFiles(t, ".go")
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		found, err := threadsLockedForGood(path, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			t.Error(f)
		}
	}
	if len(files) < 500 {
		t.Fatalf("only %d Go files were read: the walk is wrong", len(files))
	}
}

// TestPlantedLockedThreadIsCaught: the lock that killed the runc apply (a goroutine's
// func literal that locks and never unlocks, as SeaweedFS's niced build did) is caught,
// under the runtime's own name or another; a lock with its unlock is not.
func TestPlantedLockedThreadIsCaught(t *testing.T) {
	t.Parallel()
	const planted = `package p

import "runtime"

func niced(f func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		f()
		close(done)
	}()
	<-done
}
`
	got, err := threadsLockedForGood("p.go", []byte(planted))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.Contains(got[0], "niced (a func literal)") {
		t.Errorf("the planted lock was not caught: %v", got)
	}
	renamed := strings.Replace(strings.Replace(planted, `import "runtime"`, `import rt "runtime"`, 1), "runtime.Lock", "rt.Lock", 1)
	if got, _ := threadsLockedForGood("p.go", []byte(renamed)); len(got) != 1 {
		t.Errorf("the planted lock under another import name was not caught: %v", got)
	}
	unlocked := strings.Replace(planted, "runtime.LockOSThread()", "runtime.LockOSThread()\n\t\tdefer runtime.UnlockOSThread()", 1)
	if got, _ := threadsLockedForGood("p.go", []byte(unlocked)); len(got) != 0 {
		t.Errorf("a lock with its unlock was reported: %v", got)
	}
}
