package rollback

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/run"
)

// TestForwardFixOnly: of the irreversible resources a state held at serial N, those
// destroyed since (absent now) and those replaced since (another id now) come back
// only by a forward fix; an unchanged one, and any resource of a type that holds no
// data, are not named.
func TestForwardFixOnly(t *testing.T) {
	t.Parallel()
	then := []run.StateResource{
		{Address: "module.db.sandbox_database.kept", Type: "sandbox_database", ID: "db-1"},
		{Address: "module.db.sandbox_database.replaced", Type: "sandbox_database", ID: "db-2"},
		{Address: "module.db.sandbox_database.gone", Type: "sandbox_database", ID: "db-3"},
		{Address: "module.db.sandbox_network.this", Type: "sandbox_network", ID: "net-1"},
	}
	now := []run.StateResource{
		{Address: "module.db.sandbox_database.kept", Type: "sandbox_database", ID: "db-1"},
		{Address: "module.db.sandbox_database.replaced", Type: "sandbox_database", ID: "db-9"},
		{Address: "module.db.sandbox_network.this", Type: "sandbox_network", ID: "net-2"},
	}
	got := forwardFixOnly(then, now, []string{"sandbox_database"}, 4)
	require.Equal(t, []string{
		"module.db.sandbox_database.replaced (sandbox_database) was replaced after serial 4 (db-2, now db-9): the data it held then is gone; only a restore from a backup brings it back.",
		"module.db.sandbox_database.gone (sandbox_database) was destroyed after serial 4: the rollback creates it again, empty; the data it held then is gone (only a restore from a backup brings it back).",
	}, got)
	require.Empty(t, forwardFixOnly(then, now, nil, 4), "a template whose types hold no data")
}

// TestRollbackBoundaryWords: the boundary is said from the manifest's irreversible types
// and the resources a state holds.
func TestRollbackBoundaryWords(t *testing.T) {
	t.Parallel()
	require.Contains(t, TemplateBoundary(nil)[1], "brings the configuration back whole")
	require.Contains(t, TemplateBoundary([]string{"sandbox_bucket"})[1], "sandbox_bucket holds data")
	require.Contains(t, TemplateBoundary([]string{"sandbox_bucket", "sandbox_database"})[1], "sandbox_bucket, sandbox_database hold data")
	words := WorkspaceBoundary([]string{"sandbox_bucket"}, []run.StateResource{
		{Address: "module.b.sandbox_bucket.this", Type: "sandbox_bucket", ID: "bkt-1"}, {Address: "module.n.sandbox_network.this", Type: "sandbox_network"}})
	require.Equal(t, []string{"module.b.sandbox_bucket.this (sandbox_bucket, bkt-1) holds data: a rollback that replaces or destroys it loses what it holds."}, words)
}
