//go:build !fast

// Live: needs runc (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package web_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/idempotency"
	"gantry/models/run"
	"gantry/runner/oci"
	"gantry/sandbox/cloud"
	"gantry/sandbox/sandboxtest"
)

// TestStopApplyInRunc: an apply of the postgres template cancelled halfway (the network
// and subnet created, the database's create held by the cloud) ends APPLY_INTERRUPTED
// with the canceller and reason; tofu in its runc container is interrupted and stores
// the state it wrote, which equals what the cloud holds; the plan was attempted once
// and never again; the workspace stays fenced (a later run does not apply) until an
// admin recovers the run, after which the next run applies the rest.
func TestStopApplyInRunc(t *testing.T) {
	t.Parallel()
	wrap, reached, release := sandboxtest.HoldCreate("database")
	app := startRuncWith(t, runcOptions{limits: oci.Limits{MemoryBytes: 512 << 20, Pids: 256, CPUs: 1}, cloud: wrap})
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	const phase = 2 * time.Minute

	r := app.App.WaitForRun(t, app.App.RequestRun(t, operator, runcPostgresInputs(staging, run.KindApply)), run.PendingApproval, phase)
	approve(t, app.App, admin, r)
	bench.Receive(t, "the apply to reach the database's create", 2*phase, reached)
	app.App.StopApply(t, admin, r.ID, "the wrong engine version is being rolled out")
	stopped := app.App.WaitForRun(t, r.ID, run.ApplyInterrupted, phase)
	require.Equal(t, run.EndApplyCancelled, stopped.Ending)
	require.Contains(t, stopped.StateReason, "the wrong engine version is being rolled out")
	require.NotNil(t, stopped.CancelledBy)
	// tofu hears the interrupt while the create is under way, and waits for it.
	app.App.WaitLiveLog(t, stopped, run.JobApply, "Interrupt received", phase)
	close(release)

	stopped = app.App.WaitStopped(t, r.ID, phase)
	log := app.App.RunLogs(t, stopped)
	require.NotNil(t, stopped.NewStateVersionID, "the state the apply wrote is stored"+log)
	state := app.App.StateIDs(t, r.OrganizationID, r.WorkspaceID)
	require.Equal(t, sandboxtest.ObjectIDs(t, app.cloudDir), state, "the stored state is what the cloud holds"+log)
	require.Equal(t, 1, app.cloudObjects(t, "network"), log)
	require.Zero(t, app.cloudObjects(t, "database"), "the cancelled apply's token no longer changes the cloud"+log)
	ledger, err := cloud.ReadApplies(app.cloudDir)
	require.NoError(t, err)
	require.Empty(t, ledger.Twice(), "the cancelled plan was never applied again")

	// The writer fence holds: a later approved run waits, the workspace is the
	// interrupted run's until an admin recovers it; then the rest is applied.
	next := app.App.WaitForRun(t, app.App.RequestRun(t, operator, runcPostgresInputs(staging, run.KindApply)), run.PendingApproval, phase)
	require.Equal(t, 1, next.PlanSummary.Create, "planned from the state the stopped apply wrote"+app.App.RunLogs(t, next))
	approve(t, app.App, admin, next)
	var slot string
	require.NoError(t, app.DB.Raw("SELECT coalesce(active_run_id, '') FROM workspaces WHERE id = ?", r.WorkspaceID).Scan(&slot).Error)
	require.Equal(t, r.ID, slot, "the stopped run holds the workspace")
	recoverRun(t, app.App, admin, r.ID, "checked the network and subnet in the cloud")
	app.App.WaitForRun(t, next.ID, run.Succeeded, 2*phase)
	require.Equal(t, 1, app.cloudObjects(t, "database"))
	runcAssertNoLeftovers(t, app.exec)
}

// recoverRun closes an interrupted apply as admin c on its run page.
func recoverRun(t *testing.T, app *webtest.App, c *http.Client, runID, reason string) {
	t.Helper()
	resp := app.PostForm(t, c, "/runs/"+runID+"/recover", url.Values{"_csrf": {app.CSRF(t, c)}, "idempotency_key": {idempotency.NewKey()},
		"reason": {reason}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
}
