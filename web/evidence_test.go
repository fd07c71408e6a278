package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/db/dbtest"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/models/state"
	"gantry/models/state/statetest"
)

// The whole evidence binding (DESIGN §3): a decision names the run, its plan revision
// and digest, its config bundle digest, the state it was planned against and its policy
// evaluation; anything that moved since the page was drawn is 409 STALE_EVIDENCE and
// records nothing; half the evidence is 422.

// postDecision sends a decision form as a script would (JSON problem answers).
func postDecision(t *testing.T, app *webtest.App, c *http.Client, path string, form url.Values) (int, errs.Code, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, app.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	require.NoError(t, err)
	body := webtest.ReadBody(t, resp)
	var problem struct {
		Code errs.Code `json:"code"`
	}
	if resp.StatusCode >= 400 {
		require.NoError(t, json.Unmarshal([]byte(body), &problem), body)
	}
	return resp.StatusCode, problem.Code, body
}

// decisionsRecorded counts the approvals and rejections audited for run id.
func decisionsRecorded(t *testing.T, app *webtest.App, id string) int64 {
	t.Helper()
	return countRows(t, app, "SELECT count(*) FROM audit_events WHERE target_id = ? AND action IN ('run.approved', 'run.rejected')", id)
}

func TestEvidenceThatMovedIsStale(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	// A workspace with a state, so the predecessor is a real version.
	base := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	approve(t, app, admin, base)
	waitForState(t, app, base.ID, run.Succeeded)

	// The run changed in the database between the review and the decision: each field
	// of the binding in turn, as a re-plan, a regenerated bundle or another state would.
	// A change to the bucket keeps the plan non-empty against the applied state.
	changed := bucketRequest(staging, "eu-west")
	changed.Set("inputs.retention_days", "60")
	for column, value := range map[string]any{"plan_revision": 7, "config_digest": "sha256:regenerated", "prior_serial": 99,
		"prior_lineage": "another-lineage", "prior_state_digest": "sha256:other-state", "plan_digest": "sha256:replanned"} {
		t.Run(column, func(t *testing.T) {
			for _, action := range []string{"approve", "reject"} {
				r := waitForState(t, app, app.RequestRun(t, operator, changed), run.PendingApproval)
				require.NotNil(t, r.PriorStateVersionID, "planned against the workspace's state")
				form := decisionForm(t, app, admin, r) // what the review page carried
				form.Set("reason", "not like this")
				require.NoError(t, app.DB.Exec("UPDATE runs SET "+column+" = ? WHERE id = ?", value, r.ID).Error)
				status, code, body := postDecision(t, app, admin, "/runs/"+r.ID+"/"+action, form)
				require.Equal(t, http.StatusConflict, status, body)
				require.Equal(t, errs.CodeStaleEvidence, code)
				require.Equal(t, run.PendingApproval, waitForState(t, app, r.ID, run.PendingApproval).State)
				require.Zero(t, decisionsRecorded(t, app, r.ID), "nothing recorded")
			}
		})
	}

	// A form that names other evidence than the run carries (tampered, or from another
	// page) is the same conflict; a field missing is 422 INVALID_INPUT. Nothing recorded.
	r := waitForState(t, app, app.RequestRun(t, operator, changed), run.PendingApproval)
	for _, field := range run.EvidenceFields {
		form := decisionForm(t, app, admin, r)
		form.Set(field, form.Get(field)+"0")
		status, code, body := postDecision(t, app, admin, "/runs/"+r.ID+"/approve", form)
		// (A number still: ten times the revision or serial is another one.)
		require.Equal(t, http.StatusConflict, status, "%s: %s", field, body)
		require.Equal(t, errs.CodeStaleEvidence, code, field)

		form = decisionForm(t, app, admin, r)
		form.Del(field)
		status, code, body = postDecision(t, app, admin, "/runs/"+r.ID+"/approve", form)
		require.Equal(t, http.StatusUnprocessableEntity, status, "%s missing: %s", field, body)
		require.Equal(t, errs.CodeInvalidInput, code, field)
	}
	require.Zero(t, decisionsRecorded(t, app, r.ID))
	require.Equal(t, run.PendingApproval, waitForState(t, app, r.ID, run.PendingApproval).State)

	// The evidence the decision bound is in its audit event.
	approve(t, app, admin, r)
	var data string
	require.NoError(t, app.DB.Raw("SELECT data::text FROM audit_events WHERE target_id = ? AND action = 'run.approved'", r.ID).Scan(&data).Error)
	var event struct {
		Evidence struct {
			RunID        string `json:"run_id"`
			PlanRevision int    `json:"plan_revision"`
			PlanDigest   string `json:"plan_digest"`
			ConfigDigest string `json:"config_digest"`
			Predecessor  struct {
				StateVersionID string `json:"state_version_id"`
				Serial         int    `json:"serial"`
				Lineage        string `json:"lineage"`
				Digest         string `json:"digest"`
			} `json:"predecessor"`
			PolicyEvaluationID string `json:"policy_evaluation_id"`
		} `json:"evidence"`
	}
	require.NoError(t, json.Unmarshal([]byte(data), &event))
	ev := run.EvidenceOf(r)
	require.Equal(t, r.ID, event.Evidence.RunID)
	require.Equal(t, ev.PlanRevision, event.Evidence.PlanRevision)
	require.Equal(t, ev.PlanDigest, event.Evidence.PlanDigest)
	require.Equal(t, ev.ConfigDigest, event.Evidence.ConfigDigest)
	require.Equal(t, ev.Predecessor.VersionID, event.Evidence.Predecessor.StateVersionID)
	require.Equal(t, ev.Predecessor.Serial, event.Evidence.Predecessor.Serial)
	require.Equal(t, ev.Predecessor.Lineage, event.Evidence.Predecessor.Lineage)
	require.Equal(t, ev.Predecessor.Digest, event.Evidence.Predecessor.Digest)
	require.Equal(t, ev.PolicyEvaluationID, event.Evidence.PolicyEvaluationID)
}

