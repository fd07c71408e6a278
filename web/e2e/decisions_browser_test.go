//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/idempotency"
	"gantry/models/risk"
	runmodel "gantry/models/run"
	"gantry/views/paths"
)

// The browser tests of the decision rules (DESIGN §3) as a person meets them: an
// elevated approval typed wrong comes back with the error at its field, the reason kept
// and the focus on the error; a STALE run offers "Plan again" instead of a decision; the
// requester is never offered to reject her own run.

const (
	// wrongWord is the confirmation typed without looking: close to DESTROY, but not it.
	wrongWord   = "destroy"
	goodReason  = "bucket retired, its exports moved to the archive"
	shortReason = "too short" // one character under MinReasonLength
)

// decisionShot is where a screenshot of one page state goes, for a human to look at
// (not an assertion): the system temp dir, named for the test and the state.
func decisionShot(t *testing.T, state string) string {
	t.Helper()
	return filepath.Join(os.TempDir(), "gantry-"+strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))+"-"+state+".png")
}

// TestElevatedApprovalErrorsInBrowser: an owner, freshly signed in, approves a destroy
// (risk 3). A wrong confirmation word keeps her on the review page (422) with the message
// at the confirmation field, the field marked invalid and focused (with a visible focus
// ring), and the reason she typed kept; a reason too short does the same at the reason.
// Neither records anything; DESTROY with a reason approves.
func TestElevatedApprovalErrorsInBrowser(t *testing.T) {
	chrome := chromePath(t) // fail fast, before the database and servers start
	app := webtest.Start(t)
	operator := app.LoggedIn(t, operatorEmail)
	dev := app.OrgEnvironmentID(t, "acme", "development")
	bucket := func(kind string) url.Values {
		return url.Values{"template": {"bucket"}, "environment": {dev}, "workspace": {"billing-exports"}, "kind": {kind},
			"inputs.name": {"billing-exports"}}
	}
	waitForRunRow(t, app, requestRunHTTP(t, app, operator, bucket("apply")), runmodel.Succeeded)
	id := requestRunHTTP(t, app, operator, bucket("destroy"))
	r := waitForRunRow(t, app, id, runmodel.PendingApproval)
	require.NotNil(t, r.RiskClass)
	require.Equal(t, 3, *r.RiskClass, "a destroy run is risk 3")
	require.True(t, runmodel.RequirementOf(r).Elevated, "a risk-3 decision is elevated")

	// A sign-in at the provider just now: the elevation window is open, so the review
	// page shows the approval form itself, not "Sign in again to decide".
	b := startBrowser(t, chrome)
	signInAs(t, b, app, ownerEmail, ownerPassword, ownerFirst)
	b.do(t, "open the review page and arm the approval",
		chromedp.Navigate(app.URL+paths.RunReview(id)),
		chromedp.Click(chromedp.ID("arm-approve"), chromedp.NodeVisible),
	)
	waitForFocus(t, b, "approve-confirmation-body") // the confirmation takes the focus: type after it moved
	require.Zero(t, count(t, b, "#reauthenticate"), "a fresh sign-in decides without signing in again")
	require.Equal(t, "Type "+runmodel.ConfirmWord+" to confirm", text(t, b, chromedp.CSS(`label[for="approve-confirm"]`)))

	confirmMsg := fmt.Sprintf("Type %s to approve a change that destroys or loses data.", runmodel.ConfirmWord)
	reasonMsg := fmt.Sprintf("Say why, in at least %d characters.", runmodel.MinReasonLength)

	// 1. The word in lower case, with a good reason.
	b.do(t, "approve with a wrong confirmation word",
		chromedp.SendKeys(chromedp.ID("approve-confirm"), wrongWord),
		chromedp.SendKeys(chromedp.ID("approve-reason"), goodReason),
		chromedp.Click(chromedp.ID("approve"), chromedp.NodeVisible),
	)
	b.do(t, "wait for the confirmation's error", chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-confirm"]`)))
	requireDecisionRetry(t, b, app, r, "confirm", confirmMsg, goodReason)
	screenshotAt(t, b, decisionShot(t, "wrong-word"), 1280, 800, false)
	screenshotAt(t, b, decisionShot(t, "wrong-word-390"), 390, 844, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// 2. The right word, a reason one character too short.
	retype(t, b, "approve-confirm", runmodel.ConfirmWord)
	retype(t, b, "approve-reason", shortReason)
	b.do(t, "approve with a short reason",
		chromedp.Click(chromedp.ID("approve"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-reason"]`)),
	)
	requireDecisionRetry(t, b, app, r, "reason", reasonMsg, shortReason)
	screenshotAt(t, b, decisionShot(t, "short-reason"), 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// 3. DESTROY and a reason: approved, and only this attempt is on record.
	retype(t, b, "approve-confirm", runmodel.ConfirmWord)
	retype(t, b, "approve-reason", goodReason)
	b.do(t, "approve with DESTROY and a reason",
		chromedp.Click(chromedp.ID("approve"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`.flashes .flash-success`)),
	)
	require.Contains(t, text(t, b, chromedp.CSS(`.flashes .flash-success`)), "You approved ")
	require.Equal(t, app.URL+paths.Run(id), location(t, b), "after approving, the browser is on the run page")
	waitForRunState(t, b, "SUCCEEDED")
	done := waitForRunRow(t, app, id, runmodel.Succeeded)
	require.Equal(t, ownerName, done.ApprovedByName)
	var decisions []struct{ Action, Data string }
	require.NoError(t, app.DB.Raw(`SELECT action, data::text AS data FROM audit_events
		WHERE target_id = ? AND action IN ('run.approved', 'run.rejected') ORDER BY id`, id).Scan(&decisions).Error)
	require.Len(t, decisions, 1, "the two refused attempts recorded nothing: %v", decisions)
	require.Equal(t, "run.approved", decisions[0].Action)
	require.Contains(t, decisions[0].Data, goodReason, "the approval's reason is audited")
	screenshotAt(t, b, decisionShot(t, "approved"), 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	requireNoCSPViolations(t, b)
	requireStaticAssetsOK(t, b, app.URL)
}

// requireDecisionRetry checks the page an elevated approval with one wrong field came
// back as: the review page of run r again, answered 422 to the approve POST, with msg at
// field (confirm or reason) and nowhere else, the field invalid and focused with a
// visible focus ring, the reason textarea holding reason, and the run still waiting.
func requireDecisionRetry(t *testing.T, b *browser, app *webtest.App, r runmodel.Run, field, msg, reason string) {
	t.Helper()
	approveURL := app.URL + paths.RunApprove(r.ID)
	require.Equal(t, approveURL, location(t, b), "the refused approval is answered in place, not redirected")
	require.Equal(t, http.StatusUnprocessableEntity, b.events.lastDocumentStatus(approveURL),
		"documents seen: %v", b.events.documentList())
	title := run(t, b, "read the title", chromedp.Evaluate[string](`document.title`))
	require.True(t, strings.HasPrefix(title, "Review run "+r.Label()+" · "), "the review page again, not %q", title)
	require.True(t, strings.HasPrefix(text(t, b, chromedp.CSS(`.page-head h1`)), "Review run "+r.Label()))
	require.Equal(t, string(runmodel.PendingApproval), shownRunState(t, b))

	// The summary names what went wrong and links to the field.
	summary := chromedp.CSS(`[data-testid="error-summary"]`)
	require.Contains(t, text(t, b, summary), "Your decision was not recorded")
	links := run(t, b, "read the summary's links", chromedp.Evaluate[[]string](`[...document.querySelectorAll(
		'[data-testid="error-summary"] a')].map(a => a.getAttribute("href") + " " + a.textContent.trim())`))
	require.Equal(t, []string{"#approve-" + field + " " + msg}, links)

	// The message sits at its field, inside the field's box and described by it.
	other := map[string]string{"confirm": "reason", "reason": "confirm"}[field]
	input := chromedp.ID("approve-" + field)
	require.Equal(t, msg, text(t, b, chromedp.CSS(`[data-testid="error-`+field+`"]`)))
	at := run(t, b, "find the error beside its field", chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
		const input = document.getElementById(%q), err = document.querySelector('[data-testid="error-%s"]');
		return !!err && input.closest(".field").contains(err) && input.getAttribute("aria-describedby") === err.id;
	})()`, "approve-"+field, field)))
	require.True(t, at, "the %s error should be in its field's box and name it in aria-describedby", field)
	require.Equal(t, "true", attribute(t, b, input, "aria-invalid"))
	require.Zero(t, count(t, b, `[data-testid="error-`+other+`"]`), "no error at the %s field", other)
	require.Equal(t, "false", attribute(t, b, chromedp.ID("approve-"+other), "aria-invalid"))

	// What she typed as the reason is still there.
	require.Equal(t, reason, value(t, b, chromedp.ID("approve-reason")), "the typed reason is kept")
	hidden := run(t, b, "measure the reason box", chromedp.Evaluate[int](
		`(el => el.scrollHeight - el.clientHeight)(document.getElementById("approve-reason"))`))
	require.LessOrEqual(t, hidden, 0, "the reason box should show the whole kept reason, not scroll it (%d px hidden)", hidden)

	// The focus is on the field in error, and it shows.
	waitForFocus(t, b, "approve-"+field)
	ring := run(t, b, "read the focused field's outline", chromedp.Evaluate[map[string]string](`(() => {
		const s = getComputedStyle(document.activeElement);
		return {style: s.outlineStyle, width: s.outlineWidth, color: s.outlineColor};
	})()`))
	require.NotEqual(t, "none", ring["style"], "the focused field shows a focus ring: %v", ring)
	require.NotEqual(t, "0px", ring["width"], "the focused field shows a focus ring: %v", ring)

	// Nothing was decided.
	var state string
	require.NoError(t, app.DB.Raw("SELECT state FROM runs WHERE id = ?", r.ID).Scan(&state).Error)
	require.Equal(t, string(runmodel.PendingApproval), state)
}

// TestStaleRunOffersPlanAgainInBrowser: two runs of one workspace wait for a decision;
// the first is approved and applied. The admin, who could decide the second a moment
// ago, watches its page turn STALE: the decision forms go, "Plan again" comes, on the
// run page and on the review page. Plan again starts a new run with the same template
// version and inputs, which waits for a decision; the old run stays STALE.
func TestStaleRunOffersPlanAgainInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	operator := app.LoggedIn(t, operatorEmail)
	adminHTTP := app.LoggedIn(t, adminEmail)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	bucket := func(retention string) url.Values {
		return url.Values{"template": {"bucket"}, "environment": {staging}, "workspace": {"logs"}, "kind": {"apply"},
			"inputs.name": {"logs-archive"}, "inputs.retention_days": {retention}}
	}
	first := waitForRunRow(t, app, requestRunHTTP(t, app, operator, bucket("60")), runmodel.PendingApproval)
	second := waitForRunRow(t, app, requestRunHTTP(t, app, operator, bucket("90")), runmodel.PendingApproval)
	require.Equal(t, runmodel.EvidenceOf(first).Predecessor, runmodel.EvidenceOf(second).Predecessor, "both planned from the same state")

	// The admin may decide the second run while it waits: the forms are there.
	b := startBrowser(t, chrome)
	signIn(t, b, app)
	runURL := app.URL + paths.Run(second.ID)
	b.do(t, "open the second run's page", chromedp.Navigate(runURL))
	waitForRunState(t, b, "PENDING_APPROVAL")
	require.Equal(t, []string{"decision", "approve", "reject"}, decisionControls(t, b), "the admin may decide a waiting run")

	// The first is approved (elsewhere) and applied: its state makes the second STALE,
	// and the open page follows.
	approveHTTP(t, app, adminHTTP, first)
	waitForRunRow(t, app, first.ID, runmodel.Succeeded)
	waitForRunState(t, b, "STALE")
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="run-reason"]`)), "the workspace state moved")
	requirePlanAgainOnly(t, b)
	screenshotAt(t, b, decisionShot(t, "run-page"), 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// A fresh load of the run page and of the review page say the same.
	b.do(t, "load the run page again", chromedp.Navigate(runURL), chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-state"]`)))
	require.Equal(t, "STALE", shownRunState(t, b))
	requirePlanAgainOnly(t, b)
	b.do(t, "open the review page",
		chromedp.Navigate(app.URL+paths.RunReview(second.ID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="plan-again-section"]`)),
	)
	require.Equal(t, "STALE", shownRunState(t, b))
	requirePlanAgainOnly(t, b)
	screenshotAt(t, b, decisionShot(t, "review-page"), 1280, 800, false)
	screenshotAt(t, b, decisionShot(t, "review-page-390"), 390, 844, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// Plan again: a new run of the same template version and inputs.
	b.do(t, "plan again",
		chromedp.Click(chromedp.ID("plan-again"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`.flashes .flash-success`)),
	)
	u, err := url.Parse(location(t, b))
	require.NoError(t, err)
	m := runURLPath.FindStringSubmatch(u.Path)
	require.NotNil(t, m, "plan again should land on a run page, not %s", u)
	newID := m[1]
	require.NotEqual(t, second.ID, newID, "plan again makes a new run")
	again := waitForRunRow(t, app, newID, runmodel.PendingApproval)
	require.Equal(t, "Planning again as run "+again.Label()+".", text(t, b, chromedp.CSS(`.flashes .flash-success`)))
	waitForRunState(t, b, "PENDING_APPROVAL")
	// Planning again is requesting again: the admin who clicked is the new run's
	// requester, so under four eyes someone else decides it.
	require.Equal(t, adminName, again.RequestedByName)
	require.Empty(t, decisionControls(t, b), "the admin requested the new run: four eyes")
	require.NotNil(t, again.SourceRunID)
	require.Equal(t, second.ID, *again.SourceRunID)
	require.Equal(t, second.WorkspaceID, again.WorkspaceID)
	require.Equal(t, second.TemplateName, again.TemplateName)
	require.Equal(t, second.TemplateVersion, again.TemplateVersion)
	require.JSONEq(t, string(second.Inputs), string(again.Inputs))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="inputs"]`)), "90", "the new run carries the stale run's inputs")
	screenshotAt(t, b, decisionShot(t, "planned-again"), 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	var oldState string
	require.NoError(t, app.DB.Raw("SELECT state FROM runs WHERE id = ?", second.ID).Scan(&oldState).Error)
	require.Equal(t, string(runmodel.Stale), oldState, "the stale run stays STALE")

	requireNoCSPViolations(t, b)
	requireStaticAssetsOK(t, b, app.URL)
}

// requirePlanAgainOnly checks that the page offers "Plan again" and no decision.
func requirePlanAgainOnly(t *testing.T, b *browser) {
	t.Helper()
	section := chromedp.CSS(`[data-testid="plan-again-section"]`)
	b.do(t, "wait for the plan again section", chromedp.WaitVisible(section))
	require.Contains(t, text(t, b, section), "This run is stale")
	require.Equal(t, "Plan again", text(t, b, chromedp.ID("plan-again")))
	require.Equal(t, "post", attribute(t, b, chromedp.CSS(`[data-testid="plan-again-section"] form`), "method"))
	require.Empty(t, decisionControls(t, b), "a STALE run offers no decision")
}

// TestRequesterSeesNoRejectInBrowser: the operator who requested a run is never offered
// to reject it, on its run page or its review page; under four eyes she is not offered
// to approve it either, and says why. She may cancel it. An admin, on the same run, sees
// both. With four eyes off (an owner's matrix edit) she may approve her own run, and
// still not reject it.
func TestRequesterSeesNoRejectInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	operator := app.LoggedIn(t, operatorEmail)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	bucket := func(workspace string) url.Values {
		return url.Values{"template": {"bucket"}, "environment": {staging}, "workspace": {workspace}, "kind": {"apply"},
			"inputs.name": {workspace}}
	}
	r := waitForRunRow(t, app, requestRunHTTP(t, app, operator, bucket("team-logs")), runmodel.PendingApproval)
	require.True(t, runmodel.RequirementOf(r).FourEyes, "a protected environment has four eyes by default")
	runURL, reviewURL := app.URL+paths.Run(r.ID), app.URL+paths.RunReview(r.ID)

	// 1. The admin, on the run and review pages: approve and reject.
	admin := startBrowser(t, chrome)
	signIn(t, admin, app)
	admin.do(t, "open the run page", chromedp.Navigate(runURL))
	waitForRunState(t, admin, "PENDING_APPROVAL")
	require.Equal(t, []string{"decision", "approve", "reject"}, decisionControls(t, admin))
	admin.do(t, "open the review page", chromedp.Navigate(reviewURL), chromedp.WaitVisible(chromedp.ID("reject")))
	require.Equal(t, []string{"decision", "approve", "reject"}, decisionControls(t, admin))
	screenshotAt(t, admin, decisionShot(t, "admin-review"), 1280, 800, false)
	admin.do(t, "reset the viewport", chromedp.ResetViewport())

	// 2. The requester: neither, and why; the cancel link, which works.
	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	whyNot := "You requested this run: four eyes means someone else decides on it."
	b.do(t, "open the review page", chromedp.Navigate(reviewURL), chromedp.WaitVisible(chromedp.CSS(`[data-testid="no-decision"]`)))
	require.Empty(t, decisionControls(t, b), "the requester is offered no decision on her own run's review page")
	require.Equal(t, whyNot, text(t, b, chromedp.CSS(`[data-testid="why-not"]`)))
	screenshotAt(t, b, decisionShot(t, "requester-review"), 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	b.do(t, "open the run page", chromedp.Navigate(runURL))
	waitForRunState(t, b, "PENDING_APPROVAL")
	require.Empty(t, decisionControls(t, b), "the requester is offered no decision on her own run's page")
	require.Equal(t, whyNot, text(t, b, chromedp.CSS(`[data-testid="why-not"]`)))
	require.Equal(t, "Cancel run…", text(t, b, chromedp.ID("cancel-run")))
	screenshotAt(t, b, decisionShot(t, "requester-run"), 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	b.do(t, "follow the cancel link",
		chromedp.Click(chromedp.ID("cancel-run"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("confirm-cancel")),
	)
	require.Equal(t, app.URL+paths.RunCancel(r.ID), location(t, b))
	b.do(t, "confirm the cancellation",
		chromedp.Click(chromedp.ID("confirm-cancel"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`.flashes .flash-success`)),
	)
	require.Equal(t, runURL, location(t, b))
	waitForRunState(t, b, "CANCELLED")

	// 3. Four eyes off for risk 1 in protected environments: the requester may approve
	// her own run, never reject it.
	ownerHTTP := app.LoggedIn(t, ownerEmail)
	setFourEyes(t, app, ownerHTTP, risk.Level1Protected, false)
	own := waitForRunRow(t, app, requestRunHTTP(t, app, operator, bucket("team-cache")), runmodel.PendingApproval)
	require.False(t, runmodel.RequirementOf(own).FourEyes, "the matrix edit took")
	b.do(t, "open the review page of a run without four eyes",
		chromedp.Navigate(app.URL+paths.RunReview(own.ID)),
		chromedp.WaitVisible(chromedp.ID("approve")),
	)
	require.Equal(t, []string{"decision", "approve"}, decisionControls(t, b), "she may approve her own run, never reject it")
	screenshotAt(t, b, decisionShot(t, "requester-no-four-eyes"), 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	b.do(t, "open its run page", chromedp.Navigate(app.URL+paths.Run(own.ID)))
	waitForRunState(t, b, "PENDING_APPROVAL")
	require.Equal(t, []string{"decision", "approve"}, decisionControls(t, b))

	requireNoCSPViolations(t, admin)
	requireNoCSPViolations(t, b)
	requireStaticAssetsOK(t, b, app.URL)
}

// decisionControls lists, in this order, which of the decision section, the approve
// button and the reject button the page has.
func decisionControls(t *testing.T, b *browser) []string {
	t.Helper()
	return run(t, b, "look for decision controls", chromedp.Evaluate[[]string](`[
		['decision', '[data-testid="decision"]'], ['approve', '#approve'], ['reject', '#reject'],
	].filter(([, sel]) => document.querySelector(sel)).map(([name]) => name)`))
}

// count is the number of elements matching the CSS selector.
func count(t *testing.T, b *browser, selector string) int {
	t.Helper()
	return run(t, b, "count "+selector, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, selector)))
}

// waitForFocus waits until the element with id has the focus, within stepBase of
// idle-machine time.
func waitForFocus(t *testing.T, b *browser, id string) {
	t.Helper()
	ctx, cancel := bench.Context(b.ctx, stepBase)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.PollFunction[bool](`(id) => document.activeElement && document.activeElement.id === id`,
		chromedp.WithPollingArgs(id), untilCancelled))
	if err != nil {
		t.Fatalf("waiting for the focus on #%s: %s; it is on %s", id, b.why(ctx, err),
			peek(b, `(e => e ? e.tagName + "#" + e.id : "(none)")(document.activeElement)`))
	}
}

// approveHTTP approves run r with c, as the review page's form would.
func approveHTTP(t *testing.T, app *webtest.App, c *http.Client, r runmodel.Run) {
	t.Helper()
	form := url.Values{"_csrf": {app.CSRF(t, c)}, idempotency.Field: {idempotency.NewKey()}}
	for field, v := range runmodel.EvidenceOf(r).Fields() {
		form.Set(field, v)
	}
	if runmodel.RequirementOf(r).Elevated {
		form.Set("confirm", "DESTROY")
		form.Set("reason", "checked with the data owner")
	}
	resp := app.PostForm(t, c, paths.RunApprove(r.ID), form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
}

// setFourEyes saves the built-in approval matrix with four eyes set to on at level,
// as the owner's matrix form would.
func setFourEyes(t *testing.T, app *webtest.App, owner *http.Client, level risk.Level, on bool) {
	t.Helper()
	m := risk.Default()
	form := url.Values{"_csrf": {app.CSRF(t, owner)}, "base_version": {"0"}, "comment": {"four eyes at " + string(level)}}
	for _, r := range m.Rules {
		form.Set(risk.ClassField(r.Condition), strconv.Itoa(int(r.Class)))
	}
	for _, d := range m.Decisions {
		if d.Level == level {
			d.FourEyes = on
		}
		form.Set(risk.ApproverField(d.Level), string(d.Approver))
		if d.FourEyes {
			form.Set(risk.FourEyesField(d.Level), "on")
		}
		if d.Elevated {
			form.Set(risk.ElevatedField(d.Level), "on")
		}
	}
	resp := app.PostForm(t, owner, paths.ApprovalMatrix(), form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
}
