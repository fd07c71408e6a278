//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

// Package e2e_test drives the whole application with a real headless Chromium:
// sign-in through the development OpenID Provider, the environment pages, and the
// browser's own verdict on the Content-Security-Policy.
package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/db/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

const (
	adminEmail    = "admin@acme.test"
	adminPassword = "admin-acme"
	adminFirst    = "Adam"
	envName       = "qa-eu"
	envTier       = "staging"

	// Artifacts for a human; not assertions.
	wideScreenshot  = "/tmp/gantry-env-1280.png"
	phoneScreenshot = "/tmp/gantry-env-390.png"
)

// How long the browser may take, in idle-machine time: each is a bench budget (base ×
// how busy the machine is, re-measured while it runs), made when the step starts, so a
// step that meets a busy machine (CI runs the live OpenTofu tests of other packages
// beside these) is allowed for at the pace of that moment.
const (
	// stepBase bounds one browser step (its actions and the DOM waits in them), so a
	// missing element fails fast, naming the step.
	stepBase = 15 * time.Second
	// liveBase bounds a wait for a page to change by itself (over SSE, or an htmx
	// request after typing), or for a run to reach a state.
	liveBase = 20 * time.Second
	// tabBase bounds every step of a tab together.
	tabBase = 60 * time.Second
	// browserBase is a hard stop for Chromium itself (its start included), longer than
	// tabBase so that a failure can still be captured.
	browserBase = tabBase + 30*time.Second
)

// untilCancelled leaves a chromedp poll without a timeout of its own in the page: the
// step's budget context ends it (a timer in the page would count real time, whatever
// the pace of the machine).
var untilCancelled = chromedp.WithPollingTimeout(0)

