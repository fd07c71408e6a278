package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
)

// TestDriftScheduleOfEnvironments: each environment's drift schedule comes from its
// tier (production hourly, staging every 4 hours, development off) and an admin sets
// it on the form (off, or 5 minutes to a week) or the JSON API (absent: the tier's on
// create, unchanged on edit); a value out of range is a field message and saves
// nothing.
func TestDriftScheduleOfEnvironments(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.LoggedIn(t, "admin@acme.test")
	token := app.CSRF(t, admin)
	schedule := func(id string) int {
		var m int
		require.NoError(t, app.DB.Raw("SELECT drift_interval_minutes FROM environments WHERE id = ?", id).Scan(&m).Error)
		return m
	}
	require.Equal(t, 0, schedule(app.OrgEnvironmentID(t, "acme", "development")))
	require.Equal(t, 240, schedule(app.OrgEnvironmentID(t, "acme", "staging")))
	require.Equal(t, 60, schedule(app.OrgEnvironmentID(t, "acme", "production")))
	list := webtest.ReadBody(t, app.Get(t, admin, "/environments"))
	require.Contains(t, list, `data-testid="drift-schedule">off in this environment<`)
	require.Contains(t, list, `data-testid="drift-schedule">every hour<`)

	resp := app.PostForm(t, admin, "/environments", url.Values{"_csrf": {token}, "name": {"drift-qa"}, "tier": {"production"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	qa := app.OrgEnvironmentID(t, "acme", "drift-qa")
	require.Equal(t, 60, schedule(qa), "the tier's schedule")
	for _, bad := range []string{"3", "20000", "soon"} {
		resp = app.PostForm(t, admin, "/environments/"+qa, url.Values{"_csrf": {token}, "name": {"drift-qa"}, "tier": {"production"},
			"requires_approval": {"on"}, "drift_interval_minutes": {bad}})
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, bad)
		require.Contains(t, body, `data-testid="error-drift_interval_minutes"`, bad)
	}
	require.Equal(t, 60, schedule(qa), "a refused form saves nothing")
	resp = app.PostForm(t, admin, "/environments/"+qa, url.Values{"_csrf": {token}, "name": {"drift-qa"}, "tier": {"production"},
		"requires_approval": {"on"}, "drift_interval_minutes": {"0"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	require.Equal(t, 0, schedule(qa), "off")
	require.Contains(t, webtest.ReadBody(t, app.Get(t, admin, "/environments/"+qa+"/edit")), `<option value="0" selected>Off</option>`)

	type envJSON struct {
		ID    string `json:"id"`
		Drift int    `json:"drift_interval_minutes"`
	}
	var e envJSON
	require.Equal(t, http.StatusOK, environmentJSON(t, app, admin, http.MethodPut, "/api/v1/environments/"+qa,
		`{"name":"drift-qa","tier":"production","drift_interval_minutes":30}`, &e))
	require.Equal(t, 30, e.Drift)
	require.Equal(t, http.StatusOK, environmentJSON(t, app, admin, http.MethodPut, "/api/v1/environments/"+qa,
		`{"name":"drift-qa","tier":"production"}`, &e))
	require.Equal(t, 30, e.Drift, "an edit without the field keeps the schedule")
	var refused map[string]any
	require.Equal(t, http.StatusUnprocessableEntity, environmentJSON(t, app, admin, http.MethodPut, "/api/v1/environments/"+qa,
		`{"name":"drift-qa","tier":"production","drift_interval_minutes":4}`, &refused))
	require.Equal(t, 30, schedule(qa))
}

// TestDriftCheckOnASimulatedWorkspace: on the MockTofuRunner a drift check finds
// nothing (it has no live cloud) and says so; a workspace with nothing applied has
// nothing to check; a viewer may not ask; a break-glass window is refused on a
// simulated workspace with the reason, before anything is typed.
func TestDriftCheckOnASimulatedWorkspace(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	viewer := app.LoggedIn(t, "viewer@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	applied := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(dev, "eu-west")), run.Succeeded)
	ws := applied.WorkspaceID

	page := webtest.ReadBody(t, app.Get(t, operator, "/workspaces/"+ws))
	require.Contains(t, page, `data-testid="drift-never"`)
	require.Contains(t, page, "Scheduled drift checks: off in this environment")
	require.Contains(t, page, `id="check-drift"`)
	require.NotContains(t, webtest.ReadBody(t, app.Get(t, viewer, "/workspaces/"+ws)), `id="check-drift"`, "a viewer is offered no check")
	resp := app.PostForm(t, viewer, "/workspaces/"+ws+"/drift", url.Values{"_csrf": {app.CSRF(t, viewer)}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, webtest.ReadBody(t, resp))

	resp = app.PostForm(t, operator, "/workspaces/"+ws+"/drift", url.Values{"_csrf": {app.CSRF(t, operator)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	check := waitForState(t, app, runIDOf(t, resp), run.NoChanges)
	require.Equal(t, run.KindDrift, check.Kind)
	require.Equal(t, run.DriftClean, check.DriftStatus)
	require.True(t, check.Simulated)
	require.Equal(t, applied.ID, *check.SourceRunID, "it checks the configuration that wrote the state")
	runPage := webtest.ReadBody(t, app.Get(t, operator, "/runs/"+check.ID))
	require.Contains(t, runPage, `data-kind="drift_check">Drift check: a refresh-only plan, never applied<`)
	require.Contains(t, runPage, "drift checks are never decided on")
	require.Contains(t, runPage, "never finds drift (SIMULATED)")
	page = webtest.ReadBody(t, app.Get(t, operator, "/workspaces/"+ws))
	require.Contains(t, page, `data-testid="drift-status" data-state="clean">No drift<`)
	require.NotContains(t, page, `id="plan-to-correct"`, "nothing to correct")
	require.Contains(t, webtest.ReadBody(t, app.Get(t, operator, "/drift")), ws)
	// The runs list finds drift checks by their kind; the workspace's run history leaves
	// them to its drift section.
	require.Contains(t, webtest.ReadBody(t, app.Get(t, operator, "/runs?kind=drift_check")), check.ID)
	require.NotContains(t, webtest.ReadBody(t, app.Get(t, operator, "/runs?kind=apply")), check.ID)
	history := regexp.MustCompile(`(?s)data-testid="workspace-runs".*?</table>`).FindString(page)
	require.Contains(t, history, applied.ID)
	require.NotContains(t, history, check.ID)

	// Nothing applied: nothing to check, in words.
	pending := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(app.OrgEnvironmentID(t, "acme", "staging"), "eu-west")), run.PendingApproval)
	resp = app.PostForm(t, operator, "/workspaces/"+pending.WorkspaceID+"/drift", url.Values{"_csrf": {app.CSRF(t, operator)}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Contains(t, body, "has no state yet")

	form := webtest.ReadBody(t, app.Get(t, operator, "/workspaces/"+ws+"/breakglass"))
	require.Contains(t, form, "(SIMULATED): there is no live cloud to change by hand")
	require.NotContains(t, form, `id="request-window"`)
	resp = app.PostForm(t, operator, "/workspaces/"+ws+"/breakglass", url.Values{"_csrf": {app.CSRF(t, operator)},
		"reason": {"INC-1: nothing to change here"}, "duration": {"60"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, webtest.ReadBody(t, resp))
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM breakglass_windows"))
}
