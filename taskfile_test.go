package gantry_test

import (
	"encoding/json"
	"os/exec"
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