func TestEnvironmentsInBrowser(t *testing.T) {
	chrome := chromePath(t) // fail fast, before the database and servers start
	app := webtest.Start(t)
	b := startBrowser(t, chrome)

	// 1. Sign in through the provider's login page.
	signIn(t, b, app)
	requireHTMXLoaded(t, b)

	// 2. Create an environment through the form.
	b.do(t, "open the environment list from the navigation",
		chromedp.Click(chromedp.CSS(`#nav-settings > summary`), chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS(`nav.mainnav a[href="/environments"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="environments"]`)),
	)
	submitNewEnvironment(t, b, envName, envTier)
	row := chromedp.CSS(`[data-testid="environment-` + envName + `"]`)
	b.do(t, "wait for the new row in the list", chromedp.WaitVisible(row))
	require.Equal(t, app.URL+"/environments", location(t, b), "after a successful create the browser should be on the list")
	require.Equal(t, envTier, text(t, b, chromedp.CSS(`[data-testid="environment-`+envName+`"] td .badge`)), "tier cell of the new row")
	require.Contains(t, text(t, b, row), envTier)
	b.do(t, "wait for the success flash", chromedp.WaitVisible(chromedp.CSS(`.flashes .flash-success`)))
	require.Equal(t, "Environment "+envName+" created.", text(t, b, chromedp.CSS(`.flashes .flash-success`)))
	requireHTMXLoaded(t, b)

	captureLayouts(t, b)

	// 3. The same name again: the server refuses it and the form says why.
	submitNewEnvironment(t, b, envName, envTier)
	nameError := chromedp.CSS(`[data-testid="error-name"]`)
	b.do(t, "wait for the duplicate-name error", chromedp.WaitVisible(nameError))
	require.Equal(t, fmt.Sprintf("An environment named %q already exists.", envName), text(t, b, nameError))
	b.do(t, "wait for the error summary", chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-summary"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="error-summary"]`)), "The environment was not saved")
	require.Equal(t, http.StatusUnprocessableEntity, b.events.lastDocumentStatus(app.URL+"/environments"),
		"the duplicate should be answered 422; documents seen: %v", b.events.documentList())
	require.Equal(t, envName, value(t, b, chromedp.ID("name")), "the form keeps what was typed")
	require.Equal(t, "true", attribute(t, b, chromedp.ID("name"), "aria-invalid"))

	var count int64
	require.NoError(t, app.DB.Table("environments").
		Where("organization_id = ? AND name = ?", app.Orgs["acme"], envName).Count(&count).Error)
	require.EqualValues(t, 1, count, "exactly one environment %s in acme", envName)
	var tier string
	require.NoError(t, app.DB.Raw("SELECT tier FROM environments WHERE organization_id = ? AND name = ?",
		app.Orgs["acme"], envName).Scan(&tier).Error)
	require.Equal(t, envTier, tier)

	// 4. What the browser itself reported along the way.
	requireNoCSPViolations(t, b)
	requireStaticAssetsOK(t, b, app.URL)
	requireCSPViolationsAreSeen(t, b)
}

// signIn opens Gantry, follows the redirect to the provider's login page, signs in
// as the demo admin and waits for the dashboard.
func signIn(t *testing.T, b *browser, app *webtest.App) {
	t.Helper()
	b.do(t, "open Gantry", chromedp.Navigate(app.URL+"/"))
	b.do(t, "wait for the provider's login form", chromedp.WaitVisible(chromedp.ID("username")))
	require.True(t, strings.HasPrefix(location(t, b), app.Issuer+"/"),
		"an anonymous visitor should land on the provider's login page, not %s", location(t, b))
	b.do(t, "sign in at the provider",
		chromedp.SendKeys(chromedp.ID("username"), adminEmail),
		chromedp.SendKeys(chromedp.ID("password"), adminPassword),
		chromedp.Click(chromedp.ID("sign-in"), chromedp.NodeVisible),
	)
	user := chromedp.CSS(`[data-testid="current-user"]`)
	b.do(t, "wait for the dashboard's signed-in header", chromedp.WaitVisible(user))
	require.Contains(t, text(t, b, user), adminFirst)
	require.Equal(t, app.URL+"/", location(t, b), "after sign-in the browser should be back on the dashboard")
}

// submitNewEnvironment opens the "New environment" form from the list, fills it in
// and submits it.
func submitNewEnvironment(t *testing.T, b *browser, name, tier string) {
	t.Helper()
	b.do(t, "open the new environment form from the list",
		chromedp.Click(chromedp.ID("new-environment"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("save-environment")),
	)
	b.do(t, "fill in the environment form",
		chromedp.SendKeys(chromedp.ID("name"), name),
		chromedp.SetValue(chromedp.ID("tier"), tier),
	)
	require.Equal(t, tier, value(t, b, chromedp.ID("tier")), "tier select")
	b.do(t, "submit the environment form", chromedp.Click(chromedp.ID("save-environment"), chromedp.NodeVisible))
}

// requireHTMXLoaded checks that the vendored htmx ran on the current page.
func requireHTMXLoaded(t *testing.T, b *browser) {
	t.Helper()
	version := runWithin(t, b, "read htmx.version", 5*time.Second, chromedp.Poll[string](`typeof htmx === "object" && htmx.version`,
		untilCancelled))
	require.NotEmpty(t, version, "htmx did not load")
}

// requireNoCSPViolations fails when the browser blocked anything under the
// Content-Security-Policy, or a script threw.
func requireNoCSPViolations(t *testing.T, b *browser) {
	t.Helper()
	msgs := b.events.messages()
	for _, m := range msgs {
		t.Logf("browser console: %s", m)
	}
	for _, m := range msgs {
		require.False(t, m.isCSPViolation(), "the browser reported a Content-Security-Policy violation: %s", m)
		require.False(t, m.kind == "exception", "a script threw: %s", m)
	}
}

// requireCSPViolationsAreSeen is the control for requireNoCSPViolations: an inline
// script, which the policy forbids, must show up as a violation. Without it, a
// browser that words its reports differently would silently pass the check.
func requireCSPViolationsAreSeen(t *testing.T, b *browser) {
	t.Helper()
	before := len(b.events.messages())
	run(t, b, "inject an inline script", chromedp.Evaluate[chromedp.Void](`(() => {
		const s = document.createElement("script");
		s.textContent = "window.cspControl = true";
		document.body.appendChild(s);
	})()`))
	// Woken by the tab's listener at every console message and log entry it records.
	bench.Eventually(t, "an inline script reported as a CSP violation", 5*time.Second, func() (bool, any) {
		since := b.events.messages()[before:]
		return slices.ContainsFunc(since, consoleMessage.isCSPViolation), fmt.Sprintf("messages since: %v", since)
	}, bench.Wake(b.events.console))
}

// requireStaticAssetsOK checks that the page loaded htmx and the stylesheet from
// /static/ and that every /static/ response was 200.
func requireStaticAssetsOK(t *testing.T, b *browser, base string) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range b.events.responseList() {
		if !strings.HasPrefix(r.url, base+"/static/") {
			continue
		}
		require.Equal(t, http.StatusOK, int(r.status), "static asset %s", r.url)
		seen[r.kind] = true
		if strings.Contains(r.url, "/static/vendor/htmx-") {
			seen["htmx"] = true
		}
	}
	require.True(t, seen["htmx"], "htmx was never fetched from /static/vendor/")
	require.True(t, seen[string(network.ResourceTypeStylesheet)], "no stylesheet fetched from /static/")
}

// captureLayouts writes full-page screenshots of the current page at a desktop and
// a phone width, for a human to look at.
func captureLayouts(t *testing.T, b *browser) {
	t.Helper()
	for _, shot := range []struct {
		path   string
		width  int64
		height int64
		opts   []chromedp.EmulateViewportOption
	}{
		{wideScreenshot, 1280, 800, nil},
		{phoneScreenshot, 390, 844, []chromedp.EmulateViewportOption{chromedp.EmulateMobile, chromedp.EmulatePortrait}},
	} {
		b.do(t, fmt.Sprintf("emulate a %d px viewport", shot.width), chromedp.EmulateViewport(shot.width, shot.height, shot.opts...))
		overflow := run(t, b, "measure horizontal overflow", chromedp.Evaluate[[]int64](`(() => {
			const page = document.documentElement, table = document.querySelector(".table-wrap");
			return [page.scrollWidth - page.clientWidth, table ? table.scrollWidth - table.clientWidth : 0];
		})()`))
		png := run(t, b, "take a full-page screenshot", chromedp.FullScreenshot(100))
		require.NoError(t, os.WriteFile(shot.path, png, 0o644))
		t.Logf("screenshot at %d px: %s (horizontal overflow: page %d px, .table-wrap %d px)",
			shot.width, shot.path, overflow[0], overflow[1])
	}
	b.do(t, "reset the viewport", chromedp.ResetViewport())
}

// browser is one headless Chromium tab and what it reported.
type browser struct {
	ctx    context.Context // the tab, with the budget of all its steps together
	events *browserEvents
}

// do runs actions as one step, within stepBase of idle-machine time, and fails the test
// with what on error.
func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	runWithin(t, b, what, stepBase, chromedp.Steps(actions...))
}