// TestStateWriteMarksWaitingRunsStale: a state version written to a workspace (through
// the OpenTofu backend, as a live apply does) marks that workspace's runs waiting for a
// decision or an apply STALE in the write's own transaction, with the reason; a refused
// write marks nothing; other workspaces are untouched.
func TestStateWriteMarksWaitingRunsStale(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	ctx := context.Background()
	waiting := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "orders", "small", "7")), run.PendingApproval)
	approved := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "orders", "medium", "7")), run.PendingApproval)
	blocked := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "orders", "small", "3")), run.PolicyBlocked)
	other := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "billing", "small", "7")), run.PendingApproval)
	writer := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "orders", "large", "7")), run.PendingApproval)
	require.Equal(t, waiting.WorkspaceID, blocked.WorkspaceID)
	// An approved run waits for its apply (no worker takes it here).
	app.StopQueue(t)
	approve(t, app, admin, approved)
	require.Equal(t, run.Approved, waitForState(t, app, approved.ID, run.Approved).State)

	// A job of another run of the workspace writes state through the backend.
	user, pass, err := app.System.StateStore.IssueCredentials(ctx, writer.OrganizationID, writer.WorkspaceID, writer.ID, state.PhaseApply, time.Minute)
	require.NoError(t, err)
	cred, err := app.System.State.Authenticate(ctx, user, pass)
	require.NoError(t, err)
	const lineage = "6c1d0d1e-0000-4000-8000-00000000abcd"
	require.NoError(t, app.System.State.Write(ctx, cred, writer.WorkspaceID, "", statetest.StateJSON(3, lineage, "written")))
	// A refused write (its serial goes back) changes nothing for anyone.
	require.ErrorIs(t, app.System.State.Write(ctx, cred, writer.WorkspaceID, "", statetest.StateJSON(2, lineage, "older")), state.ErrSerialRegressed)

	var versionXmin string
	require.NoError(t, app.DB.Raw("SELECT xmin::text FROM state_versions WHERE workspace_id = ? AND serial = 3", writer.WorkspaceID).Scan(&versionXmin).Error)
	for _, r := range []run.Run{waiting, approved, blocked} {
		r = waitForState(t, app, r.ID, run.Stale)
		require.Contains(t, r.StateReason, "the workspace state moved to serial 3")
		var xmin string
		require.NoError(t, app.DB.Raw("SELECT xmin::text FROM runs WHERE id = ?", r.ID).Scan(&xmin).Error)
		require.Equal(t, versionXmin, xmin, "%s went STALE in the write's own transaction", r.ID)
		require.EqualValues(t, 1, auditCount(t, app, r.ID, "run.stale"))
	}
	require.Equal(t, run.PendingApproval, waitForState(t, app, other.ID, run.PendingApproval).State, "another workspace is untouched")
	// The writer's own run is not marked by its own write.
	require.Equal(t, run.PendingApproval, waitForState(t, app, writer.ID, run.PendingApproval).State)

	// Deciding a run already STALE is 409 STALE_EVIDENCE; the page offers Plan again.
	stale := waitForState(t, app, waiting.ID, run.Stale)
	status, code, _ := postDecision(t, app, admin, "/runs/"+stale.ID+"/approve", decisionForm(t, app, admin, stale))
	require.Equal(t, http.StatusConflict, status)
	require.Equal(t, errs.CodeStaleEvidence, code)
	page := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+stale.ID+"/review"))
	require.Contains(t, page, `id="plan-again"`)
	require.NotContains(t, page, `id="approve"`)
	require.NotContains(t, page, `id="reject"`)
}

