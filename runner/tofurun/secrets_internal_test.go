//go:build !fast

// Live: needs root, as the runc executor does: it lends a directory to another uid.

package tofurun

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSecretDir: files are 0400 in a 0700 directory, replaced by a rename (a new file
// each time, so a directory mount shows it); a lent directory and everything in it,
// including a file written while it is lent, belong to the borrower until given back;
// Env names the files where the command sees them.
func TestSecretDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("lending the directory to another uid needs root; CI runs as root")
	}
	d, err := newSecretDir(filepath.Join(t.TempDir(), "job-1.secrets"))
	require.NoError(t, err)
	owner := func(p string) (uint32, uint32, os.FileMode, uint64) {
		t.Helper()
		var st syscall.Stat_t
		require.NoError(t, syscall.Lstat(p, &st))
		return st.Uid, st.Gid, os.FileMode(st.Mode).Perm(), st.Ino
	}
	file := filepath.Join(d.Dir(), tokenFile)
	require.NoError(t, d.Write(tokenFile, []byte("first")))
	require.NoError(t, d.SetEnv([]string{"SANDBOX_TOKEN_FILE=/run/secrets/cloud-token"}))
	_, _, dirMode, _ := owner(d.Dir())
	require.Equal(t, os.FileMode(0o700), dirMode)
	uid, _, mode, ino := owner(file)
	require.Equal(t, uint32(0), uid)
	require.Equal(t, os.FileMode(0o400), mode)
	require.Equal(t, []string{"SANDBOX_TOKEN_FILE=/run/secrets/cloud-token"}, d.Env())

	giveBack, err := d.Lend(424242, 434343)
	require.NoError(t, err)
	for _, p := range []string{d.Dir(), file} {
		u, g, _, _ := owner(p)
		require.Equal(t, [2]uint32{424242, 434343}, [2]uint32{u, g}, p)
	}
	require.NoError(t, d.Write(tokenFile, []byte("second")))
	u, g, mode, ino2 := owner(file)
	require.Equal(t, [2]uint32{424242, 434343}, [2]uint32{u, g}, "written while lent: the borrower's")
	require.Equal(t, os.FileMode(0o400), mode)
	require.NotEqual(t, ino, ino2, "replaced by a rename, not rewritten in place")
	body, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "second", string(body))

	require.NoError(t, giveBack())
	for _, p := range []string{d.Dir(), file} {
		u, g, _, _ := owner(p)
		require.Equal(t, [2]uint32{0, 0}, [2]uint32{u, g}, p)
	}
	ents, err := os.ReadDir(d.Dir())
	require.NoError(t, err)
	require.Len(t, ents, 1, "no temporary file is left")
	require.Error(t, d.Write("../escape", nil))
	require.Error(t, d.Write(".hidden", nil))
	require.NoError(t, d.remove())
	require.NoDirExists(t, d.Dir())
	var none *SecretDir
	require.Empty(t, none.Env())
	require.Empty(t, none.Dir())
}