// run runs one action that returns a value, as one step within stepBase.
func run[T any](t *testing.T, b *browser, what string, action chromedp.Action[T]) T {
	t.Helper()
	return runWithin(t, b, what, stepBase, action)
}

// runWithin runs one action as a step whose budget, base of idle-machine time, starts
// now; it fails the test naming the step and, when the step ran out of time, whose
// budget was spent (the step's or the tab's) with the pace allowed for.
func runWithin[T any](t *testing.T, b *browser, what string, base time.Duration, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := bench.Context(b.ctx, base)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("browser step failed: %s: %s", what, b.why(ctx, err))
	}
	return v
}

// why is a failed step's error, with the reason its context ended if it did.
func (b *browser) why(ctx context.Context, err error) string {
	switch {
	case b.ctx.Err() != nil:
		return fmt.Sprintf("%v (the tab's budget for all its steps: %v)", err, context.Cause(b.ctx))
	case ctx.Err() != nil:
		return fmt.Sprintf("%v (the step's budget: %v)", err, context.Cause(ctx))
	}
	return err.Error()
}

// peek evaluates expression for a failure message: its string value, or why there is none.
func peek(b *browser, expression string) string {
	ctx, cancel := bench.Context(b.ctx, stepBase)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expression))
	if err != nil {
		return "(unreadable: " + b.why(ctx, err) + ")"
	}
	return v
}

// waitForPage waits, within liveBase of idle-machine time, until the JavaScript
// expression holds on the page b shows, checked in the page at every animation frame;
// on failure it says what the element with data-testid shows then.
func waitForPage(t *testing.T, b *browser, what, expression, shows string) {
	t.Helper()
	ctx, cancel := bench.Context(b.ctx, liveBase)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expression, untilCancelled)); err != nil {
		t.Fatalf("waiting for %s: %s; %s shows %q", what, b.why(ctx, err), shows, peek(b, liveTextOf(shows)))
	}
}

