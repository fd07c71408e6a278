package tofu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
)

// A process waiting for another's build mirrors its count: the builder publishes it
// beside the lock, the waiter reads it into its own progress, and the file goes with
// the build.
func TestWaiterSeesTheBuildersCount(t *testing.T) {
	file := progressFile(filepath.Join(t.TempDir(), "tofu"))
	require.True(t, strings.HasSuffix(file, "/.tofu.progress"), file)

	var builder BuildProgress
	builder.expect("OpenTofu", 10)
	for _, pkg := range []string{"a", "b", "c"} {
		builder.compiled("OpenTofu", pkg)
	}
	stopPublish := publishProgress(file, "OpenTofu", &builder)
	bench.Eventually(t, "the builder's count in "+file, 5*time.Second, func() (bool, any) {
		done, total, ok := readProgress(file)
		return ok && done == 3 && total == 10, [2]int{done, total}
	}, bench.Poll(50*time.Millisecond))

	var waiter BuildProgress
	stopMirror := mirrorProgress(file, "OpenTofu", &waiter)
	builder.compiled("OpenTofu", "d")
	bench.Eventually(t, "the waiter's mirrored count", 10*time.Second, func() (bool, any) {
		step, done, total := waiter.Counts()
		return done == 4 && total == 10 && step == "another process is building OpenTofu", step
	}, bench.Poll(50*time.Millisecond))
	stopMirror()

	stopPublish()
	_, err := os.Stat(file)
	require.True(t, os.IsNotExist(err), "the count goes with the build: %v", err)
	waiter.finish("OpenTofu")
	_, done, total := waiter.Counts()
	require.Equal(t, [2]int{10, 10}, [2]int{done, total}, "a finished build counts all its packages")
}

func TestReadProgressRefusesNonsense(t *testing.T) {
	file := filepath.Join(t.TempDir(), ".tofu.progress")
	for _, text := range []string{"", "3", "3 2", "-1 5", "a b", "1 2 3"} {
		require.NoError(t, os.WriteFile(file, []byte(text), 0o644))
		_, _, ok := readProgress(file)
		require.False(t, ok, "%q", text)
	}
	require.NoError(t, os.WriteFile(file, []byte("7 9\n"), 0o644))
	done, total, ok := readProgress(file)
	require.True(t, ok)
	require.Equal(t, [2]int{7, 9}, [2]int{done, total})
}