// TestDecisionRacingItsDeadline: a decision is judged by clock_timestamp() after it holds
// the run's row, when it commits, never by when it arrived. The interleavings are forced
// with PostgreSQL's own locks, so each case happens every time whatever the machine's pace:
//   - the decision arrives before the deadline and waits for the run's row (another
//     transaction holds it); the deadline passes meanwhile: 409 APPROVAL_EXPIRED, the run
//     EXPIRED, nothing recorded;
//   - the decision is judged (it holds the row) before the deadline moves, and waits for
//     its audit event; the deadline's move waits for the decision: recorded, approved
//     before the deadline, never expired.
func TestDecisionRacingItsDeadline(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	admin := app.NewMember(t, "acme", "Rae Racer", authz.RoleAdmin, false)
	ctx := authz.WithSubject(context.Background(), admin.Subject(time.Now()))
	pending := func(ws string) run.Run {
		req := bucketRequest(staging, "eu-west")
		req.Set("workspace", ws)
		return waitForState(t, app, app.RequestRun(t, operator, req), run.PendingApproval)
	}
	late, early := pending("race-late"), pending("race-early")
	// No job may touch the runs while the test holds their locks.
	app.StopQueue(t)
	type answer struct{ err error }
	approve := func(r run.Run) (<-chan answer, func() (bool, any)) {
		done := make(chan answer, 1)
		go func() {
			_, err := app.System.Runs.Decisions.Approve(ctx, r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
			done <- answer{err}
		}()
		returned := func() (bool, any) {
			select {
			case a := <-done:
				return true, a.err
			default:
				return false, nil
			}
		}
		return done, returned
	}
	reload := func(r run.Run) run.Run {
		var after run.Run
		require.NoError(t, app.DB.Where("id = ?", r.ID).Take(&after).Error)
		return after
	}

	// The deadline passes while the decision waits for the row.
	holder := app.DB.Begin()
	defer holder.Rollback()
	require.NoError(t, holder.Exec("SELECT id FROM runs WHERE id = ? FOR UPDATE", late.ID).Error)
	done, returned := approve(late)
	dbtest.WaitBlockedBy(t, app.DB, dbtest.BackendPID(t, holder), 1, returned)
	require.NoError(t, holder.Exec("UPDATE runs SET decision_deadline = clock_timestamp() WHERE id = ?", late.ID).Error)
	require.NoError(t, holder.Commit().Error)
	err := bench.Receive(t, "the late decision's answer", 10*time.Second, done).err
	require.Equal(t, errs.CodeApprovalExpired, errs.CodeOf(err), "%v", err)
	after := reload(late)
	require.Zero(t, auditCount(t, app, late.ID, "run.approved"), "a late decision records nothing")
	require.Nil(t, after.ApprovedBy)
	require.Equal(t, run.Expired, after.State)
	require.Contains(t, after.StateReason, "after the deadline")

	// The decision is judged first; the deadline's move waits for it.
	chain := app.DB.Begin()
	defer chain.Rollback()
	require.NoError(t, chain.Exec("SELECT pg_advisory_xact_lock(hashtextextended('audit:' || ?, 0))", early.OrganizationID).Error)
	done, returned = approve(early)
	dbtest.WaitBlockedBy(t, app.DB, dbtest.BackendPID(t, chain), 1, returned) // judged, holding the row, waiting to audit
	move := app.DB.Begin()
	defer move.Rollback()
	movePID := dbtest.BackendPID(t, move)
	moved := make(chan error, 1)
	go func() {
		moved <- move.Exec("UPDATE runs SET decision_deadline = clock_timestamp() WHERE id = ?", early.ID).Error
	}()
	dbtest.WaitWaiting(t, app.DB, movePID, nil) // the move waits for the decision's row
	require.NoError(t, chain.Commit().Error)
	require.NoError(t, bench.Receive(t, "the early decision's answer", 10*time.Second, done).err)
	require.NoError(t, bench.Receive(t, "the deadline's move", 10*time.Second, moved))
	require.NoError(t, move.Commit().Error)
	after = reload(early)
	require.EqualValues(t, 1, auditCount(t, app, early.ID, "run.approved"), "a recorded decision is audited once")
	require.NotNil(t, after.ApprovedBy)
	require.Equal(t, run.Approved, after.State)
	require.NotNil(t, after.ApprovedAt)
	require.True(t, after.ApprovedAt.Before(*after.DecisionDeadline), "approved at %s, before the deadline moved to %s", after.ApprovedAt, after.DecisionDeadline)
}

// TestFiftyConcurrentDecisionsRecordOne: fifty people decide one run at once (approve
// and reject); exactly one decision is recorded, the others are conflicts.
func TestFiftyConcurrentDecisionsRecordOne(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	deciders := make([]webtest.Member, 50)
	for i := range deciders {
		deciders[i] = app.NewMember(t, "acme", fmt.Sprintf("Decider %d", i), authz.RoleAdmin, false)
	}
	var wg sync.WaitGroup
	results := make([]error, len(deciders))
	start := make(chan struct{})
	for i, d := range deciders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := authz.WithSubject(context.Background(), d.Subject(time.Now()))
			<-start
			if i%2 == 0 {
				_, results[i] = app.System.Runs.Decisions.Approve(ctx, r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
			} else {
				_, results[i] = app.System.Runs.Decisions.Reject(ctx, r.ID, run.EvidenceOf(r), "not now")
			}
		}()
	}
	close(start)
	wg.Wait()
	succeeded := 0
	for _, err := range results {
		if err == nil {
			succeeded++
			continue
		}
		require.Equal(t, errs.CodeConflict, errs.CodeOf(err), "%v", err)
	}
	require.Equal(t, 1, succeeded)
	require.EqualValues(t, 1, decisionsRecorded(t, app, r.ID))
}

