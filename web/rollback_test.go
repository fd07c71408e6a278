package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/errs"
	"gantry/models/run"
)

// stateVersions are a workspace's state version ids, oldest first.
func stateVersions(t *testing.T, app *webtest.App, workspaceID string) []string {
	t.Helper()
	var ids []string
	require.NoError(t, app.DB.Raw("SELECT id FROM state_versions WHERE workspace_id = ? ORDER BY serial", workspaceID).Scan(&ids).Error)
	return ids
}

// databaseID is the id of the workspace's database in its current state.
func databaseID(t *testing.T, app *webtest.App, c *http.Client, workspaceID string) string {
	t.Helper()
	page := webtest.ReadBody(t, app.Get(t, c, "/workspaces/"+workspaceID))
	m := regexp.MustCompile(`<code>module\.postgres\.sandbox_database\.this</code></th><td>sandbox_database</td><td><code>([^<]+)</code>`).FindStringSubmatch(page)
	require.NotNil(t, m, page)
	return m[1]
}

// TestRollbackToAnEarlierStateVersion: a database made on PostgreSQL 15, then replaced by
// 16 (risk 3, an owner decides), is rolled back to state version 1: the rollback is a
// new run of the same template version with version 1's inputs (the run that wrote it
// is its source), planned against today's state; replacing the database again makes it
// risk 3, and its review says the database comes back empty and that the data it held
// at version 1 went with the replace after it. The workspace and template pages state
// the boundary; the current version, another workspace's version, another
// organization and a viewer are refused.
func TestRollbackToAnEarlierStateVersion(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	owner := app.LoggedIn(t, "owner@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	db := func(engine string) url.Values {
		return url.Values{"template": {"postgres"}, "environment": {dev}, "workspace": {"rollback-db"}, "kind": {"apply"},
			"inputs.name": {"orders"}, "inputs.engine_version": {engine}, "inputs.size": {"small"}, "inputs.storage_gb": {"20"},
			"inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}}
	}
	first := waitForState(t, app, app.RequestRun(t, operator, db("15")), run.Succeeded)
	firstDB := databaseID(t, app, operator, first.WorkspaceID)
	upgrade := waitForState(t, app, app.RequestRun(t, operator, db("16")), run.PendingApproval)
	require.Equal(t, 3, *upgrade.RiskClass, "the engine change replaces the database")
	resp := app.PostForm(t, owner, "/runs/"+upgrade.ID+"/approve", decisionForm(t, app, owner, upgrade))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	waitForState(t, app, upgrade.ID, run.Succeeded)
	versions := stateVersions(t, app, first.WorkspaceID)
	require.Len(t, versions, 2)
	require.NotEqual(t, firstDB, databaseID(t, app, operator, first.WorkspaceID))

	// The workspace page offers the earlier version, and says where a rollback stops.
	page := webtest.ReadBody(t, app.Get(t, operator, "/workspaces/"+first.WorkspaceID))
	require.Contains(t, page, `data-testid="rollback-1"`)
	require.NotContains(t, page, `data-testid="rollback-2"`, "the current version is not offered")
	require.Regexp(t, `(?s)data-testid="workspace-rollback-boundary".*module\.postgres\.sandbox_database\.this \(sandbox_database, [^)]+\) holds data`, page)
	tpl := webtest.ReadBody(t, app.Get(t, operator, "/catalog/postgres"))
	require.Regexp(t, `(?s)data-testid="template-rollback-boundary".*It cannot bring back data: sandbox_database holds data`, tpl)

	// The page that asks restates what the rollback re-applies.
	confirm := webtest.ReadBody(t, app.Get(t, operator, "/workspaces/"+first.WorkspaceID+"/rollback?version="+versions[0]))
	require.Contains(t, confirm, "Roll back rollback-db to state version 1?")
	require.Regexp(t, `(?s)data-testid="rollback-inputs".*engine_version</code></dt><dd>15</dd>`, confirm)
	require.Contains(t, confirm, `id="confirm-rollback"`)
	current := webtest.ReadBody(t, app.Get(t, operator, "/workspaces/"+first.WorkspaceID+"/rollback?version="+versions[1]))
	require.Contains(t, current, "State version 2 is the workspace&#39;s current state: there is nothing to roll back.")
	require.NotContains(t, current, `id="confirm-rollback"`)
	resp = app.Get(t, operator, "/workspaces/"+first.WorkspaceID+"/rollback?version=sv-nosuchversion")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "a version that does not exist")

	// The rollback: a new run with version 1's inputs, through every gate.
	token := app.CSRF(t, operator)
	resp = app.PostForm(t, operator, "/workspaces/"+first.WorkspaceID+"/rollback", url.Values{"_csrf": {token}, "version": {versions[0]}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	m := webtest.RunPath.FindStringSubmatch(resp.Header.Get("Location"))
	require.NotNil(t, m)
	rb := waitForState(t, app, m[1], run.PendingApproval)
	require.Equal(t, 1, rb.RollbackSerial)
	require.Equal(t, versions[0], *rb.RollbackVersionID)
	require.Equal(t, first.ID, *rb.SourceRunID)
	require.Equal(t, first.TemplateVersion, rb.TemplateVersion)
	require.Equal(t, first.ConfigDigest, rb.ConfigDigest, "the stored configuration of the run that wrote version 1")
	var got, want map[string]any
	require.NoError(t, json.Unmarshal(rb.Inputs, &got))
	require.NoError(t, json.Unmarshal(first.Inputs, &want))
	require.Equal(t, want, got)
	require.Equal(t, 3, *rb.RiskClass, "going back to 15 replaces the database again")
	require.Contains(t, rb.StateReason, "risk 3")
	require.Empty(t, rb.PriorRequesters, "a rollback is its requester's own intent")

	review := webtest.ReadBody(t, app.Get(t, owner, "/runs/"+rb.ID+"/review"))
	require.Contains(t, review, "A rollback to state version 1")
	require.Regexp(t, `(?s)data-testid="rollback-lost".*module\.postgres\.sandbox_database\.this \(sandbox_database\) is replaced: it comes back empty, and the data it holds now is lost\.`, review)
	require.Regexp(t, `(?s)data-testid="rollback-forward-fix".*module\.postgres\.sandbox_database\.this \(sandbox_database\) was replaced after serial 1 \(`+firstDB+`, now [^)]+\): the data it held then is gone`, review)
	require.Contains(t, review, `data-testid="irreversible"`, "the replace set marks it irreversible as for any plan")

	// Refusals.
	post := func(c *http.Client, workspaceID, versionID string) (int, string) {
		resp := app.PostForm(t, c, "/workspaces/"+workspaceID+"/rollback", url.Values{"_csrf": {app.CSRF(t, c)}, "version": {versionID}})
		return resp.StatusCode, webtest.ReadBody(t, resp)
	}
	status, body := post(operator, first.WorkspaceID, versions[1])
	require.Equal(t, http.StatusConflict, status)
	require.Contains(t, body, "State version 2 is the workspace&#39;s current state: there is nothing to roll back.")
	other := bucketRequest(dev, "eu-west")
	other.Set("workspace", "rollback-other")
	otherRun := waitForState(t, app, app.RequestRun(t, operator, other), run.Succeeded)
	status, _ = post(operator, otherRun.WorkspaceID, versions[0])
	require.Equal(t, http.StatusNotFound, status, "a version of another workspace")
	status, _ = post(app.LoggedIn(t, "owner@globex.test"), first.WorkspaceID, versions[0])
	require.Equal(t, http.StatusNotFound, status, "another organization's workspace")
	status, _ = post(app.LoggedIn(t, "viewer@acme.test"), first.WorkspaceID, versions[0])
	require.Equal(t, http.StatusForbidden, status, "a viewer requests nothing")
	resp = app.Get(t, app.LoggedIn(t, "viewer@acme.test"), "/workspaces/"+first.WorkspaceID+"/rollback?version="+versions[0])
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	var rollbacks int64
	require.NoError(t, app.DB.Raw("SELECT count(*) FROM runs WHERE rollback_version_id IS NOT NULL").Scan(&rollbacks).Error)
	require.EqualValues(t, 1, rollbacks, "the refusals requested nothing")
}

// TestRollbackDoorsRefuseStrangers: the doors of the run lifecycle that
// models/rollback calls from outside keep their own checks: another organization's
// version is not found, a viewer may not roll back, and a check requests nothing.
func TestRollbackDoorsRefuseStrangers(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	applied := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(app.OrgEnvironmentID(t, "acme", "development"), "eu-west")), run.Succeeded)
	versions := stateVersions(t, app, applied.WorkspaceID)
	require.Len(t, versions, 1)
	requests := app.System.Runs.Requests
	as := func(m webtest.Member) context.Context { return authz.WithSubject(t.Context(), m.Subject(time.Now())) }
	stranger := as(app.NewMember(t, "globex", "Stranger", authz.RoleOwner, true))
	viewer := as(app.NewMember(t, "acme", "Onlooker", authz.RoleViewer, false))
	member := as(app.NewMember(t, "acme", "Roller", authz.RoleOperator, true))

	_, err := requests.RequestRollback(stranger, versions[0])
	require.ErrorIs(t, err, errs.ErrNotFound)
	require.ErrorIs(t, requests.CheckRollback(stranger, versions[0]), errs.ErrNotFound)
	_, err = requests.RequestRollback(viewer, versions[0])
	require.ErrorIs(t, err, errs.ErrForbidden)
	require.NoError(t, requests.CheckRollback(member, versions[0]))
	var n int64
	require.NoError(t, app.DB.Raw("SELECT count(*) FROM runs WHERE rollback_version_id IS NOT NULL").Scan(&n).Error)
	require.Zero(t, n, "nothing was requested")
}
