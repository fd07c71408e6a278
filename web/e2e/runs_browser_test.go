//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
)

const (
	operatorEmail    = "operator@acme.test"
	operatorPassword = "operator-acme"
	operatorName     = "Olivia (Acme Corp operator)"
	adminName        = "Adam (Acme Corp admin)"

	// Artifacts for a human; not assertions.
	runWideScreenshot     = "/tmp/gantry-run-1280.png"
	runPhoneScreenshot    = "/tmp/gantry-run-390.png"
	requestWideScreenshot = "/tmp/gantry-request-1280.png"
)

// endStates are the states after which a run never changes again, and PLANNED, where
// a dry run stops: a wait for another state gives up as soon as the run is in one.
var endStates = []string{"SUCCEEDED", "FAILED", "REJECTED", "EXPIRED", "STALE", "APPLY_INTERRUPTED", "CANCELLED",
	"POLICY_BLOCKED", "NO_CHANGES", "PLANNED"}

var runURLPath = regexp.MustCompile(`^/runs/(run-[a-z0-9]+)$`)

// TestRequestApproveApplyInBrowser is the four-eyes flow of web/runs_test.go driven
// through two real browsers: the operator requests a database in an environment that
// requires approval and watches the run page, which must follow the run live over
// SSE; the admin approves it from the approvals inbox.
func TestRequestApproveApplyInBrowser(t *testing.T) {
	chrome := chromePath(t) // fail fast, before the database and servers start
	app := webtest.Start(t)
	operator := startBrowser(t, chrome)

	// 1. The operator fills in the request form, from the catalog.
	signInAs(t, operator, app, operatorEmail, operatorPassword, "Olivia")
	b := operator
	b.do(t, "open the catalog from the navigation",
		chromedp.Click(chromedp.CSS(`nav.mainnav a[href="/catalog"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="catalog"]`)),
	)
	require.Equal(t, "Catalog", text(t, b, chromedp.CSS(`nav.mainnav a[href="/catalog"]`)))
	requestLink := chromedp.CSS(`[data-testid="template-postgres"] a.button`)
	require.Equal(t, "Request", text(t, b, requestLink), "the PostgreSQL card's request link")
	b.do(t, "open the PostgreSQL request form",
		chromedp.Click(requestLink, chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("submit-request")),
	)
	require.Equal(t, app.URL+"/requests/new?template=postgres", location(t, b))
	requireHTMXLoaded(t, b)

	staging := run(t, b, "choose the staging environment", chromedp.Evaluate[string](`(() => {
		const select = document.getElementById("environment");
		const option = [...select.options].find(o => o.textContent.trim().startsWith("staging"));
		if (!option) return "";
		select.value = option.value;
		select.dispatchEvent(new Event("change", {bubbles: true}));
		return option.textContent.replace(/\s+/g, " ").trim();
	})()`))
	require.NotEmpty(t, staging, "no staging option in the environment select")
	require.Contains(t, staging, "approval required", "the staging option should say it needs approval")
	require.Equal(t, app.OrgEnvironmentID(t, "acme", "staging"), value(t, b, chromedp.ID("environment")))
	b.do(t, "type the workspace and the database name",
		chromedp.SendKeys(chromedp.ID("workspace"), "orders-db"),
		chromedp.SendKeys(chromedp.ID("input-name"), "orders"),
	)

	// Inline validation: htmx posts the form ~400 ms after typing stops and swaps in
	// the field's message.
	storage := chromedp.ID("input-storage_gb")
	storageError := `[data-testid="error-inputs.storage_gb"]`
	retype(t, b, "input-storage_gb", "5000")
	msg := waitForText(t, b, "the storage size's inline error", storageError,
		`s => s.includes("from 10 to 1000")`, stepBase)
	require.Equal(t, "Enter a number from 10 to 1000.", msg)
	retype(t, b, "input-storage_gb", "20")
	waitForText(t, b, "the storage size's inline error to clear", storageError, `s => s === ""`, stepBase)
	require.Equal(t, "20", value(t, b, storage))
	require.Equal(t, "orders", value(t, b, chromedp.ID("input-name")))
	require.Equal(t, "orders-db", value(t, b, chromedp.ID("workspace")))
	screenshotAt(t, b, requestWideScreenshot, 1280, 800, false)

	b.do(t, "submit the request", chromedp.Evaluate[chromedp.Void](`document.getElementById("submit-request").click()`))

	// 2. The run page: simulated, planned, and waiting for someone else.
	b.do(t, "wait for the run page", chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-state"]`)))
	runURL := location(t, b)
	u, err := url.Parse(runURL)
	require.NoError(t, err)
	m := runURLPath.FindStringSubmatch(u.Path)
	require.NotNil(t, m, "after submitting, the browser should be on a run page, not %s", runURL)
	runID := m[1]
	b.do(t, "wait for the SIMULATED banner", chromedp.WaitVisible(chromedp.CSS(`[data-testid="simulated"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="simulated"]`)), "SIMULATED")
	require.Contains(t, text(t, b, chromedp.CSS(`.page-head h1`)), "orders-db")
	require.Contains(t, text(t, b, chromedp.CSS(`.page-head h1`)), "staging")
	inputs := text(t, b, chromedp.CSS(`[data-testid="inputs"]`))
	require.Regexp(t, `storage_gb\s+20\b`, inputs, "the run should carry the corrected storage size")
	require.Regexp(t, `name\s+orders\b`, inputs)

	// A mark on the window survives only as long as the page is not reloaded.
	run(t, b, "mark the page", chromedp.Evaluate[chromedp.Void](`window.gantryE2ENoReload = true`))
	loads := runPageLoads(b, runURL)
	require.Equal(t, 1, loads, "documents seen: %v", b.events.documentList())

	waitForRunState(t, b, "PENDING_APPROVAL")
	// The risk class and the rule that set it say why a person must decide, once: in
	// the summary, not again beside the state.
	summary := text(t, b, chromedp.CSS(`[data-testid="review-summary"]`))
	require.Contains(t, summary, "risk 1 in a protected environment")
	require.Contains(t, summary, "(rule create_update_only)")
	reasons := run(t, b, "count the state reasons", chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="run-reason"]').length`))
	require.Zero(t, reasons, "the risk sentence is said once")
	require.Equal(t, "current", stage(t, b, "Decision")["status"], "the Decision stage while waiting")
	approveButtons := run(t, b, "look for an approve button", chromedp.Evaluate[int](`document.querySelectorAll("#approve").length`))
	require.Zero(t, approveButtons, "the requester must not be offered to approve their own run (four eyes)")

	// 3. The admin, in a browser of their own, approves from the inbox.
	admin := startBrowser(t, chrome)
	signIn(t, admin, app)
	admin.do(t, "open the approvals inbox from the navigation",
		chromedp.Click(chromedp.CSS(`nav.mainnav a[href="/approvals"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="approvals"]`)),
	)
	require.True(t, strings.HasPrefix(text(t, admin, chromedp.CSS(`nav.mainnav a[href="/approvals"]`)), "Approvals"))
	require.Equal(t, "1", text(t, admin, chromedp.CSS(`nav.mainnav [data-testid="inbox-count"]`)), "one run waits for the admin")
	row := `[data-testid="approvals"] [data-testid="run-` + runID + `"]`
	admin.do(t, "find the run in the inbox", chromedp.WaitVisible(chromedp.CSS(row)))
	rowText := text(t, admin, chromedp.CSS(row))
	require.Contains(t, rowText, "orders-db")
	require.Contains(t, rowText, "approve or reject", "under Waiting for you, with the decision it waits for")
	require.Contains(t, rowText, "SIMULATED")
	admin.do(t, "open the run from the inbox",
		chromedp.Click(chromedp.CSS(row+` th a`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("approve")),
	)
	require.Equal(t, runURL+"/review", location(t, admin), "the inbox leads to the review")
	var planDigest string
	require.NoError(t, app.DB.Raw("SELECT plan_digest FROM runs WHERE id = ?", runID).Scan(&planDigest).Error)
	require.NotEmpty(t, planDigest)
	require.Equal(t, planDigest, text(t, admin, chromedp.CSS(`[data-testid="plan-digest"]`)), "the admin decides on the run's plan")
	admin.do(t, "approve the plan", chromedp.Click(chromedp.ID("approve"), chromedp.NodeVisible))
	admin.do(t, "wait for the approval's flash", chromedp.WaitVisible(chromedp.CSS(`.flashes .flash-success`)))
	require.Contains(t, text(t, admin, chromedp.CSS(`.flashes .flash-success`)), "You approved orders-db #1.")
	require.Equal(t, runURL, location(t, admin))

	// 4. The operator's page, never reloaded, follows the run to its end.
	waitForRunState(t, b, "SUCCEEDED")
	require.True(t, run(t, b, "read the mark", chromedp.Evaluate[bool](`window.gantryE2ENoReload === true`)),
		"the run page was reloaded; it should have updated in place")
	require.Equal(t, loads, runPageLoads(b, runURL), "the run page was loaded again; documents seen: %v", b.events.documentList())

	history := run(t, b, "read the audit history", chromedp.Evaluate[[]string](`[...document.querySelectorAll(
		'[data-testid="history"] > li')].map(li =>
		li.querySelector("[data-action]").dataset.action + " by " + li.querySelector('[data-testid="history-actor"]').textContent.trim())`))
	require.Equal(t, []string{
		"run.queued by " + operatorName,
		"run.planning by Gantry",
		"run.pending_approval by Gantry",
		"run.approved by " + adminName,
		"run.running by Gantry",
		"run.verifying by Gantry",
		"run.succeeded by Gantry",
	}, history, "audit history on the operator's page")
	approval := stage(t, b, "Decision")
	require.Equal(t, "done", approval["status"], "Decision stage: %v", approval)
	require.Equal(t, "by "+adminName, approval["actor"], "Decision stage: %v", approval)
	require.Contains(t, approval["detail"], "approved plan", "Decision stage: %v", approval)
	require.Empty(t, run(t, b, "look for decision buttons", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#approve, #reject, #cancel-run")].map(e => e.id)`)), "a finished run offers no decision")
	b.do(t, "wait for the outputs", chromedp.WaitVisible(chromedp.CSS(`[data-testid="outputs"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="outputs"]`)), "endpoint")

	screenshotAt(t, b, runWideScreenshot, 1280, 800, false)
	screenshotAt(t, b, runPhoneScreenshot, 390, 844, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// 5. What both browsers reported along the way.
	requireNoCSPViolations(t, operator)
	requireNoCSPViolations(t, admin)
	requireStaticAssetsOK(t, operator, app.URL)
	requireStaticAssetsOK(t, admin, app.URL)
	// Not an assertion: the number of times the operator's page opened the run's live
	// stream, for whoever looks at reconnects.
	t.Logf("live stream connections of the operator's run page: %d", streamConnections(b, runURL))
}

// signInAs is signIn for any demo user: it opens Gantry, signs in on the provider's
// login page and waits for the dashboard with the user's first name in the header.
func signInAs(t *testing.T, b *browser, app *webtest.App, email, password, firstName string) {
	t.Helper()
	b.do(t, "open Gantry", chromedp.Navigate(app.URL+"/"))
	b.do(t, "wait for the provider's login form", chromedp.WaitVisible(chromedp.ID("username")))
	require.True(t, strings.HasPrefix(location(t, b), app.Issuer+"/"),
		"an anonymous visitor should land on the provider's login page, not %s", location(t, b))
	b.do(t, "sign in at the provider as "+email,
		chromedp.SendKeys(chromedp.ID("username"), email),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("sign-in"), chromedp.NodeVisible),
	)
	user := chromedp.CSS(`[data-testid="current-user"]`)
	b.do(t, "wait for the dashboard's signed-in header", chromedp.WaitVisible(user))
	require.Contains(t, text(t, b, user), firstName)
	require.Equal(t, app.URL+"/", location(t, b), "after sign-in the browser should be back on the dashboard")
	settle(t, b)
}

// settle waits until the tab holds one loaded document that stays: the redirects of a
// sign-in can replace the dashboard once more after it first shows, and a click on the
// first one then finds no node (seen in CI).
func settle(t *testing.T, b *browser) {
	t.Helper()
	// The document is identified by its performance.timeOrigin, once loaded.
	probe := func() (float64, string) {
		// A probe on a document being replaced may find no page to evaluate in: it
		// gives up within its budget and counts as not settled.
		ctx, cancel := bench.Context(b.ctx, time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
			Origin float64
			State  string
			URL    string
		}](`({origin: performance.timeOrigin, state: document.readyState, url: location.href})`))
		if err != nil {
			return 0, b.why(ctx, err)
		}
		if v.State != "complete" {
			return 0, fmt.Sprintf("%s is %s", v.URL, v.State)
		}
		return v.Origin, fmt.Sprintf("%s, loaded at %.0f", v.URL, v.Origin)
	}
	// Settled is the same loaded document at two probes 150 ms apart. The window is
	// fixed: it is what "stays" means here; no event says a document will not be
	// replaced.
	last := 0.0
	bench.Eventually(t, "the page to settle (one loaded document for 150 ms)", stepBase, func() (bool, any) {
		origin, seen := probe()
		settled := origin > 0 && origin == last
		last = origin
		return settled, seen
	}, bench.Poll(150*time.Millisecond))
}

// retype replaces what the input with id holds by typing: it selects the whole value,
// as a user would, and types over it.
func retype(t *testing.T, b *browser, id, keys string) {
	t.Helper()
	run(t, b, "select the text of #"+id, chromedp.Evaluate[chromedp.Void](
		fmt.Sprintf(`(el => { el.focus(); el.select(); })(document.getElementById(%q))`, id)))
	b.do(t, fmt.Sprintf("type %q into #%s", keys, id), chromedp.SendKeys(chromedp.ID(id), keys))
	require.Equal(t, keys, value(t, b, chromedp.ID(id)), "#%s after typing", id)
}

// waitForText polls the text of the element matching selector until the JavaScript
// predicate accepts it, within base of idle-machine time, and returns that text. The
// element may be replaced meanwhile (htmx swaps it).
func waitForText(t *testing.T, b *browser, what, selector, predicate string, base time.Duration) string {
	t.Helper()
	ctx, cancel := bench.Context(b.ctx, base)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.PollFunction[struct{ Text string }](`(selector) => {
		const el = document.querySelector(selector);
		if (!el) return false;
		const s = el.textContent.trim();
		return (`+predicate+`)(s) ? {text: s} : false;
	}`, chromedp.WithPollingArgs(selector), chromedp.WithPollingInterval(50*time.Millisecond), untilCancelled))
	if err != nil {
		t.Fatalf("waiting for %s: %s; last text: %q", what, b.why(ctx, err), peek(b, fmt.Sprintf(
			`(document.querySelector(%q) || {textContent: "(no element)"}).textContent.trim()`, selector)))
	}
	return got.Text
}

// waitForRunState waits, without reloading, until the run page shows state want (its
// code, which the state badge carries in data-state beside the words people read),
// within liveBase of idle-machine time; it gives up early when the run ends in another
// state.
func waitForRunState(t *testing.T, b *browser, want string) {
	t.Helper()
	ctx, cancel := bench.Context(b.ctx, liveBase)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.PollFunction[string](`(want, ends) => {
		const el = document.querySelector('[data-testid="run-state"]');
		if (!el) return false;
		const s = el.dataset.state;
		return s === want || ends.includes(s) ? s : false;
	}`, chromedp.WithPollingArgs(want, endStates), chromedp.WithPollingInterval(50*time.Millisecond), untilCancelled))
	if err != nil {
		t.Fatalf("waiting for the run page to show %s: %s; it shows %q", want, b.why(ctx, err), peek(b,
			`(el => el ? el.dataset.state + " (" + el.textContent.trim() + ")" : "(no run-state)")(document.querySelector('[data-testid="run-state"]'))`))
	}
	if got != want {
		reason := peek(b, `(document.querySelector('[data-testid="run-reason"]') || {textContent: ""}).textContent.trim()`)
		t.Fatalf("the run page shows %s (%s), waiting for %s", got, reason, want)
	}
}