// TestRunPlanningAcrossAStateWriteEndsStale: a state write marks only runs that wait; a
// run still PLANNING on the old predecessor when the write lands ends STALE as its plan
// finishes, saying why, instead of waiting for a decision on a plan of an old target.
func TestRunPlanningAcrossAStateWriteEndsStale(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	ctx := context.Background()
	writer := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "moving", "small", "7")), run.PendingApproval)
	app.StopQueue(t)
	planning := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "moving", "medium", "7")), run.Queued)
	work, err := app.System.Runs.Plans.BeginPlan(ctx, planning.ID, byHand)
	require.NoError(t, err)
	require.Nil(t, work.Run.PriorStateVersionID, "planned against no state yet")

	user, pass, err := app.System.StateStore.IssueCredentials(ctx, writer.OrganizationID, writer.WorkspaceID, writer.ID, state.PhaseApply, time.Minute)
	require.NoError(t, err)
	cred, err := app.System.State.Authenticate(ctx, user, pass)
	require.NoError(t, err)
	require.NoError(t, app.System.State.Write(ctx, cred, writer.WorkspaceID, "", statetest.StateJSON(1, "6c1d0d1e-0000-4000-8000-00000000beef", "written")))
	require.Equal(t, run.Planning, waitForState(t, app, planning.ID, run.Planning).State, "the write leaves a planning run alone")

	// The plan finishes (the writer's plan stands in for the runner's output).
	artifact := func(id *string) []byte {
		require.NotNil(t, id)
		data, _, err := app.System.Artifacts.Get(ctx, writer.OrganizationID, *id)
		require.NoError(t, err)
		return data
	}
	finished, err := app.System.Runs.Plans.FinishPlan(ctx, run.PlanOutcome{Lease: work.Lease, Revision: work.Run.PlanRevision,
		PlanFile: artifact(writer.PlanArtifactID), PlanJSON: artifact(writer.PlanJSONArtifactID), Log: []byte("planned\n"), HasChanges: true})
	require.NoError(t, err)
	require.Equal(t, run.Stale, finished.State)
	require.Contains(t, finished.StateReason, "the workspace state moved to serial 1")
	require.Contains(t, finished.StateReason, "while this run was planning")
	require.EqualValues(t, 1, auditCount(t, app, planning.ID, "run.stale"))
	page := webtest.ReadBody(t, app.Get(t, operator, "/runs/"+planning.ID))
	require.Contains(t, page, `id="plan-again"`)
}

// byHand is the lease claim of a phase a test begins itself, outside the queue.
var byHand = run.Claim{JobID: -1, Holder: "test"}
