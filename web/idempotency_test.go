package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/run"
	"gantry/web/webtest"
)

// Decisions carry idempotency keys (DESIGN §3): a double submit decides once and
// answers twice the same way; the same key with other values is refused; a failed
// decision does not use its key up; keys are per person.

var idempotencyField = regexp.MustCompile(`name="idempotency_key" value="([^"]+)"`)

func keysOn(t *testing.T, app *webtest.App, c *http.Client, path string) []string {
	t.Helper()
	var keys []string
	for _, m := range idempotencyField.FindAllStringSubmatch(webtest.ReadBody(t, app.Get(t, c, path)), -1) {
		keys = append(keys, m[1])
	}
	return keys
}

func auditCount(t *testing.T, app *webtest.App, runID, action string) int64 {
	t.Helper()
	return countRows(t, app, "SELECT count(*) FROM audit_events WHERE target_id = ? AND action = ?", runID, action)
}

func TestDecisionFormsCarryFreshKeys(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, requestRun(t, app, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	admin := app.LoggedIn(t, "admin@acme.test")

	// The run and review pages have approve and reject; cancelling asks first, on a page
	// of its own with its own form.
	for path, forms := range map[string]int{"/runs/" + r.ID: 2, "/runs/" + r.ID + "/review": 2, "/runs/" + r.ID + "/cancel": 1} {
		first := keysOn(t, app, admin, path)
		require.Len(t, first, forms, path)
		second := keysOn(t, app, admin, path)
		require.Len(t, second, forms, path)
		seen := map[string]bool{}
		for _, k := range append(first, second...) {
			require.Len(t, k, 22, "128 random bits, base64url")
			require.False(t, seen[k], "%s: every rendered form has its own key", path)
			seen[k] = true
		}
	}
}

func TestDoubleApproveDecidesOnce(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, requestRun(t, app, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	admin := app.LoggedIn(t, "admin@acme.test")
	owner := app.LoggedIn(t, "owner@acme.test")
	form := decisionForm(t, app, admin, r)
	ownerForm := decisionForm(t, app, owner, r)
	ownerForm.Set("idempotency_key", form.Get("idempotency_key"))

	// A form without a key is refused before anything is decided.
	keyless := decisionForm(t, app, admin, r)
	keyless.Del("idempotency_key")
	resp := app.PostForm(t, admin, "/runs/"+r.ID+"/approve", keyless)
	require.Contains(t, webtest.ReadBody(t, resp), "Every Gantry form sends one")
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)

	// A stale decision is a 409 and does not use the key up: the corrected form, with
	// the same key, goes through.
	stale := url.Values{}
	for k, v := range form {
		stale[k] = v
	}
	stale.Set("plan_digest", "sha256:0000")
	resp = app.PostForm(t, admin, "/runs/"+r.ID+"/approve", stale)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Equal(t, run.PendingApproval, waitForState(t, app, r.ID, run.PendingApproval).State)

	// A double click: two requests with one key in flight at once, then a third later.
	var wg sync.WaitGroup
	answers := make([]*http.Response, 3)
	for i := range 2 {
		wg.Go(func() { answers[i] = app.PostForm(t, admin, "/runs/"+r.ID+"/approve", form) })
	}
	wg.Wait()
	answers[2] = app.PostForm(t, admin, "/runs/"+r.ID+"/approve", form)
	for i, resp := range answers {
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "answer %d: %s", i, body)
		require.Equal(t, "/runs/"+r.ID, resp.Header.Get("Location"), "answer %d", i)
	}
	require.EqualValues(t, 1, auditCount(t, app, r.ID, "run.approved"), "approved once")
	page := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+r.ID))
	require.Equal(t, 1, strings.Count(page, "You approved "), "the replayed flash is shown once")

	// Another person's same key is another key: the owner's approval runs (and finds
	// the run already approved) instead of replaying the admin's answer.
	resp = app.PostForm(t, owner, "/runs/"+r.ID+"/approve", ownerForm)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	waitForState(t, app, r.ID, run.Succeeded)
	require.EqualValues(t, 1, auditCount(t, app, r.ID, "run.approved"))
}

func TestKeyReusedWithOtherValuesIsRefused(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	first := waitForState(t, app, requestRun(t, app, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	second := waitForState(t, app, requestRun(t, app, operator, bucketRequest(staging, "eu-central")), run.PendingApproval)
	admin := app.LoggedIn(t, "admin@acme.test")

	reject := decisionForm(t, app, admin, first)
	reject.Set("reason", "too expensive for staging")
	resp := app.PostForm(t, admin, "/runs/"+first.ID+"/reject", reject)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	// The same key with another reason: refused, and the rejection stays as it was.
	reject.Set("reason", "wrong region")
	resp = app.PostForm(t, admin, "/runs/"+first.ID+"/reject", reject)
	require.Contains(t, webtest.ReadBody(t, resp), "This form was already submitted with other values; reload the page.")
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	rejected := waitForState(t, app, first.ID, run.Rejected)
	require.Contains(t, rejected.StateReason, "too expensive for staging")
	require.EqualValues(t, 1, auditCount(t, app, first.ID, "run.rejected"))

	// The same key on another run: refused too, and that run is untouched.
	other := decisionForm(t, app, admin, second)
	other.Set("idempotency_key", reject.Get("idempotency_key"))
	other.Set("reason", "too expensive for staging")
	resp = app.PostForm(t, admin, "/runs/"+second.ID+"/reject", other)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Equal(t, run.PendingApproval, waitForState(t, app, second.ID, run.PendingApproval).State)
	require.Zero(t, auditCount(t, app, second.ID, "run.rejected"))
}