// shownRunState is the code of the state the run page's badge shows (its data-state).
func shownRunState(t *testing.T, b *browser) string {
	t.Helper()
	return attribute(t, b, chromedp.CSS(`[data-testid="run-state"]`), "data-state")
}

// stage reads one stage of the timeline by name: its status, actor and detail.
func stage(t *testing.T, b *browser, name string) map[string]string {
	t.Helper()
	s := run(t, b, "read the "+name+" stage", chromedp.Evaluate[map[string]string](fmt.Sprintf(`(() => {
		const li = [...document.querySelectorAll('[data-testid="timeline"] > li[data-testid="stage"]')]
			.find(li => li.querySelector(".stage-name").textContent.trim() === %q);
		if (!li) return null;
		const text = sel => (li.querySelector(sel) || {textContent: ""}).textContent.trim();
		return {status: li.dataset.status, actor: text(".stage-actor"), detail: text(".stage-detail")};
	})()`, name)))
	require.NotNil(t, s, "no %q stage in the timeline", name)
	return s
}

// runPageLoads counts the page loads of url the browser saw.
func runPageLoads(b *browser, url string) int {
	n := 0
	for _, r := range b.events.documentList() {
		if r.url == url {
			n++
		}
	}
	return n
}

// streamConnections counts the responses to the run page's live stream.
func streamConnections(b *browser, runURL string) int {
	n := 0
	for _, r := range b.events.responseList() {
		if r.url == runURL+"/events" {
			n++
		}
	}
	return n
}

