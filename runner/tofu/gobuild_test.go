package tofu

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// tinyModule writes a module whose main package prints with fmt (body replaces main's).
func tinyModule(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tiny\n\ngo 1.24\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() {\n"+body+"\n}\n"), 0o644))
	return dir
}

// TestGoBuildCountsCompiledPackages builds a tiny program with an empty build cache:
// `go list -deps` gives the total, every package `go build -json -v` compiles counts,
// and a finished build counts all of them. A second build finds everything cached,
// reports nothing compiled, and still ends complete.
func TestGoBuildCountsCompiledPackages(t *testing.T) {
	t.Setenv("GOCACHE", t.TempDir())
	t.Setenv("GOFLAGS", "")
	dir := tinyModule(t, `fmt.Println("hi")`)
	b := GoBuild{Label: "tiny", Dir: dir, Package: ".", Flags: []string{"-trimpath", "-o", filepath.Join(dir, "tiny")}}

	var p BuildProgress
	require.NoError(t, b.Count(t.Context(), &p))
	_, done, total := p.Counts()
	require.Zero(t, done)
	require.Greater(t, total, 15, "fmt needs the runtime and a dozen more")

	var log bytes.Buffer
	require.NoError(t, b.Run(t.Context(), &p, &log))
	p.mu.Lock()
	compiled := len(p.parts[0].seen)
	p.mu.Unlock()
	require.Greater(t, compiled, total/2, "an empty cache compiles most packages")
	require.LessOrEqual(t, compiled, total)
	step, done, total2 := p.Counts()
	require.Equal(t, total, total2)
	require.Equal(t, total, done, "a finished build counts every package")
	require.Equal(t, "compiling tiny", step, "the count is Counts', not the step's")
	require.NotContains(t, log.String(), `"Action"`, "events are counted, not logged")
	_, err := os.Stat(filepath.Join(dir, "tiny"))
	require.NoError(t, err)

	var again BuildProgress
	require.NoError(t, b.Count(t.Context(), &again))
	require.NoError(t, b.Run(t.Context(), &again, &log))
	_, done, total = again.Counts()
	require.Equal(t, total, done)
}

// TestGoBuildFailureKeepsTheCompilersMessages: a build that fails says so, its
// messages go to the log, and the build does not count as finished.
func TestGoBuildFailureKeepsTheCompilersMessages(t *testing.T) {
	t.Parallel()
	dir := tinyModule(t, `x := 1`)
	b := GoBuild{Label: "broken", Dir: dir, Package: ".", Flags: []string{"-o", filepath.Join(dir, "broken")}}
	var p BuildProgress
	require.NoError(t, b.Count(t.Context(), &p))
	var log bytes.Buffer
	err := b.Run(t.Context(), &p, &log)
	require.ErrorContains(t, err, "building broken")
	require.Contains(t, log.String(), "declared and not used: x", "%v", err)
	_, done, total := p.Counts()
	require.Less(t, done, total)
	require.False(t, strings.Contains(log.String(), "build-fail"))

	var nothing *BuildProgress // nil counts nothing and does not panic
	nothing.SetStep("x")
	_, done, total = nothing.Counts()
	require.Zero(t, done+total)
}

// TestCacheOnlyLeavesGoRunItsOwnPackage: a CacheOnly build with an empty build cache
// compiles every package the program imports and links nothing; `go run` with the same
// flags then compiles the main package alone (-v names each package it compiles).
func TestCacheOnlyLeavesGoRunItsOwnPackage(t *testing.T) {
	t.Setenv("GOCACHE", t.TempDir())
	t.Setenv("GOFLAGS", "")
	dir := tinyModule(t, `fmt.Println(greet.Hello())`)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(
		"package main\n\nimport (\n\t\"fmt\"\n\n\t\"tiny/greet\"\n)\n\nfunc main() { fmt.Println(greet.Hello()) }\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "greet"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "greet", "greet.go"), []byte(
		"package greet\n\nfunc Hello() string { return \"hi\" }\n"), 0o644))
	b := GoBuild{Label: "tiny", Dir: dir, Package: ".", Flags: []string{"-trimpath"}, CacheOnly: true}

	var p BuildProgress
	require.NoError(t, b.Count(t.Context(), &p))
	require.NoError(t, b.Run(t.Context(), &p, t.Output()))
	_, done, total := p.Counts()
	require.Equal(t, total, done)
	p.mu.Lock()
	_, greetCompiled := p.parts[0].seen["tiny/greet"]
	_, mainCompiled := p.parts[0].seen["tiny"]
	p.mu.Unlock()
	require.True(t, greetCompiled, "the program's own library is compiled")
	require.False(t, mainCompiled, "the main package is left to go run")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 3, "nothing linked into the module: %v", entries)

	run := exec.Command("go", "run", "-trimpath", "-v", ".")
	run.Dir = dir
	var stderr bytes.Buffer
	run.Stderr = &stderr
	out, err := run.Output()
	require.NoError(t, err, stderr.String())
	require.Equal(t, "hi\n", string(out))
	require.Equal(t, "tiny\n", stderr.String(), "go run compiled only the main package")
}

// TestNicedBuildRunsItsCompilersAtNice19: every tool a Niced build runs (compile, asm,
// link, through -toolexec) runs at nice 19, by nice(1) around the go command and not by
// anything this process does to its own threads.
func TestNicedBuildRunsItsCompilersAtNice19(t *testing.T) {
	t.Setenv("GOCACHE", t.TempDir())
	t.Setenv("GOFLAGS", "")
	dir := tinyModule(t, `fmt.Println("hi")`)
	seen := filepath.Join(t.TempDir(), "nice")
	t.Setenv("NICE_SEEN", seen)
	script := filepath.Join(t.TempDir(), "record-nice")
	// Field 19 of /proc/<pid>/stat is the process's nice value.
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\nawk '{print $19}' /proc/$$/stat >> \"$NICE_SEEN\"\nexec \"$@\"\n"), 0o755))
	b := GoBuild{Label: "tiny", Dir: dir, Package: ".", Niced: true,
		Flags: []string{"-toolexec", script, "-o", filepath.Join(dir, "tiny")}}
	require.NoError(t, b.Run(t.Context(), nil, t.Output()))
	out, err := os.ReadFile(seen)
	require.NoError(t, err)
	values := strings.Fields(string(out))
	require.Greater(t, len(values), 10, "fmt's packages are compiled and the program linked")
	for _, v := range values {
		require.Equal(t, "19", v, "every tool runs at nice 19: %v", values)
	}
}
