//go:build !fast

// Live: needs runc (as root).

package web_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/runner/oci"
)

// runcCgroupMounts lists the host's cgroup mountpoints (v1 hierarchies and cgroup2).
func runcCgroupMounts(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(fs) >= 1 && (fs[0] == "cgroup" || fs[0] == "cgroup2") {
			out = append(out, fields[4])
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// runcRemoveCgroupRoot removes the executor's (empty) cgroup root in every hierarchy.
func runcRemoveCgroupRoot(root string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(fs) >= 1 && (fs[0] == "cgroup" || fs[0] == "cgroup2") {
			_ = os.Remove(filepath.Join(fields[4], root))
		}
	}
}

// runcAssertNoLeftovers checks that no container, bundle or job cgroup is left.
func runcAssertNoLeftovers(t *testing.T, ex *oci.Executor) {
	t.Helper()
	out, err := exec.Command("runc", "--root", ex.StateRoot, "list", "-q").CombinedOutput()
	require.NoError(t, err, "runc list: %s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "containers left")
	ents, err := os.ReadDir(ex.BundleRoot)
	require.NoError(t, err)
	require.Empty(t, ents, "bundles left")
	for _, m := range runcCgroupMounts(t) {
		ents, err := os.ReadDir(filepath.Join(m, ex.CgroupRoot))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		for _, e := range ents {
			require.False(t, e.IsDir(), "cgroup left: %s", filepath.Join(m, ex.CgroupRoot, e.Name()))
		}
	}
}
