package web_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/idempotency"
	"gantry/models/run"
)

// waitForState waits for the run to reach want (woken by its change notifications), or
// fails the test with its state and logs. The base is generous: it only bounds how long a
// run that never gets there is waited for, and a live run's phases take seconds.
func waitForState(t testing.TB, app *webtest.App, runID string, want run.State) run.Run {
	t.Helper()
	return app.WaitForRun(t, runID, want, time.Minute)
}

// phaseLogs returns the run's plan, apply and verification logs, for failure messages.
func phaseLogs(t testing.TB, app *webtest.App, r run.Run) string {
	t.Helper()
	var b strings.Builder
	for name, id := range map[string]*string{"plan": r.PlanLogArtifactID, "apply": r.ApplyLogArtifactID, "verify": r.VerifyLogArtifactID} {
		if id == nil {
			continue
		}
		data, _, err := app.System.Artifacts.Get(t.Context(), r.OrganizationID, *id)
		if err != nil {
			fmt.Fprintf(&b, "--- %s log: %v\n", name, err)
			continue
		}
		fmt.Fprintf(&b, "--- %s log:\n%s\n", name, data)
	}
	return b.String()
}

// decisionForm is what a review page submits: CSRF, a fresh idempotency key, the
// evidence the run carries, and for an elevated decision the typed confirmation and a
// reason.
func decisionForm(t *testing.T, app *webtest.App, c *http.Client, r run.Run) url.Values {
	t.Helper()
	v := url.Values{"_csrf": {app.CSRF(t, c)}, "idempotency_key": {idempotency.NewKey()}}
	for field, value := range run.EvidenceOf(r).Fields() {
		v.Set(field, value)
	}
	if run.RequirementOf(r).Elevated {
		v.Set("confirm", "DESTROY")
		v.Set("reason", "checked with the data owner")
	}
	return v
}

// approve approves r as c through the run page's form.
func approve(t *testing.T, app *webtest.App, c *http.Client, r run.Run) {
	t.Helper()
	resp := app.PostForm(t, c, "/runs/"+r.ID+"/approve", decisionForm(t, app, c, r))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
}

func TestRequestApproveApplyFlow(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	runID := app.RequestRun(t, operator, url.Values{"template": {"postgres"}, "environment": {staging}, "workspace": {"orders-db"},
		"kind": {"apply"}, "inputs.name": {"orders"}, "inputs.engine_version": {"16"}, "inputs.size": {"small"}, "inputs.storage_gb": {"20"},
		"inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}})

	r := waitForState(t, app, runID, run.PendingApproval)
	require.Equal(t, "1-protected", r.RiskLevel)
	require.Equal(t, "create_update_only", r.RiskRule)
	require.Equal(t, r.RiskReason, r.StateReason)
	require.Equal(t, "operator", r.RequiredApprover)
	require.Equal(t, "pass", r.PolicyOutcome)
	require.Equal(t, 3, r.PlanSummary.Create)
	require.True(t, r.Simulated)

	// The requester may not approve their own run.
	resp := app.PostForm(t, operator, "/runs/"+runID+"/approve", decisionForm(t, app, operator, r))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	admin := app.LoggedIn(t, "admin@acme.test")
	page := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+runID))
	require.Contains(t, page, "SIMULATED")
	require.Contains(t, page, r.PlanDigest)
	// Approving other evidence than the run carries is a conflict, and changes nothing.
	for _, field := range []string{"plan_digest", "policy_evaluation_id", "policy_result_digest", "policy_bundle_digest"} {
		form := decisionForm(t, app, admin, r)
		form.Set(field, "sha256:0000")
		resp = app.PostForm(t, admin, "/runs/"+runID+"/approve", form)
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusConflict, resp.StatusCode, field)
	}
	resp = app.PostForm(t, admin, "/runs/"+runID+"/approve", decisionForm(t, app, admin, r))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	r = waitForState(t, app, runID, run.Succeeded)
	require.Equal(t, r.PlanDigest, r.ApprovedPlanDigest)
	require.NotNil(t, r.NewStateVersionID)
	require.Contains(t, string(r.Outputs), "endpoint")

	var events []struct {
		Action    string
		ActorName string
	}
	require.NoError(t, app.DB.Table("audit_events").Where("target_id = ?", runID).Order("seq").Find(&events).Error)
	var got []string
	for _, e := range events {
		got = append(got, e.Action+" by "+e.ActorName)
	}
	require.Equal(t, []string{
		"run.queued by Olivia (Acme Corp operator)",
		"run.planning by Gantry",
		"run.pending_approval by Gantry",
		"run.approved by Adam (Acme Corp admin)",
		"run.running by Gantry",
		"run.verifying by Gantry",
		"run.succeeded by Gantry",
	}, got)
	page = webtest.ReadBody(t, app.Get(t, operator, "/runs/"+runID))
	require.Contains(t, page, shownState(run.Succeeded))
	require.Contains(t, page, "Adam (Acme Corp admin)")
}

