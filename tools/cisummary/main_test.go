package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A module of four packages, each ending a different way, run by the real go test.
var planted = map[string]string{
	"go.mod": "module planted\n\ngo 1.24\n",
	"good/good_test.go": `package good
import "testing"
func TestGood(t *testing.T) {
	t.Run("one", func(t *testing.T) {})
	t.Run("two", func(t *testing.T) {})
}
func FuzzSeeds(f *testing.F) { f.Add(1); f.Fuzz(func(t *testing.T, n int) {}) }
`,
	"failing/failing_test.go": `package failing
import "testing"
func TestFine(t *testing.T) {}
func TestBroken(t *testing.T) { t.Run("inner", func(t *testing.T) { t.Error("no") }) }
`,
	"nobuild/nobuild_test.go": `package nobuild
import "testing"
func TestNever(t *testing.T) { undefined() }
`,
	"boom/boom_test.go": `package boom
import "testing"
func TestMain(m *testing.M) { panic("the database did not start") }
func TestUnreached(t *testing.T) {}
`,
}

func TestSummaryOfARealRun(t *testing.T) {
	dir := t.TempDir()
	for name, text := range planted {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.Output()
	require.Error(t, err, "three of the four packages fail")

	s, err := Read(bytes.NewReader(out))
	require.NoError(t, err)
	require.Equal(t, Count{Passed: 2, Failed: 1}, s.Tests, "TestGood, TestFine; TestBroken")
	require.Equal(t, Count{Passed: 1}, s.Fuzz)
	require.Equal(t, Count{Passed: 3, Failed: 1}, s.Subtests, "one, two, the fuzz seed; inner")
	require.Equal(t, Count{Passed: 1, Failed: 3}, s.Packages)
	require.Equal(t, []string{"planted/failing.TestBroken"}, s.FailedTests)
	require.Len(t, s.PackageFailures, 2, "a build failure and a panic in TestMain, which no test count shows: %v", s.PackageFailures)
	failures := strings.Join(s.PackageFailures, "\n")
	require.Contains(t, failures, "planted/nobuild: build failed")
	require.Contains(t, failures, "planted/boom: panic: the database did not start")
	require.False(t, s.OK())

	text := s.Text(3)
	require.Contains(t, text, "top-level tests: 2 passed, 1 failed, 0 skipped")
	require.Contains(t, text, "FAILED package planted/boom: panic: the database did not start")
	require.Contains(t, text, "the 3 slowest top-level tests:")
	require.Equal(t, 3, strings.Count(text, " s  planted/"), text)
}

// A skipped test is counted apart (the events as go test writes them; the suite itself
// skips nothing, so no planted package does).
func TestSkipsAreCounted(t *testing.T) {
	s, err := Read(strings.NewReader(`{"Action":"skip","Package":"p","Test":"TestA","Elapsed":0}
{"Action":"skip","Package":"p","Test":"TestA/sub","Elapsed":0}
{"Action":"pass","Package":"p","Test":"TestB","Elapsed":0.5}
{"Action":"pass","Package":"p","Elapsed":0.6}
`))
	require.NoError(t, err)
	require.Equal(t, Count{Passed: 1, Skipped: 1}, s.Tests)
	require.Equal(t, Count{Skipped: 1}, s.Subtests)
	require.Contains(t, s.Text(1), "top-level tests: 1 passed, 0 failed, 1 skipped")
}

func TestAnEmptyRunIsNotAPass(t *testing.T) {
	s, err := Read(strings.NewReader("not json\n"))
	require.NoError(t, err)
	require.False(t, s.OK(), "a run where nothing ran says nothing about the code")
	require.NotContains(t, s.Text(10), "slowest")
}
