package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/db/dbtest"
	"gantry/models/run"
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

var postForm = regexp.MustCompile(`(?s)<form[^>]*method="post"[^>]*>(.*?)</form>`)

// TestEveryFormCarriesAFreshKey: every form that posts carries exactly one idempotency
// key, fresh per rendered form: decisions, requests and settings alike.
func TestEveryFormCarriesAFreshKey(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	admin := app.LoggedIn(t, "admin@acme.test")

	seen := map[string]bool{}
	for _, path := range []string{"/runs/" + r.ID, "/runs/" + r.ID + "/review", "/runs/" + r.ID + "/cancel", "/requests/new?template=bucket",
		"/environments/new", "/members", "/settings/tokens", "/settings/webhooks", "/policies"} {
		for range 2 {
			page := webtest.ReadBody(t, app.Get(t, admin, path))
			forms := postForm.FindAllStringSubmatch(page, -1)
			require.Greater(t, len(forms), 1, "%s has forms besides signing out", path)
			for _, f := range forms {
				keys := idempotencyField.FindAllStringSubmatch(f[1], -1)
				require.Len(t, keys, 1, "%s: a form with one key: %s", path, f[0])
				k := keys[0][1]
				require.Len(t, k, 22, "128 random bits, base64url")
				require.False(t, seen[k], "%s: every rendered form has its own key", path)
				seen[k] = true
			}
		}
	}
}

func TestDoubleApproveDecidesOnce(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	admin := app.LoggedIn(t, "admin@acme.test")
	owner := app.LoggedIn(t, "owner@acme.test")
	form := decisionForm(t, app, admin, r)
	ownerForm := decisionForm(t, app, owner, r)
	ownerForm.Set("idempotency_key", form.Get("idempotency_key"))

	// A form without a key is refused before anything is decided.
	keyless := decisionForm(t, app, admin, r)
	keyless.Set("idempotency_key", "")
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
	// In flight at once, whatever the machine's pace: the test holds the run's row, so the
	// request that reserved the key waits for it inside its transaction, and the other
	// waits for that request's key; only once both wait is the run let go.
	holder := app.DB.Begin()
	t.Cleanup(func() { holder.Rollback() }) // a failing test lets the contenders go too
	require.NoError(t, holder.Exec("SELECT id FROM runs WHERE id = ? FOR UPDATE", r.ID).Error)
	var wg sync.WaitGroup
	answers := make([]*http.Response, 3)
	postErrs := make([]error, 2)
	var finished atomic.Int32
	for i := range 2 {
		wg.Go(func() {
			defer finished.Add(1)
			answers[i], postErrs[i] = app.TryPostForm(admin, "/runs/"+r.ID+"/approve", form)
		})
	}
	dbtest.WaitBlockedBy(t, app.DB, dbtest.BackendPID(t, holder), 2, func() (bool, any) {
		return finished.Load() > 0, "an answer before the run was let go"
	})
	require.NoError(t, holder.Rollback().Error)
	wg.Wait()
	for i, err := range postErrs {
		require.NoError(t, err, "request %d", i)
	}
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
	first := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	second := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-central")), run.PendingApproval)
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

// TestEveryMutatingRequestTakesEffectOnce (DESIGN §10): a request form submitted twice
// with its one key makes one run and answers both times with the same redirect; the same
// key with another request is refused; a form answered with a secret (an API token) is
// replayed as a redirect, never with the secret; on the API a call without a key is 400
// INVALID_INPUT, a retry with the key gets the same answer (marked replayed) and the same
// key with another body is refused.
func TestEveryMutatingRequestTakesEffectOnce(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")

	form := bucketRequest(staging, "eu-west")
	form.Set("_csrf", app.CSRF(t, operator))
	form.Set("idempotency_key", "request-twice-1")
	var locations []string
	for range 2 {
		resp := app.PostForm(t, operator, "/requests", form)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
		locations = append(locations, resp.Header.Get("Location"))
	}
	require.Equal(t, locations[0], locations[1], "the repeat is sent where the first went")
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM runs WHERE workspace_id IN (SELECT id FROM workspaces WHERE name = ?)", form.Get("workspace")))
	other := bucketRequest(staging, "eu-west")
	other.Set("_csrf", app.CSRF(t, operator))
	other.Set("idempotency_key", "request-twice-1")
	other.Set("workspace", "another-bucket")
	resp := app.PostForm(t, operator, "/requests", other)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "already submitted with other values")
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM workspaces WHERE name = 'another-bucket'"))

	// A secret shown once is not replayed.
	admin := app.LoggedIn(t, "admin@acme.test")
	issue := url.Values{"_csrf": {app.CSRF(t, admin)}, "idempotency_key": {"token-twice-1"}, "name": {"twice"}, "scopes": {"admin"}, "days": {"1"}}
	resp = app.PostForm(t, admin, "/settings/tokens", issue)
	first := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode, first)
	secret := tokenSecret.FindStringSubmatch(first)[1]
	resp = app.PostForm(t, admin, "/settings/tokens", issue)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/settings/tokens", resp.Header.Get("Location"))
	page := webtest.ReadBody(t, app.Get(t, admin, "/settings/tokens"))
	require.Contains(t, page, "it was not done again")
	require.NotContains(t, page, secret)
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM api_tokens WHERE name = 'twice'"))
	var stored string
	require.NoError(t, app.DB.Raw("SELECT coalesce(string_agg(k::text, '|'), '') FROM idempotency_keys k").Scan(&stored).Error)
	_, random, _ := strings.Cut(secret, ".")
	require.NotContains(t, stored, random, "no kept answer holds the secret")

	// The API.
	envBody := `{"name":"api-once","tier":"development"}`
	resp = app.APIKeyed(t, secret, "", http.MethodPost, "/api/v1/environments", envBody)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Contains(t, body, `"code":"INVALID_INPUT"`)
	require.Contains(t, body, `"Idempotency-Key"`)
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM environments WHERE name = 'api-once'"))
	var answers []string
	for i := range 2 {
		resp = app.APIKeyed(t, secret, "api-once-1", http.MethodPost, "/api/v1/environments", envBody)
		body = webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusCreated, resp.StatusCode, body)
		require.Equal(t, i == 1, resp.Header.Get("Idempotent-Replayed") == "true", "attempt %d", i)
		answers = append(answers, body)
	}
	require.Equal(t, answers[0], answers[1], "the same answer, byte for byte")
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM environments WHERE name = 'api-once'"))
	resp = app.APIKeyed(t, secret, "api-once-1", http.MethodPost, "/api/v1/environments", `{"name":"api-twice","tier":"development"}`)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, "already used for another request")
	// A refused call keeps no key: corrected, the same key goes through.
	resp = app.APIKeyed(t, secret, "api-fix-1", http.MethodPost, "/api/v1/environments", `{"name":"api-fix","tier":"moon"}`)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	resp = app.APIKeyed(t, secret, "api-fix-1", http.MethodPost, "/api/v1/environments", `{"name":"api-fix","tier":"development"}`)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	// Keys are forgotten after a day: the same call then runs again (and is refused as a
	// duplicate name by the service, not replayed).
	require.NoError(t, app.DB.Exec("UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = 'api-once-1'").Error)
	resp = app.APIKeyed(t, secret, "api-once-1", http.MethodPost, "/api/v1/environments", envBody)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
}
