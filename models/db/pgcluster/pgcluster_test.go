package pgcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// tempDir is t.TempDir for clusters: t.TempDir's 0700 parent is not
// enterable by the postgres user when tests run as root.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := MkdirTemp("pgcluster-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func start(t *testing.T, opts Options) *Cluster {
	t.Helper()
	c, err := Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

func mustExec(t *testing.T, dsn, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}

func TestRestartKeepsDataAndPort(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempDir(t), "nested", "data")

	c := start(t, Options{Dir: dir})
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	mustExec(t, c.URL("postgres"), "CREATE TABLE kept (id int); INSERT INTO kept VALUES (42)")
	port := c.Port()

	require.NoError(t, c.Stop())
	require.NoError(t, c.Stop(), "Stop is idempotent")
	require.Error(t, ping(context.Background(), c.URL("postgres")), "server is down after Stop")

	c2 := start(t, Options{Dir: dir})
	require.Equal(t, port, c2.Port(), "Port 0 reuses the port the Dir last ran on")
	conn, err := pgx.Connect(context.Background(), c2.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var id int
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT id FROM kept").Scan(&id))
	require.Equal(t, 42, id)
}

func TestStartReusesRunningServer(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempDir(t), "data")
	c := start(t, Options{Dir: dir, Fast: true})

	again := start(t, Options{Dir: dir, Fast: true})
	require.Equal(t, c.Port(), again.Port())
	require.NoError(t, ping(context.Background(), again.URL("postgres")))
}

func TestEnsureDatabase(t *testing.T) {
	t.Parallel()
	c := start(t, Options{Dir: filepath.Join(tempDir(t), "data"), Fast: true})
	ctx := context.Background()

	require.NoError(t, c.EnsureDatabase(ctx, "gantry_dev"))
	require.NoError(t, c.EnsureDatabase(ctx, "gantry_dev"), "second call finds it")
	mustExec(t, c.URL("gantry_dev"), "SELECT 1")
}

func TestUnreachableDirIsExplained(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		// A normal user runs the cluster as itself: its own temp dir is reachable.
		c, err := Start(context.Background(), Options{Dir: filepath.Join(t.TempDir(), "data"), Fast: true})
		require.NoError(t, err)
		require.NoError(t, c.Stop())
		return
	}
	// t.TempDir's parent is 0700 root: the postgres user cannot walk into it.
	_, err := Start(context.Background(), Options{Dir: filepath.Join(t.TempDir(), "data")})
	require.ErrorContains(t, err, "cannot reach")
	require.ErrorContains(t, err, "MkdirTemp")
}

func TestHighestVersion(t *testing.T) {
	got := highestVersion([]string{
		"/usr/lib/postgresql/9.6/bin",
		"/usr/lib/postgresql/15/bin",
		"/usr/lib/postgresql/10/bin",
		"/usr/lib/postgresql/beta/bin",
	})
	require.Equal(t, "/usr/lib/postgresql/15/bin", got)
	require.Equal(t, "", highestVersion(nil))
}
