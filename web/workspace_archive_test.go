package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/idempotency"
	"gantry/models/run"
)

// TestArchiveADestroyedWorkspace: after a destroy the workspace page says it was
// destroyed, by which run, with its state history kept, and offers "Archive"; an
// archived workspace leaves the list (listed on request) and keeps its page; a
// workspace that holds something, another organization's and a viewer are refused; a
// new request into its name brings it back.
func TestArchiveADestroyedWorkspace(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	owner := app.LoggedIn(t, "owner@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	req := bucketRequest(staging, "eu-west")
	req.Set("workspace", "retired")
	r := waitForState(t, app, app.RequestRun(t, operator, req), run.PendingApproval)
	approve(t, app, admin, r)
	r = waitForState(t, app, r.ID, run.Succeeded)
	wsPath := "/workspaces/" + r.WorkspaceID
	archivePath := wsPath + "/archive"

	// It holds a bucket: no archive button, and the service refuses.
	page := webtest.ReadBody(t, app.Get(t, operator, wsPath))
	require.NotContains(t, page, `id="archive-workspace"`)
	resp := app.PostForm(t, operator, archivePath, url.Values{"_csrf": {app.CSRF(t, operator)}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "still holds resources")

	resp = app.PostForm(t, operator, wsPath+"/destroy", url.Values{"_csrf": {app.CSRF(t, operator)}, "confirm": {"retired"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	d := waitForState(t, app, strings.TrimPrefix(resp.Header.Get("Location"), "/runs/"), run.PendingApproval)
	approve(t, app, owner, d)
	waitForState(t, app, d.ID, run.Succeeded)

	page = webtest.ReadBody(t, app.Get(t, operator, wsPath))
	require.Contains(t, page, "Destroyed</strong> by run")
	require.Contains(t, page, `href="/runs/`+d.ID+`"`)
	require.NotContains(t, page, "nothing has been applied")
	require.Contains(t, page, `id="archive-workspace"`)
	require.NotContains(t, webtest.ReadBody(t, app.Get(t, app.LoggedIn(t, "viewer@acme.test"), wsPath)), `id="archive-workspace"`,
		"a viewer is not offered what they may not do")

	other := app.LoggedIn(t, "operator@globex.test")
	resp = app.PostForm(t, other, archivePath, url.Values{"_csrf": {app.CSRF(t, other)}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "another organization's workspace")
	viewer := app.LoggedIn(t, "viewer@acme.test")
	resp = app.PostForm(t, viewer, archivePath, url.Values{"_csrf": {app.CSRF(t, viewer)}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	resp = app.PostForm(t, operator, archivePath, url.Values{"_csrf": {app.CSRF(t, operator)}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	page = webtest.ReadBody(t, app.Get(t, operator, wsPath))
	require.Contains(t, page, `data-testid="workspace-archived"`, "its page still answers and says so")
	require.Contains(t, page, "is archived: it has left the workspace list", "the flash")
	require.NotContains(t, webtest.ReadBody(t, app.Get(t, operator, "/workspaces?q=retired")), wsPath+`"`, "not in the list")
	require.Contains(t, webtest.ReadBody(t, app.Get(t, operator, "/workspaces?q=retired&archived=on")), wsPath+`"`, "listed on request")
	var archived struct {
		Action string
	}
	require.NoError(t, app.DB.Raw("SELECT action FROM audit_events WHERE target_id = ? ORDER BY seq DESC LIMIT 1", r.WorkspaceID).Scan(&archived).Error)
	require.Equal(t, "workspace.archived", archived.Action)

	// Twice is a conflict; the API lists archived ones on request.
	resp = app.PostForm(t, operator, archivePath, url.Values{"_csrf": {app.CSRF(t, operator)}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	tok := app.Token(t, app.NewMember(t, "acme", "archive-reader", authz.RoleViewer, false), "read")
	var list struct {
		Workspaces []struct {
			ID         string  `json:"id"`
			ArchivedAt *string `json:"archived_at"`
		} `json:"workspaces"`
	}
	resp = app.APIKeyed(t, tok, idempotency.NewKey(), http.MethodGet, "/api/v1/workspaces?q=retired&archived=true", "")
	require.NoError(t, json.Unmarshal([]byte(webtest.ReadBody(t, resp)), &list))
	require.Len(t, list.Workspaces, 1)
	require.NotNil(t, list.Workspaces[0].ArchivedAt)

	// A new request into its name brings it back.
	waitForState(t, app, app.RequestRun(t, operator, req), run.PendingApproval)
	require.Contains(t, webtest.ReadBody(t, app.Get(t, operator, "/workspaces?q=retired")), wsPath+`"`)
	require.NotContains(t, webtest.ReadBody(t, app.Get(t, operator, wsPath)), `data-testid="workspace-archived"`)
}