func TestDryRunIsNeverGated(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	prod := app.OrgEnvironmentID(t, "acme", "production")
	runID := app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {prod}, "workspace": {"logs"},
		"kind": {"plan_only"}, "inputs.name": {"logs-archive"}})
	r := waitForState(t, app, runID, run.Planned)
	require.Nil(t, r.ApprovedBy)
	require.Nil(t, r.NewStateVersionID, "a dry run never applies")
	var applyJobs int64
	require.NoError(t, app.DB.Table("river_job").Where("kind = 'run.apply'").Count(&applyJobs).Error)
	require.Zero(t, applyJobs)

	// Its review says nobody decides it and what the same change would carry if
	// applied in production (any change there: risk 2, an admin or owner),
	// and four eyes does not apply rather than "yes" with nothing to decide.
	review := webtest.ReadBody(t, app.Get(t, operator, "/runs/"+runID+"/review"))
	require.Regexp(t, `data-testid="dry-run-headline"><strong>Dry run: nothing is applied, so nobody decides it\. Applied, the same change would be risk 2 \(any change in a production environment\): an admin or owner`, review)
	require.Contains(t, review, `data-testid="four-eyes">Does not apply: a dry run has nothing to decide.`)
}

func TestSelfServiceInUnprotectedEnvironment(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	runID := app.RequestRun(t, operator, url.Values{"template": {"network"}, "environment": {dev}, "workspace": {"net"},
		"kind": {"apply"}, "inputs.name": {"dev-net"}, "inputs.subnet_count": {"2"}})
	r := waitForState(t, app, runID, run.Succeeded)
	require.Equal(t, "self-service", r.ApprovalKind)
	require.Equal(t, r.PlanDigest, r.ApprovedPlanDigest)

	// Same inputs again: nothing to change, nothing applied.
	again := app.RequestRun(t, operator, url.Values{"template": {"network"}, "environment": {dev}, "workspace": {"net"},
		"kind": {"apply"}, "inputs.name": {"dev-net"}, "inputs.subnet_count": {"2"}})
	waitForState(t, app, again, run.NoChanges)
	body := webtest.ReadBody(t, app.Get(t, operator, "/workspaces"))
	require.True(t, strings.Contains(body, "net"))
}

