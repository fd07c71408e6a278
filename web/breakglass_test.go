//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu).

package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/breakglass"
	"gantry/models/run"
	"gantry/sandbox/api"
	"gantry/sandbox/client"
)

// windowCast is who the break-glass tests act as on a live app: the operator who asks
// for windows, the admin who approves them, the owner who closes them, in staging, and
// the sandbox cloud's admin API (what the world holds).
type windowCast struct {
	operator, admin, owner *http.Client
	staging                string
	cloudAdmin             *client.Client
}

func castOf(t *testing.T, app liveApp) windowCast {
	t.Helper()
	cloudAdmin, err := client.New(app.cloudURL, webtest.CloudAdminToken)
	require.NoError(t, err)
	return windowCast{operator: app.LoggedIn(t, "operator@acme.test"), admin: app.LoggedIn(t, "admin@acme.test"),
		owner: app.LoggedIn(t, "owner@acme.test"), staging: app.OrgEnvironmentID(t, "acme", "staging"), cloudAdmin: cloudAdmin}
}

var windowPath = regexp.MustCompile(`^/breakglass/(bgw-[a-z0-9]+)$`)

// askWindow asks for a break-glass window on workspace ws as c and returns its id.
func askWindow(t *testing.T, app *webtest.App, c *http.Client, ws, reason string, minutes int) string {
	t.Helper()
	resp := app.PostForm(t, c, "/workspaces/"+ws+"/breakglass", url.Values{"_csrf": {app.CSRF(t, c)}, "reason": {reason},
		"duration": {jsonInt(minutes)}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	m := windowPath.FindStringSubmatch(resp.Header.Get("Location"))
	require.NotNil(t, m, resp.Header.Get("Location"))
	return m[1]
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

// waitForWindow waits until window id is in state want, failing at once when it ends in
// another. A window moves in the transaction of a run of its workspace (a drift check
// codifies or closes it), so the organization's run changes wake the wait.
func waitForWindow(t testing.TB, app *webtest.App, id string, want breakglass.State) breakglass.Window {
	t.Helper()
	w := windowOf(t, app, id)
	changed, stop := app.Server.Changes.Subscribe(w.OrganizationID, "")
	defer stop()
	bench.Eventually(t, fmt.Sprintf("window %s to be %s", id, want), time.Minute, func() (bool, any) {
		w = windowOf(t, app, id)
		if w.State != want && w.State.Terminal() {
			t.Fatalf("window %s ended %s, want %s: %s", id, w.State, want, w.StateReason)
		}
		return w.State == want, fmt.Sprintf("%s (%s)", w.State, w.StateReason)
	}, bench.Wake(changed))
	return w
}

// TestBreakglassWindowLifecycle drives the manual change path end to end with live
// OpenTofu and the sandbox cloud (DESIGN §9): a window is asked for, its requester's
// own approval refused, an admin approves its terms, opening it makes the waiting run
// STALE and refuses new applies, the person changes the database by hand with the
// window's credentials, the window's clock runs out, the drift check that follows by
// itself attributes the change to the window, a gated refresh-only codification (which
// the maker of the change may not approve) writes the changed world into state and the
// drift check after it finds nothing. Then an out-of-band change outside any window
// reads "unowned drift" and is notified to admins and owners, "Plan to correct" starts
// a normal run, and an owner closes a second window awaiting codification with a
// reason. Every step is in the audit log and the governance report.
func TestBreakglassWindowLifecycle(t *testing.T) {
	t.Parallel()
	app := startLive(t)
	ctx := context.Background()
	cast := castOf(t, app)
	operator, admin, owner, staging, cloudAdmin := cast.operator, cast.admin, cast.owner, cast.staging, cast.cloudAdmin

	applied := waitForState(t, app.App, app.App.RequestRun(t, operator, postgresRequest(staging, "orders-db", "small", "7")), run.PendingApproval)
	approve(t, app.App, admin, applied)
	applied = waitForState(t, app.App, applied.ID, run.Succeeded)
	ws := applied.WorkspaceID
	// A change waits for its decision when the window opens.
	waiting := waitForState(t, app.App, app.App.RequestRun(t, operator, postgresRequest(staging, "orders-db", "medium", "7")), run.PendingApproval)

	// Asked for, with field messages for a short reason and an overlong window.
	resp := app.PostForm(t, operator, "/workspaces/"+ws+"/breakglass", url.Values{"_csrf": {app.CSRF(t, operator)}, "reason": {"urgent"}, "duration": {"600"}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, `data-testid="error-reason"`)
	require.Contains(t, body, `data-testid="error-duration"`)
	id := askWindow(t, app.App, operator, ws, "INC-42: primary database out of memory, resize by hand", 60)
	w := windowOf(t, app.App, id)
	require.Equal(t, breakglass.Requested, w.State)
	require.Equal(t, breakglass.TermsOf(w).Digest(), w.TermsDigest)
	// One window at a time on a workspace.
	resp = app.PostForm(t, admin, "/workspaces/"+ws+"/breakglass", url.Values{"_csrf": {app.CSRF(t, admin)}, "reason": {"a second window at once"}, "duration": {"30"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, webtest.ReadBody(t, resp))

	// The admin's landing page shows it waiting for her; the requester's does not.
	require.Contains(t, webtest.ReadBody(t, app.Get(t, admin, "/")), `data-window="`+id+`"`)
	require.NotContains(t, webtest.ReadBody(t, app.Get(t, operator, "/")), `data-window="`+id+`"`)

	// The requester never approves her own window (operators decide none); an admin
	// approves the terms the page showed, and other terms are stale evidence.
	status, body := windowAct(t, app.App, operator, id, "approve", url.Values{"terms": {w.TermsDigest}})
	require.Equal(t, http.StatusForbidden, status, body)
	status, body = windowAct(t, app.App, admin, id, "approve", url.Values{"terms": {"sha256:other-terms"}})
	require.Equal(t, http.StatusConflict, status, body)
	require.Contains(t, body, "The window&#39;s terms changed since the page was drawn")
	status, body = windowAct(t, app.App, admin, id, "approve", url.Values{"terms": {w.TermsDigest}})
	require.Equal(t, http.StatusSeeOther, status, body)
	w = windowOf(t, app.App, id)
	require.Equal(t, breakglass.Approved, w.State)
	require.WithinDuration(t, w.ApprovedAt.Add(run.ApprovalValidity), *w.ApprovalExpiresAt, time.Second)
	status, body = windowAct(t, app.App, admin, id, "open", nil)
	require.Equal(t, http.StatusForbidden, status, "only the requester opens it: %s", body)

	// Opened: the waiting run goes STALE; the credentials are shown once.
	status, body = windowAct(t, app.App, operator, id, "open", nil)
	require.Equal(t, http.StatusOK, status, body)
	m := tokenArea.FindStringSubmatch(body)
	require.NotNil(t, m, "the page shows the window's credentials: %s", body)
	token := strings.TrimSpace(m[1])
	w = windowOf(t, app.App, id)
	require.Equal(t, breakglass.Open, w.State)
	require.Equal(t, 1, w.CredentialsIssued)
	require.WithinDuration(t, w.OpenedAt.Add(time.Hour), *w.EndsAt, time.Second)
	waiting = waitForState(t, app.App, waiting.ID, run.Stale)
	require.Contains(t, waiting.StateReason, "break-glass window "+id+" opened")
	page := webtest.ReadBody(t, app.Get(t, operator, "/breakglass/"+id))
	require.NotContains(t, page, token, "the credentials are never shown twice")
	require.Contains(t, webtest.ReadBody(t, app.Get(t, operator, "/workspaces/"+ws)), `data-testid="workspace-window-clock"`, "the workspace shows the window and its clock")
	require.Zero(t, countRows(t, app.App, "SELECT count(*) FROM audit_events WHERE data::text LIKE ?", "%"+token[len(token)-20:]+"%"), "no token in the audit log")
	// While it is open no pipeline run of the workspace is requested to apply.
	form := postgresRequest(staging, "orders-db", "large", "7")
	form.Set("_csrf", app.CSRF(t, operator))
	resp = app.PostForm(t, operator, "/requests", form)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, "Break-glass window "+id+" is open on this workspace")

	// The manual change, through the window's token: resize the database.
	glass, err := client.New(app.cloudURL, token)
	require.NoError(t, err)
	db := cloudObjectOf(t, ctx, cloudAdmin, "database", ws)
	attrs := configurable(t, "database", db.Attributes)
	attrs["size"] = "large"
	changed, err := glass.Update(ctx, "database", db.ID, attrs)
	require.NoError(t, err)
	require.Equal(t, "breakglass", changed.LastChange.By)
	// The token changes nothing of another workspace.
	_, err = glass.Get(ctx, "database", "db-00000000")
	require.Equal(t, http.StatusNotFound, client.StatusOf(err))

	// Its clock runs out: the job scheduled at its end ends it (moved to now here), and
	// the drift check that follows by itself attributes the change to the window.
	var jobs int64
	require.NoError(t, app.DB.Raw(`SELECT count(*) FROM river_job WHERE kind = 'breakglass.due' AND args->>'window_id' = ? AND args->>'state' = 'OPEN'
		AND scheduled_at = ?`, id, w.EndsAt).Scan(&jobs).Error)
	require.EqualValues(t, 1, jobs, "the window's end is scheduled")
	require.NoError(t, app.DB.Exec("UPDATE breakglass_windows SET ends_at = now() - interval '1 second' WHERE id = ?", id).Error)
	_, err = app.System.Breakglass.Due(ctx, id, breakglass.Open)
	require.NoError(t, err)
	w = windowOf(t, app.App, id)
	require.Equal(t, breakglass.AwaitingCodification, w.State)
	require.NotNil(t, w.DriftCheckRunID)
	check := waitForState(t, app.App, *w.DriftCheckRunID, run.Planned)
	require.Equal(t, run.KindDrift, check.Kind)
	require.Equal(t, run.DriftExpected, check.DriftStatus, check.StateReason)
	require.Len(t, check.Drift.Resources, 1)
	require.Equal(t, id, check.Drift.Resources[0].WindowID)
	require.Equal(t, []string{"size"}, check.Drift.Resources[0].Changed)
	require.Contains(t, check.Drift.Resources[0].By, "through break-glass window "+id)
	status, body = windowAct(t, app.App, operator, id, "credentials", nil)
	require.Equal(t, http.StatusConflict, status, "no credentials once it ended: %s", body)

	// Codified by a gated refresh-only apply: a person decides it, never who made the
	// change; the drift check after it finds nothing.
	status, body = windowAct(t, app.App, operator, id, "codify", nil)
	require.Equal(t, http.StatusSeeOther, status, body)
	w = windowOf(t, app.App, id)
	require.NotNil(t, w.CodifyRunID)
	codify := waitForState(t, app.App, *w.CodifyRunID, run.PendingApproval)
	require.Equal(t, run.KindCodify, codify.Kind)
	require.Equal(t, 1, codify.PlanSummary.Update, codify.StateReason)
	require.True(t, codify.FourEyes)
	resp = app.PostForm(t, operator, "/runs/"+codify.ID+"/approve", decisionForm(t, app.App, operator, codify))
	require.Equal(t, http.StatusForbidden, resp.StatusCode, webtest.ReadBody(t, resp))
	approve(t, app.App, admin, codify)
	codify = waitForState(t, app.App, codify.ID, run.Succeeded)
	require.NotNil(t, codify.NewStateVersionID)
	w = waitForWindow(t, app.App, id, breakglass.Codified)
	after := waitForState(t, app.App, *w.DriftCheckRunID, run.NoChanges)
	require.Equal(t, run.DriftClean, after.DriftStatus)
	require.Equal(t, codify.ID, *after.SourceRunID, "the check compared the world with the codified state")
	st, err := app.System.StateStore.Content(ctx, app.Orgs["acme"], *codify.NewStateVersionID)
	require.NoError(t, err)
	require.Contains(t, string(st), `"size":"large"`, "the changed world is in state")

	// Outside any window: an out-of-band change reads "unowned drift" and is told to
	// admins and owners; "Plan to correct" starts a normal run that puts it back.
	network := cloudObjectOf(t, ctx, cloudAdmin, "network", ws)
	_, err = cloudAdmin.AdminUpdate(ctx, "network", network.ID, map[string]any{"labels": map[string]any{"managed_by": "someone"}}, "hotfix without a window")
	require.NoError(t, err)
	resp = app.PostForm(t, operator, "/workspaces/"+ws+"/drift", url.Values{"_csrf": {app.CSRF(t, operator)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	unowned := waitForState(t, app.App, runIDOf(t, resp), run.Planned)
	require.Equal(t, run.DriftUnowned, unowned.DriftStatus)
	require.Contains(t, unowned.Drift.Resources[0].By, "the cloud's admin API, outside any run or window (reason given: hotfix without a window)")
	// The notice's fan-out job is inserted in the transaction that made the run PLANNED:
	// waiting for the run waited for it.
	var recipients []string
	var raw string
	require.NoError(t, app.DB.Raw(`SELECT args->'notice'->>'recipients' FROM river_job WHERE kind = 'notify.fanout' AND args->'notice'->>'event' = 'drift.unowned'
		AND args->'notice'->>'run_id' = ?`, unowned.ID).Scan(&raw).Error)
	require.NotEmpty(t, raw, "unowned drift is notified")
	require.NoError(t, json.Unmarshal([]byte(raw), &recipients))
	require.ElementsMatch(t, []string{userIDOf(t, app.App, "admin@acme.test"), userIDOf(t, app.App, "owner@acme.test")}, recipients)
	list := webtest.ReadBody(t, app.Get(t, operator, "/drift"))
	require.Contains(t, list, "unowned drift")
	resp = app.PostForm(t, operator, "/workspaces/"+ws+"/correct", url.Values{"_csrf": {app.CSRF(t, operator)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	correct := waitForState(t, app.App, runIDOf(t, resp), run.PendingApproval)
	require.Equal(t, run.KindApply, correct.Kind)
	// The network's labels back, and the database to the size its inputs ask for: the
	// codification accepted the larger size into state, not into the inputs.
	require.Equal(t, 2, correct.PlanSummary.Update, correct.StateReason)

	// A second window, asked for by an admin, whose change nobody codifies: she may not
	// approve her own window (an owner does), an admin may not close it, an owner does,
	// with a reason.
	second := askWindow(t, app.App, admin, ws, "INC-43: raise the backup retention by hand", 30)
	status, body = windowAct(t, app.App, admin, second, "approve", url.Values{"terms": {windowOf(t, app.App, second).TermsDigest}})
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "You asked for this window: four eyes means an admin other than you decides on it.")
	status, body = windowAct(t, app.App, owner, second, "approve", url.Values{"terms": {windowOf(t, app.App, second).TermsDigest}})
	require.Equal(t, http.StatusSeeOther, status, body)
	status, body = windowAct(t, app.App, admin, second, "open", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, waitForState(t, app.App, correct.ID, run.Stale).StateReason, "break-glass window "+second)
	glass, err = client.New(app.cloudURL, strings.TrimSpace(tokenArea.FindStringSubmatch(body)[1]))
	require.NoError(t, err)
	db = cloudObjectOf(t, ctx, cloudAdmin, "database", ws)
	attrs = configurable(t, "database", db.Attributes)
	attrs["backup_retention_days"] = 14
	_, err = glass.Update(ctx, "database", db.ID, attrs)
	require.NoError(t, err)
	status, body = windowAct(t, app.App, admin, second, "end", nil)
	require.Equal(t, http.StatusSeeOther, status, body)
	w2 := windowOf(t, app.App, second)
	require.Equal(t, breakglass.AwaitingCodification, w2.State)
	require.Equal(t, run.DriftUnowned, waitForState(t, app.App, *w2.DriftCheckRunID, run.Planned).DriftStatus,
		"the network's unowned change is still there beside the window's")
	require.Equal(t, breakglass.AwaitingCodification, windowOf(t, app.App, second).State, "drift keeps it awaiting codification")
	status, body = windowAct(t, app.App, admin, second, "close", url.Values{"reason": {"corrected by a forward fix instead"}})
	require.Equal(t, http.StatusForbidden, status, body)
	status, body = windowAct(t, app.App, owner, second, "close", url.Values{"reason": {"short"}})
	require.Equal(t, http.StatusUnprocessableEntity, status, body)
	status, body = windowAct(t, app.App, owner, second, "close", url.Values{"reason": {"corrected by a forward fix instead"}})
	require.Equal(t, http.StatusSeeOther, status, body)
	w2 = windowOf(t, app.App, second)
	require.Equal(t, breakglass.Closed, w2.State)
	require.Contains(t, w2.StateReason, "corrected by a forward fix instead")

	// A request decided too late expires (and says so); an approval nobody uses in time
	// expires by its job.
	late := askWindow(t, app.App, operator, ws, "INC-44: rotate the database password by hand", 15)
	require.NoError(t, app.DB.Exec("UPDATE breakglass_windows SET decision_deadline = now() - interval '1 second' WHERE id = ?", late).Error)
	status, body = windowAct(t, app.App, admin, late, "approve", url.Values{"terms": {windowOf(t, app.App, late).TermsDigest}})
	require.Equal(t, http.StatusConflict, status, body)
	require.Equal(t, breakglass.Expired, windowOf(t, app.App, late).State)
	unused := askWindow(t, app.App, operator, ws, "INC-45: flush the connection pool by hand", 15)
	status, body = windowAct(t, app.App, admin, unused, "approve", url.Values{"terms": {windowOf(t, app.App, unused).TermsDigest}})
	require.Equal(t, http.StatusSeeOther, status, body)
	require.NoError(t, app.DB.Exec("UPDATE breakglass_windows SET approval_expires_at = now() - interval '1 second' WHERE id = ?", unused).Error)
	_, err = app.System.Breakglass.Due(ctx, unused, breakglass.Approved)
	require.NoError(t, err)
	require.Equal(t, breakglass.Expired, windowOf(t, app.App, unused).State)
	status, body = windowAct(t, app.App, operator, unused, "open", nil)
	require.Equal(t, http.StatusConflict, status, "an expired approval opens nothing: %s", body)

	// Every step is on the record, and the governance report says what the path did.
	for _, action := range []string{"breakglass.requested", "breakglass.approved", "breakglass.opened", "breakglass.credentials_issued",
		"breakglass.ended", "breakglass.codification_requested", "breakglass.codified"} {
		require.EqualValues(t, 1, countRows(t, app.App, "SELECT count(*) FROM audit_events WHERE target_id = ? AND action = ?", id, action), action)
	}
	require.EqualValues(t, 1, countRows(t, app.App, "SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'breakglass.closed'", second))
	require.EqualValues(t, 1, countRows(t, app.App, "SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.stale'", waiting.ID))
	history := webtest.ReadBody(t, app.Get(t, owner, "/audit"))
	require.Contains(t, history, "codified")
	report := webtest.ReadBody(t, app.Get(t, owner, "/governance"))
	require.Contains(t, report, "4 break-glass windows: 1 codified, 1 closed without codification")
	require.Contains(t, report, "0 awaiting codification, 0 open, 2 rejected, cancelled or expired")
	require.Contains(t, report, id+" (codified): asked for by ")
	require.Contains(t, report, "2 drift checks found unowned drift, 1 found drift from a break-glass window, 1 found none")
}

// cloudObjectOf is the workspace's only live object of a kind.
func cloudObjectOf(t *testing.T, ctx context.Context, admin *client.Client, kind, ws string) api.Object {
	t.Helper()
	all, err := admin.AdminList(ctx, kind)
	require.NoError(t, err)
	i := slices.IndexFunc(all, func(o api.Object) bool { return o.Namespace.Workspace == ws })
	require.GreaterOrEqual(t, i, 0, "no %s of workspace %s", kind, ws)
	return all[i]
}

// configurable is an object's attributes as a PUT takes them (the computed ones left out).
func configurable(t *testing.T, kind string, attrs map[string]any) map[string]any {
	t.Helper()
	k, ok := api.Lookup(kind)
	require.True(t, ok)
	out := map[string]any{}
	for name, v := range attrs {
		if a, _ := k.Attr(name); !a.Computed {
			out[name] = v
		}
	}
	return out
}
