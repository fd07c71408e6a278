package dbtest

import (
	"context"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// databaseExists asks over the admin pool, a connection separate from any
// test database.
func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	s, err := getServer()
	require.NoError(t, err)
	var exists bool
	require.NoError(t, s.admin.QueryRowContext(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists))
	return exists
}

func TestParallelTestsGetSeparateDatabases(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]bool{}
	// The group returns only once both parallel subtests have finished.
	t.Run("group", func(t *testing.T) {
		for _, owner := range []string{"a", "b"} {
			t.Run(owner, func(t *testing.T) {
				t.Parallel()
				gdb := New(t)
				// Same table name in both: only separate databases make this work.
				require.NoError(t, gdb.Exec("CREATE TABLE widgets (id int PRIMARY KEY, owner text)").Error)
				require.NoError(t, gdb.Exec("INSERT INTO widgets VALUES (1, ?)", owner).Error)
				var got string
				require.NoError(t, gdb.Raw("SELECT owner FROM widgets WHERE id = 1").Scan(&got).Error)
				require.Equal(t, owner, got)

				// Cloned from the migrated template, so goose's bookkeeping is there.
				var migrated bool
				require.NoError(t, gdb.Raw("SELECT to_regclass('goose_db_version') IS NOT NULL").Scan(&migrated).Error)
				require.True(t, migrated, "database is migrated")

				var name string
				require.NoError(t, gdb.Raw("SELECT current_database()").Scan(&name).Error)
				mu.Lock()
				seen[name] = true
				mu.Unlock()
			})
		}
	})
	require.Len(t, seen, 2, "each test gets its own database")
}

func TestTemplateNameIsStable(t *testing.T) {
	t.Parallel()
	first, err := templateName()
	require.NoError(t, err)
	second, err := templateName()
	require.NoError(t, err)
	require.Equal(t, first, second)
	require.Regexp(t, `^gantry_tmpl_[0-9a-f]{12}$`, first)

	NewURL(t) // builds the template if no other test has yet
	s, err := getServer()
	require.NoError(t, err)
	require.Equal(t, first, s.template)
	var isTemplate bool
	require.NoError(t, s.admin.QueryRowContext(context.Background(),
		"SELECT datistemplate FROM pg_database WHERE datname = $1", first).Scan(&isTemplate))
	require.True(t, isTemplate)
}

func TestDatabaseIsDroppedAfterCleanup(t *testing.T) {
	t.Parallel()
	var name string
	// A subtest's cleanups have all run by the time t.Run returns.
	t.Run("uses a database", func(t *testing.T) {
		gdb := New(t)
		require.NoError(t, gdb.Raw("SELECT current_database()").Scan(&name).Error)
		require.True(t, databaseExists(t, name))
	})
	require.NotEmpty(t, name)
	require.False(t, databaseExists(t, name), "database %s dropped", name)

	t.Run("raw URL", func(t *testing.T) {
		u, err := url.Parse(NewURL(t))
		require.NoError(t, err)
		name = strings.TrimPrefix(u.Path, "/")
		require.True(t, databaseExists(t, name))
	})
	require.False(t, databaseExists(t, name), "database %s dropped", name)
}