// TestRunEventsStream: the live stream sends the run's section at once, again after
// every change, and, to a viewer (who has no inbox count for it to carry), ends with
// an "end" event when the run is finished.
func TestRunEventsStream(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	runID := app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {staging}, "workspace": {"stream"},
		"kind": {"apply"}, "inputs.name": {"stream-bucket"}})
	r := waitForState(t, app, runID, run.PendingApproval)

	viewer := app.LoggedIn(t, "viewer@acme.test")
	resp := app.Get(t, viewer, "/runs/"+runID+"/events")
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := streamEvents(resp.Body)
	next := func() string {
		e := bench.Receive(t, "the stream's next event", 15*time.Second, events)
		require.NotEmpty(t, e, "the stream ended early")
		return e
	}
	require.Contains(t, next(), shownState(run.PendingApproval), "the current state comes at once")

	admin := app.LoggedIn(t, "admin@acme.test")
	approve := app.PostForm(t, admin, "/runs/"+runID+"/approve", decisionForm(t, app, admin, r))
	webtest.ReadBody(t, approve)
	require.Equal(t, http.StatusSeeOther, approve.StatusCode)
	var last string
	for {
		e := next()
		if strings.HasPrefix(e, "end ") {
			break
		}
		if strings.HasPrefix(e, "run ") {
			last = e
		}
	}
	require.Contains(t, last, shownState(run.Succeeded), "the last section shown is the final state")
	_, open := <-events
	require.False(t, open, "the server closes the stream after end")
}

// TestRunEventsStreamSince: a page that already shows the current run gets no event
// until the run changes (a swap would lose the reader's focus and typing); the first
// event it gets is the changed run.
func TestRunEventsStreamSince(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	runID := app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {staging}, "workspace": {"since"},
		"kind": {"apply"}, "inputs.name": {"since-bucket"}})
	r := waitForState(t, app, runID, run.PendingApproval)
	page := webtest.ReadBody(t, app.Get(t, operator, "/runs/"+runID))
	streamURL := fmt.Sprintf("/runs/%s/events?since=%d", runID, r.UpdatedAt.UnixNano())
	require.Contains(t, page, strings.ReplaceAll(streamURL, "&", "&amp;"), "the page asks for changes since what it shows")

	resp := app.Get(t, operator, streamURL)
	defer resp.Body.Close()
	events := streamEvents(resp.Body)
	var last string
	seen := func() any { return last }
	// The stream sends its live log section ("log-phase") right after it decided, from
	// since, whether to send the run: reading up to it proves that decision was made on
	// the run as the page shows it, before the change below.
	first := receiveUntil(t, "the stream's first section", 15*time.Second, events, func(e string) bool {
		last = e
		return strings.HasPrefix(e, "log-phase ") || strings.HasPrefix(e, "run ")
	}, seen)
	require.True(t, strings.HasPrefix(first, "log-phase "), "the unchanged run was not sent again: %s", first)
	admin := app.LoggedIn(t, "admin@acme.test")
	approve := app.PostForm(t, admin, "/runs/"+runID+"/approve", decisionForm(t, app, admin, r))
	webtest.ReadBody(t, approve)
	require.Equal(t, http.StatusSeeOther, approve.StatusCode)
	changed := receiveUntil(t, "the changed run", 15*time.Second, events, func(e string) bool {
		last = e
		return strings.HasPrefix(e, "run ")
	}, seen)
	require.Contains(t, changed, `data-testid="run-state"`, changed)
	require.NotContains(t, changed, shownState(run.PendingApproval), "the first run event is the changed run")
}

// streamEvents reads a server-sent event stream until it ends (then closes the channel),
// sending each event as "<name> <data>".
func streamEvents(body io.Reader) <-chan string {
	events := make(chan string, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var name string
		var data strings.Builder
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data.WriteString(strings.TrimPrefix(line, "data: "))
			case line == "" && name != "":
				events <- name + " " + data.String()
				name = ""
				data.Reset()
			}
		}
	}()
	return events
}

var runRedirect = regexp.MustCompile(`^/runs/(run-[a-z0-9]+)$`)

// runIDOf is the id of the run a response redirects to.
func runIDOf(t *testing.T, resp *http.Response) string {
	t.Helper()
	m := runRedirect.FindStringSubmatch(resp.Header.Get("Location"))
	require.NotNil(t, m, resp.Header.Get("Location"))
	return m[1]
}