func text[S chromedp.Selectable](t *testing.T, b *browser, sel S) string {
	t.Helper()
	// A document the browser replaced between finding a node and reading it (the page
	// was still settling after a redirect) answers "No node with given id found": the
	// selector is asked again, on the document that replaced it, until a read succeeds;
	// any other error fails at once.
	//
	// A CSS or id selector is found and read in one step inside the page: a node the live
	// stream swapped out between a lookup and a read (a run page's first run event
	// replaces #run-live right after load) would read as "" instead.
	var v string
	bench.Eventually(t, fmt.Sprintf("the text of %v", sel), stepBase, func() (bool, any) {
		ctx, cancel := bench.Context(b.ctx, stepBase)
		defer cancel()
		var err error
		if query, ok := querySelector(sel); ok {
			var got *string
			got, err = chromedp.Run(ctx, chromedp.Evaluate[*string](
				`(() => { const n = `+query+`; return n && n.checkVisibility() ? n.innerText : null })()`))
			if err == nil && got == nil {
				return false, "no visible node yet"
			}
			if got != nil {
				v = *got
			}
		} else {
			v, err = chromedp.Run(ctx, chromedp.Text(sel, chromedp.NodeVisible))
		}
		if err != nil && !strings.Contains(err.Error(), "No node with given id found") {
			t.Fatalf("browser step failed: read the text of %v: %s", sel, b.why(ctx, err))
		}
		return err == nil, err
	}, bench.Poll(100*time.Millisecond))
	return strings.TrimSpace(v)
}

// querySelector is the page's expression that finds sel, for a CSS or id selector.
func querySelector[S chromedp.Selectable](sel S) (string, bool) {
	switch s := any(sel).(type) {
	case chromedp.CSS:
		return fmt.Sprintf("document.querySelector(%q)", string(s)), true
	case chromedp.ID:
		return fmt.Sprintf("document.getElementById(%q)", strings.TrimPrefix(string(s), "#")), true
	}
	return "", false
}

func value[S chromedp.Selectable](t *testing.T, b *browser, sel S) string {
	t.Helper()
	return run(t, b, fmt.Sprintf("read the value of %v", sel), chromedp.Value(sel))
}

func attribute[S chromedp.Selectable](t *testing.T, b *browser, sel S, name string) string {
	t.Helper()
	return run(t, b, fmt.Sprintf("read %s of %v", name, sel), chromedp.AttributeValue(sel, name)).Value
}

func location(t *testing.T, b *browser) string {
	t.Helper()
	return run(t, b, "read the location", chromedp.Location())
}

// startBrowser starts headless Chromium with a fresh profile and opens one tab. On
// failure it saves a screenshot and logs the page's HTML and console.
func startBrowser(t *testing.T, path string) *browser {
	t.Helper()
	profile := t.TempDir()
	root, cancelRoot := bench.Context(context.Background(), browserBase)
	t.Cleanup(cancelRoot)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(root,
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // the test runs as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 800),
	)
	t.Cleanup(cancelAlloc) // waits for Chromium to exit, before the profile is removed

	events := &browserEvents{console: make(chan struct{}, 1), loaded: make(chan struct{}, 1)}
	tabCtx, cancelTab := chromedp.NewContext(allocCtx,
		chromedp.WithListener(events.record),
		chromedp.WithLogf(t.Logf),
	)
	t.Cleanup(cancelTab)
	// The first Do starts the browser and binds its life to tabCtx, which has no step
	// budget (only root's); later steps use children with budgets.
	if err := chromedp.Do(tabCtx); err != nil {
		if root.Err() != nil {
			err = fmt.Errorf("%w (%v)", err, context.Cause(root))
		}
		t.Fatalf("starting Chromium at %s: %v", path, err)
	}

	ctx, cancel := bench.Context(tabCtx, tabBase)
	t.Cleanup(cancel)
	t.Cleanup(func() {
		if t.Failed() {
			captureFailure(t, tabCtx, events)
		}
	})
	return &browser{ctx: ctx, events: events}
}

// captureFailure saves a screenshot of the tab and logs its URL, HTML and console.
func captureFailure(t *testing.T, tabCtx context.Context, events *browserEvents) {
	ctx, cancel := bench.Context(tabCtx, 10*time.Second)
	defer cancel()
	for _, m := range events.messages() {
		t.Logf("browser console: %s", m)
	}
	for _, r := range events.documentList() {
		t.Logf("document: %d %s", r.status, r.url)
	}
	if url, err := chromedp.Run(ctx, chromedp.Location()); err == nil {
		t.Logf("page URL at failure: %s", url)
	}
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err != nil {
		t.Logf("no failure screenshot: %v", err)
	} else if f, err := os.CreateTemp("", "gantry-e2e-failure-*.png"); err != nil {
		t.Logf("no failure screenshot: %v", err)
	} else {
		_, werr := f.Write(png)
		cerr := f.Close()
		if werr != nil || cerr != nil {
			t.Logf("no failure screenshot: %v %v", werr, cerr)
		} else {
			t.Logf("failure screenshot: %s", filepath.Clean(f.Name()))
		}
	}
	if html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html"))); err != nil {
		t.Logf("no page HTML: %v", err)
	} else {
		t.Logf("page HTML at failure:\n%s", html)
	}
}

