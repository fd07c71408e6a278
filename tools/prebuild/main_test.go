package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/runner/tofu"
	"gantry/syncio"
)

// TestPrebuildSaysHowFarItHasCome compiles a small program of this module (tools/tofubuild)
// into an empty build cache: progress lines while it compiles, a last line with the count,
// and then `go run` with the same flags compiles only the program's main package.
func TestPrebuildSaysHowFarItHasCome(t *testing.T) {
	t.Setenv("GOCACHE", t.TempDir())
	t.Setenv("GOFLAGS", "")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	b := tofu.GoBuild{Label: "tofubuild", Dir: root, Package: "./tools/tofubuild", Flags: []string{"-trimpath"}, CacheOnly: true}
	var out syncio.Buffer // the reporting goroutine and the build both write it
	require.NoError(t, run(t.Context(), b, 200*time.Millisecond, false, &out))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Regexp(t, `^tofubuild: its \d+ packages are built \(.*\); linking and starting$`, lines[len(lines)-1])
	progress := regexp.MustCompile(`^tofubuild: (downloading modules and listing packages|compiling tofubuild)( \(\d+ of \d+ packages\))?, \d`)
	require.GreaterOrEqual(t, len(lines), 2, "compiling a few hundred packages into an empty cache takes more than 200 ms: %s", out.String())
	for _, l := range lines[:len(lines)-1] {
		require.Regexp(t, progress, l)
	}
	require.NotContains(t, out.String(), "go: downloading")

	list := exec.Command("go", "run", "-trimpath", "-v", "./tools/tofubuild", "-h")
	list.Dir = root
	var stderr bytes.Buffer
	list.Stderr = &stderr
	_ = list.Run() // -h exits 2
	require.True(t, strings.HasPrefix(stderr.String(), "gantry/tools/tofubuild\n"), "go run compiled more than the main package:\n%s", stderr.String())
	_, err = os.Stat(filepath.Join(root, "tofubuild"))
	require.True(t, os.IsNotExist(err), "nothing linked into the source tree")
}
