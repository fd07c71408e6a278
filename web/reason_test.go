package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/idempotency"
	"gantry/models/run"
)

// TestElevatedReasonLength: an elevated (risk-3) approval needs a reason of at least
// run.MinReasonLength (10) characters, counted as characters, not bytes, after trimming.
// A 9-character reason is refused at its field (the review page again, 422, the message
// at the reason; on the JSON API a problem document naming the field) and nothing is
// decided; 10 characters approve.
func TestElevatedReasonLength(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	r := elevatedRun(t, app)
	owner := app.LoggedIn(t, "owner@acme.test") // a fresh sign-in
	msg := "Say why, in at least 10 characters."
	require.Equal(t, 10, run.MinReasonLength)

	nothingDecided := func(why string) {
		t.Helper()
		require.Zero(t, auditCount(t, app, r.ID, "run.approved"), why)
		require.Equal(t, run.PendingApproval, waitForState(t, app, r.ID, run.PendingApproval).State, why)
	}
	for _, short := range []string{
		"too short",         // 9
		"  too short  \n",   // 9 once trimmed
		"überprüft",         // 9 characters in 11 bytes
		"\u00a0too short\t", // 9 once trimmed (a no-break space is space too)
	} {
		form := decisionForm(t, app, owner, r)
		form.Set("reason", short)
		resp := app.PostForm(t, owner, "/runs/"+r.ID+"/approve", form)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%q: %s", short, body)
		require.Contains(t, body, `data-testid="error-reason"`, "%q: the error is at the reason", short)
		require.Contains(t, body, msg)
		require.NotContains(t, body, `data-testid="error-confirm"`, "the confirmation was right")
		nothingDecided(short)
	}

	// The JSON API (the browser's session, its CSRF token): a problem document naming the
	// field.
	status, text := sessionJSON(t, app, owner, http.MethodGet, "/api/v1/runs/"+r.ID+"/review", "")
	require.Equal(t, http.StatusOK, status, text)
	review := decodeJSON[struct{ Evidence map[string]any }](t, text)
	approval := func(reason string) string {
		b, err := json.Marshal(map[string]any{"evidence": review.Evidence, "confirm": run.ConfirmWord, "reason": reason})
		require.NoError(t, err)
		return string(b)
	}
	status, text = sessionJSON(t, app, owner, http.MethodPost, "/api/v1/runs/"+r.ID+"/approve", approval("too short"))
	require.Equal(t, http.StatusUnprocessableEntity, status, text)
	p := decodeJSON[struct {
		Code   string
		Fields map[string]string
	}](t, text)
	require.Equal(t, map[string]string{"reason": msg}, p.Fields)
	nothingDecided("a short reason on the API")

	// 10 characters (in 12 bytes) approve.
	form := decisionForm(t, app, owner, r)
	form.Set("reason", "überprüft.")
	resp := app.PostForm(t, owner, "/runs/"+r.ID+"/approve", form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.EqualValues(t, 1, auditCount(t, app, r.ID, "run.approved"))
	require.EqualValues(t, 1, countRows(t, app, `SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.approved'
		AND data::text LIKE '%überprüft.%'`, r.ID), "the reason is kept with the decision")
}

// sessionJSON calls the JSON API as browser c (its cookie and CSRF token) and returns
// the status and body.
func sessionJSON(t *testing.T, app *webtest.App, c *http.Client, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, app.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json")
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", app.CSRF(t, c))
		req.Header.Set(idempotency.Header, idempotency.NewKey())
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	return resp.StatusCode, webtest.ReadBody(t, resp)
}