// chromePath finds Chromium: $CHROME_PATH, then /usr/bin/chromium, then chromium on
// PATH. A missing browser fails the test; it is a dependency, not an option.
func chromePath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROME_PATH"); p != "" {
		found, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("CHROME_PATH=%q is not an executable browser (%v); unset it to use the Debian package `chromium` "+
				"(apt-get install chromium)", p, err)
		}
		return found
	}
	if found, err := exec.LookPath("/usr/bin/chromium"); err == nil {
		return found
	}
	if found, err := exec.LookPath("chromium"); err == nil {
		return found
	}
	t.Fatal("Chromium is required for the browser tests but was not found: install the Debian package `chromium` " +
		"(apt-get install chromium), or set CHROME_PATH to a Chrome/Chromium executable")
	return ""
}

// browserEvents collects, from the tab's event loop, console output, log entries,
// uncaught exceptions and HTTP responses, and signals the waits that watch them.
type browserEvents struct {
	mu         sync.Mutex
	messageLog []consoleMessage
	responses  []response

	// console receives a signal at every message recorded, loaded at every page load
	// (the load event: the document's readyState is "complete"). Signals coalesce: a
	// wait reads what was recorded anyway.
	console, loaded chan struct{}
}

// consoleMessage is one console API call ("console.error"), uncaught exception
// ("exception") or browser log entry ("log.error", with its source).
type consoleMessage struct {
	kind, source, text, url string
}

func (m consoleMessage) String() string {
	s := m.kind
	if m.source != "" {
		s += " [" + m.source + "]"
	}
	s += ": " + m.text
	if m.url != "" {
		s += " (" + m.url + ")"
	}
	return s
}

// isCSPViolation recognizes the browser's Content-Security-Policy reports. Chromium
// 156 writes "Executing inline script violates the following Content Security
// Policy directive ..." to the log with source "security"; older versions began
// with "Refused to ...".
func (m consoleMessage) isCSPViolation() bool {
	text := strings.ToLower(m.text)
	return m.source == string(log.EntrySourceSecurity) ||
		strings.Contains(text, "content security policy") ||
		strings.Contains(text, "content-security-policy") ||
		strings.Contains(text, "refused to")
}

type response struct {
	url, kind string
	status    int64
}

// record is a chromedp listener: it runs on the tab's read loop, so it only copies,
// and signals without blocking.
func (e *browserEvents) record(ev any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		e.message(consoleMessage{kind: "console." + string(ev.Type), text: argsText(ev.Args)})
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		e.message(consoleMessage{kind: "exception", text: msg, url: fmt.Sprintf("%s:%d", d.URL, d.LineNumber)})
	case *log.EventEntryAdded:
		en := ev.Entry
		e.message(consoleMessage{kind: "log." + string(en.Level), source: string(en.Source), text: en.Text, url: en.URL})
	case *network.EventResponseReceived:
		e.responses = append(e.responses, response{url: ev.Response.URL, kind: string(ev.Type), status: ev.Response.Status})
	case *page.EventLoadEventFired:
		signal(e.loaded)
	}
}

// message records m (e.mu held) and signals the console's waits.
func (e *browserEvents) message(m consoleMessage) {
	e.messageLog = append(e.messageLog, m)
	signal(e.console)
}

// signal wakes the wait on ch, if any, without blocking the tab's read loop.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // a signal is already pending
	}
}

func (e *browserEvents) messages() []consoleMessage {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]consoleMessage(nil), e.messageLog...)
}

func (e *browserEvents) responseList() []response {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]response(nil), e.responses...)
}

func (e *browserEvents) documentList() []response {
	var docs []response
	for _, r := range e.responseList() {
		if r.kind == string(network.ResourceTypeDocument) {
			docs = append(docs, r)
		}
	}
	return docs
}

// lastDocumentStatus is the status of the latest page load of url, or 0.
func (e *browserEvents) lastDocumentStatus(url string) int {
	status := 0
	for _, r := range e.documentList() {
		if r.url == url {
			status = int(r.status)
		}
	}
	return status
}

// argsText renders console API arguments: strings as they are, other values by
// their description.
func argsText(args []*runtime.RemoteObject) string {
	parts := make([]string, 0, len(args))
	for _, a := range args {
		var s string
		switch {
		case a.Type == runtime.RemoteObjectTypeString && json.Unmarshal(a.Value, &s) == nil:
			parts = append(parts, s)
		case a.Description != "":
			parts = append(parts, a.Description)
		default:
			parts = append(parts, string(a.Value))
		}
	}
	return strings.Join(parts, " ")
}
