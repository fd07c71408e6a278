package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/run"
)

// boundaryShown is what the review page says of each replaced or destroyed change's
// rollback boundary, in page order: "address kind".
func boundaryShown(t *testing.T, page string) []string {
	t.Helper()
	var out []string
	re := regexp.MustCompile(`(?s)data-address="([^"]+)">.*?</code>.*?(?:data-boundary="([a-z_]+)"|</li>)`)
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		if m[2] != "" {
			out = append(out, m[1]+" "+m[2])
		}
	}
	return out
}

// approvalBoundary is what run id's approval audit event recorded of the boundary:
// whether it was shown, each resource's boundary as "address kind", and the state
// version a rollback would go back to.
func approvalBoundary(t *testing.T, app *webtest.App, id string) (bool, []string, float64) {
	t.Helper()
	return decisionBoundary(t, app, id, "run.approved")
}

// decisionBoundary is approvalBoundary for the decision recorded as action.
func decisionBoundary(t *testing.T, app *webtest.App, id, action string) (bool, []string, float64) {
	t.Helper()
	var raw []string
	require.NoError(t, app.DB.Raw(`SELECT data::text FROM audit_events WHERE target_id = ? AND action = ?`, id, action).Scan(&raw).Error)
	require.Len(t, raw, 1, "one decision")
	var data struct {
		Shown    bool `json:"rollback_boundary_shown"`
		Boundary []struct {
			Address, Boundary string
		} `json:"rollback_boundary"`
		Serial float64 `json:"rollback_boundary_state_version"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw[0]), &data))
	var got []string
	for _, b := range data.Boundary {
		got = append(got, b.Address+" "+b.Boundary)
	}
	return data.Shown, got, data.Serial
}

// TestReviewShowsRollbackBoundary (issue 35, item 4): a plan that is no rollback and
// replaces a database shows, beside that change, the boundary in words (forward fix
// only) and the template's rollback notes; the confirmation of its elevated approval
// restates the plan's counts; the API's review carries the same boundary; and the
// approval's audit event records that it was shown, computed from the run's plan. The
// destroy of the workspace then shows a boundary beside every destroyed resource (the
// network and subnet come back from a state version, the database's data only by a
// forward fix), and its approval records the same list. A plan that replaces and
// destroys nothing shows and records none.
func TestReviewShowsRollbackBoundary(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	owner := app.LoggedIn(t, "owner@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	db := func(kind, engine, storage string) url.Values {
		return url.Values{"template": {"postgres"}, "environment": {dev}, "workspace": {"boundary-db"}, "kind": {kind},
			"inputs.name": {"orders"}, "inputs.engine_version": {engine}, "inputs.size": {"small"}, "inputs.storage_gb": {storage},
			"inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}}
	}
	const dbAddr, subnetAddr, netAddr = "module.postgres.sandbox_database.this", "module.postgres.sandbox_subnet.this", "module.postgres.sandbox_network.this"
	waitForState(t, app, app.RequestRun(t, operator, db("apply", "15", "20")), run.Succeeded)

	// A plan that only grows the storage replaces and destroys nothing: no boundary.
	grow := waitForState(t, app, app.RequestRun(t, operator, db("apply", "15", "30")), run.Succeeded)
	require.Equal(t, 1, grow.PlanSummary.Update)
	page := webtest.ReadBody(t, app.Get(t, owner, "/runs/"+grow.ID+"/review"))
	require.NotContains(t, page, `data-testid="boundary"`, "nothing replaced or destroyed, nothing to say")

	// The engine upgrade replaces the database: risk 3, not a rollback.
	upgrade := waitForState(t, app, app.RequestRun(t, operator, db("apply", "16", "30")), run.PendingApproval)
	require.Nil(t, upgrade.RollbackVersionID)
	require.Equal(t, 3, *upgrade.RiskClass)
	page = webtest.ReadBody(t, app.Get(t, owner, "/runs/"+upgrade.ID+"/review"))
	require.NotContains(t, page, `data-testid="rollback"`, "no rollback section: this run is no rollback")
	require.Equal(t, []string{dbAddr + " forward_fix_only"}, boundaryShown(t, page))
	require.Regexp(t, `(?s)data-address="module\.postgres\.sandbox_database\.this">.*?data-testid="boundary-label">rollback boundary: forward fix only</span>`+
		`\s*<span data-testid="boundary-words">The data it holds is lost with this change\. A rollback to state version 2 brings back its configuration, not its data: only a forward fix brings the data back`, page)
	require.Regexp(t, `(?s)data-address="module\.postgres\.sandbox_database\.this">.*?<details class="boundary-notes" open>.*?data-testid="boundary-notes">A database holds data: replacing or destroying it loses everything written since the last\s+backup\.`, page,
		"the template's notes, open beside the change")
	require.Regexp(t, `(?s)data-testid="confirmation-counts">\s*This plan creates <strong>0</strong>,\s*changes <strong>0</strong> in place,\s*replaces <strong>1</strong>\s*and destroys <strong>0</strong> resources\.`, page)

	// The API's review says the same beside the same change (and is described).
	auditor := app.NewMember(t, "acme", "Boundary Reader", authz.RoleViewer, false)
	api := newAPIChecker(t, app)
	status, body := api.call(app.Token(t, auditor, "read"), http.MethodGet, "/api/v1/runs/"+upgrade.ID+"/review", nil)
	require.Equal(t, http.StatusOK, status, body)
	review := decodeJSON[struct {
		Changes []struct {
			Address          string
			RollbackBoundary *struct{ Kind, Words, Notes string } `json:"rollback_boundary"`
		}
	}](t, body)
	var apiShown []string
	for _, c := range review.Changes {
		if c.RollbackBoundary != nil {
			apiShown = append(apiShown, c.Address+" "+c.RollbackBoundary.Kind)
			require.Contains(t, c.RollbackBoundary.Words, "only a forward fix brings the data back")
			require.Contains(t, c.RollbackBoundary.Notes, "A database holds data")
		}
	}
	require.Equal(t, []string{dbAddr + " forward_fix_only"}, apiShown)

	// The approval records what was shown, from the run's plan: the form carries none of it.
	form := decisionForm(t, app, owner, upgrade)
	for field := range form {
		require.NotContains(t, field, "boundary", "the form sends no boundary")
	}
	resp := app.PostForm(t, owner, "/runs/"+upgrade.ID+"/approve", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	waitForState(t, app, upgrade.ID, run.Succeeded)
	shown, recorded, serial := approvalBoundary(t, app, upgrade.ID)
	require.True(t, shown)
	require.Equal(t, []string{dbAddr + " forward_fix_only"}, recorded)
	require.EqualValues(t, 2, serial, "the state version the upgrade started from")

	// A rejection is a decision on what the page showed too: its event records the
	// boundary the same way.
	refused := waitForState(t, app, app.RequestRun(t, operator, db("destroy", "16", "30")), run.PendingApproval)
	form = decisionForm(t, app, owner, refused)
	form.Set("reason", "not before the export is archived")
	resp = app.PostForm(t, owner, "/runs/"+refused.ID+"/reject", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	waitForState(t, app, refused.ID, run.Rejected)
	shown, recorded, _ = decisionBoundary(t, app, refused.ID, "run.rejected")
	require.True(t, shown, "the rejection records the boundary it was shown")
	require.Contains(t, recorded, dbAddr+" forward_fix_only")

	// The destroy: every resource goes; the database's data only by a forward fix, the
	// network and subnet from the state version it starts from.
	destroy := waitForState(t, app, app.RequestRun(t, operator, db("destroy", "16", "30")), run.PendingApproval)
	page = webtest.ReadBody(t, app.Get(t, owner, "/runs/"+destroy.ID+"/review"))
	want := []string{dbAddr + " forward_fix_only", subnetAddr + " restore_from_state_version", netAddr + " restore_from_state_version"}
	require.ElementsMatch(t, want, boundaryShown(t, page))
	require.Contains(t, page, "rollback boundary: restore from state version 3")
	require.Regexp(t, `(?s)data-testid="confirmation-counts">\s*This plan creates <strong>0</strong>,\s*changes <strong>0</strong> in place,\s*replaces <strong>0</strong>\s*and destroys <strong>3</strong> resources\.`, page)
	resp = app.PostForm(t, owner, "/runs/"+destroy.ID+"/approve", decisionForm(t, app, owner, destroy))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	waitForState(t, app, destroy.ID, run.Succeeded)
	shown, recorded, serial = approvalBoundary(t, app, destroy.ID)
	require.True(t, shown)
	require.Equal(t, boundaryShown(t, page), recorded, "the audit records what the page showed, in its order")
	require.EqualValues(t, 3, serial)
}
