package boundary

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/classify"
)

// plan is a classified plan of a database template: the database (data-bearing,
// Irreversible when replaced or destroyed), its subnet and network, a bucket updated in
// place and a bucket created.
func plan(db, subnet classify.Class) classify.Result {
	return classify.Result{Changes: []classify.Change{
		{Address: "module.db.sandbox_network.this", Type: "sandbox_network", Class: classify.ClassNoOp},
		{Address: "module.db.sandbox_subnet.this", Type: "sandbox_subnet", Class: subnet},
		{Address: "module.db.sandbox_database.this", Type: "sandbox_database", Class: db,
			Irreversible: db == classify.ClassReplace || db == classify.ClassDestroy},
		{Address: "module.db.sandbox_bucket.exports", Type: "sandbox_bucket", Class: classify.ClassUpdate},
		{Address: "module.db.sandbox_bucket.reports[0]", Type: "sandbox_bucket", Class: classify.ClassCreate},
	}}
}

const notes = "A database holds data: replacing or destroying it loses everything written since the last\nbackup.\n"

// TestBoundaryPerCase: every replace and destroy of a plan gets its boundary, in plan
// order, and nothing else does: a data-bearing resource only a forward fix brings back
// (said with or without a state version to roll back to), a resource that holds no
// data a rollback to the state version the plan starts from, and none known when the
// catalog no longer describes the template or no run wrote the state the plan starts
// from. The words are exact: they are what the review page and the API say.
func TestBoundaryPerCase(t *testing.T) {
	t.Parallel()
	known := Facts{Template: "postgres", Known: true, Notes: notes, Serial: 4}
	type want struct {
		address, kind, label, words string
	}
	cases := []struct {
		name  string
		res   classify.Result
		facts Facts
		want  []want
	}{
		{"a data-bearing replace, a state version to go back to", plan(classify.ClassReplace, classify.ClassNoOp), known, []want{
			{"module.db.sandbox_database.this", "forward_fix_only", "forward fix only",
				"The data it holds is lost with this change. A rollback to state version 4 brings back its configuration, not its data: only a forward fix brings the data back (a restore from a backup, outside Gantry)."},
		}},
		{"a data-bearing destroy, no state version a run wrote", plan(classify.ClassDestroy, classify.ClassNoOp), Facts{Template: "postgres", Known: true}, []want{
			{"module.db.sandbox_database.this", "forward_fix_only", "forward fix only",
				"The data it holds is lost with this change, and no state version written by a run precedes this plan to roll back to: only a forward fix brings it back (a restore from a backup, outside Gantry)."},
		}},
		{"a resource without data, a state version to go back to", plan(classify.ClassNoOp, classify.ClassReplace), known, []want{
			{"module.db.sandbox_subnet.this", "restore_from_state_version", "restore from state version 4",
				"It holds no data: a rollback to state version 4, the state this plan starts from, re-applies the inputs that wrote that version and creates it again as it was (with a new id)."},
		}},
		{"a resource without data, no state version a run wrote", plan(classify.ClassNoOp, classify.ClassDestroy), Facts{Template: "postgres", Known: true}, []want{
			{"module.db.sandbox_subnet.this", "none_known", "none known",
				"It holds no data, but no state version written by a run precedes this plan, so no rollback brings it back: only a new request does."},
		}},
		{"a template the catalog no longer describes", plan(classify.ClassDestroy, classify.ClassDestroy), Facts{Template: "legacy-db", Serial: 4}, []want{
			{"module.db.sandbox_subnet.this", "none_known", "none known",
				"The catalog no longer describes template legacy-db, so whether it holds data, and what a rollback brings back, is not known."},
			{"module.db.sandbox_database.this", "none_known", "none known",
				"The catalog no longer describes template legacy-db, so whether it holds data, and what a rollback brings back, is not known."},
		}},
		{"nothing replaced or destroyed", plan(classify.ClassUpdate, classify.ClassNoOp), known, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := Of(c.res, c.facts)
			var got []want
			for _, ch := range r.Changes {
				got = append(got, want{ch.Address, string(ch.Kind), r.Label(ch), r.Words(ch)})
				at, ok := r.At(ch.Index)
				require.True(t, ok)
				require.Equal(t, ch, at, "At finds a change by its place in the plan")
				require.Equal(t, c.res.Changes[ch.Index].Address, ch.Address)
			}
			require.Equal(t, c.want, got)
			for i, ch := range c.res.Changes {
				if ch.Class != classify.ClassReplace && ch.Class != classify.ClassDestroy {
					_, ok := r.At(i)
					require.False(t, ok, "%s (%s) has no boundary", ch.Address, ch.Class)
				}
			}
		})
	}
}

// TestBoundaryNotes: the template's notes come with the boundary, trimmed as written;
// the notes are open beside what may not come back.
func TestBoundaryNotes(t *testing.T) {
	t.Parallel()
	r := Of(plan(classify.ClassReplace, classify.ClassReplace), Facts{Template: "postgres", Known: true, Notes: notes, Serial: 2})
	require.Equal(t, "A database holds data: replacing or destroying it loses everything written since the last\nbackup.", r.Notes)
	require.Len(t, r.Changes, 2)
	require.False(t, r.Changes[0].LosesData(), "the subnet comes back from state version 2")
	require.True(t, r.Changes[1].LosesData(), "the database's data does not come back")
}

// TestBoundaryAudit: the decision's audit event records that the boundary was shown,
// with each resource's boundary and the state version a rollback would go back to; a
// plan that replaces and destroys nothing records nothing.
func TestBoundaryAudit(t *testing.T) {
	t.Parallel()
	r := Of(plan(classify.ClassReplace, classify.ClassDestroy), Facts{Template: "postgres", Known: true, Serial: 3})
	require.Equal(t, map[string]any{
		"rollback_boundary_shown": true,
		"rollback_boundary": []any{
			map[string]any{"address": "module.db.sandbox_subnet.this", "boundary": "restore_from_state_version"},
			map[string]any{"address": "module.db.sandbox_database.this", "boundary": "forward_fix_only"},
		},
		"rollback_boundary_state_version": 3,
	}, r.Audit())
	require.Nil(t, Of(plan(classify.ClassUpdate, classify.ClassNoOp), Facts{Known: true, Serial: 3}).Audit())
	require.True(t, Touches(classify.Counts{Destroy: 1}))
	require.True(t, Touches(classify.Counts{Replace: 1}))
	require.False(t, Touches(classify.Counts{Create: 3, Update: 2}))
}
