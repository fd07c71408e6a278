package gantry_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryTaskParses runs `go tool task --dry --force` for every task the Taskfile lists: each
// one must parse, resolve its variables and expand its commands with the task runner
// version go.mod pins (go tool task), so a change of that version that drops a feature
// the Taskfile uses fails here rather than in a newcomer's first command.
func TestEveryTaskParses(t *testing.T) {
	out, err := exec.Command("go", "tool", "task", "--list-all", "--json").Output()
	if err != nil {
		t.Fatalf("go tool task --list-all --json: %v", err)
	}
	var list struct {
		Tasks []struct{ Name string }
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("reading the task list: %v\n%s", err, out)
	}
	if len(list.Tasks) < 20 {
		t.Fatalf("only %d tasks listed: %s", len(list.Tasks), out)
	}
	for _, task := range list.Tasks {
		out, err := exec.Command("go", "tool", "task", "--dry", "--force", task.Name).CombinedOutput()
		if err != nil {
			t.Errorf("go tool task --dry --force %s: %v\n%s", task.Name, err, out)
			continue
		}
		if task.Name != "default" && !strings.Contains(string(out), "task: [") {
			t.Errorf("go tool task --dry --force %s printed no command:\n%s", task.Name, out)
		}
	}
}

// TestGenerateSkipsTemplWhileCurrent: `generate`, a dependency of dev, build and the
// tests, is up to date while views/templ.sum matches the templates and the generated
// code, so a fresh clone never builds templ; a changed template makes it run again.
func TestGenerateSkipsTemplWhileCurrent(t *testing.T) {
	dir := t.TempDir()
	cp := exec.Command("cp", "-r", "Taskfile.yml", "views", dir)
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("copying: %v\n%s", err, out)
	}
	if out, err := exec.Command("mkdir", "-p", filepath.Join(dir, ".ci")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := exec.Command("cp", ".ci/templ-sum", filepath.Join(dir, ".ci")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	status := func() error {
		return exec.Command("go", "tool", "task", "--dir", dir, "--status", "generate").Run()
	}
	if err := status(); err != nil {
		t.Fatalf("generate is not up to date in a copy of the checkout (run go tool task generate and commit views/templ.sum): %v", err)
	}
	templ := filepath.Join(dir, "views", "layout.templ")
	f, err := os.OpenFile(templ, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n// changed\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if status() == nil {
		t.Fatal("a changed template left generate up to date")
	}
}
