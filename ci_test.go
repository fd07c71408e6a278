package gantry_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubjectCheckFiresOnALongSubject runs .ci/subjects on a repository of its own: a
// 72-character subject passes, an 80-character one after the base fails CI, one before
// the base is history.
func TestSubjectCheckFiresOnALongSubject(t *testing.T) {
	script, err := filepath.Abs(".ci/subjects")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	check := func(base string) (string, error) {
		cmd := exec.Command(script, base)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	git("init", "-q")
	git("commit", "-q", "--allow-empty", "-m", strings.Repeat("o", 90)+" (before the base)")
	base := git("rev-parse", "HEAD")
	// 72 characters, one of them outside ASCII: characters are counted, not bytes.
	git("commit", "-q", "--allow-empty", "-m", "Count characters — "+strings.Repeat("x", 53))
	if out, err := check(base); err != nil {
		t.Fatalf("a 72-character subject is allowed, and the one before the base is history: %v\n%s", err, out)
	}
	git("commit", "-q", "--allow-empty", "-m", strings.Repeat("y", 80), "-m", "The body may be as long as it needs.")
	out, err := check(base)
	if err == nil || !strings.Contains(out, "80 characters, at most 72") || !strings.Contains(out, "1 with a subject over 72") {
		t.Fatalf("an 80-character subject must fail the check: %v\n%s", err, out)
	}
	t.Logf("the check said:\n%s", out)
}