// screenshotAt writes a full-page screenshot of the current page at one viewport
// width, and logs any horizontal overflow.
func screenshotAt(t *testing.T, b *browser, path string, width, height int64, phone bool) {
	t.Helper()
	var opts []chromedp.EmulateViewportOption
	if phone {
		opts = []chromedp.EmulateViewportOption{chromedp.EmulateMobile, chromedp.EmulatePortrait}
	}
	b.do(t, fmt.Sprintf("emulate a %d px viewport", width), chromedp.EmulateViewport(width, height, opts...))
	overflow := run(t, b, "measure horizontal overflow", chromedp.Evaluate[int64](
		`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
	png := run(t, b, "take a full-page screenshot", chromedp.FullScreenshot(100))
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot at %d px: %s (horizontal overflow: %d px)", width, path, overflow)
	if overflow > 0 {
		// Name the innermost elements that stick out, for whoever fixes the layout.
		culprits := run(t, b, "find what overflows", chromedp.Evaluate[[]string](`(() => {
			const limit = document.documentElement.clientWidth + 1;
			const out = el => el.getBoundingClientRect().right > limit;
			const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
				[...el.classList].map(c => "." + c).join("") +
				(el.dataset.testid ? '[data-testid="' + el.dataset.testid + '"]' : "");
			return [...document.body.querySelectorAll("*")]
				.filter(el => out(el) && ![...el.children].some(out))
				.slice(0, 10)
				.map(el => name(el.parentElement) + " > " + name(el) + " right=" + Math.round(el.getBoundingClientRect().right) +
					" " + JSON.stringify(el.textContent.trim().slice(0, 40)));
		})()`))
		for _, c := range culprits {
			t.Logf("  sticks out at %d px: %s", width, c)
		}
	}
}
