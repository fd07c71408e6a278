package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/audit"
	"gantry/models/idempotency"
	"gantry/models/run"
)

// The decision window is set per environment (DESIGN §3 "Clocks"): how long a run may
// wait in PENDING_APPROVAL before it expires, 1 to 720 hours, 168 by default.

// environmentJSON calls the environment API with c and decodes the answer into out.
func environmentJSON(t *testing.T, app *webtest.App, c *http.Client, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, app.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", app.CSRF(t, c))
	req.Header.Set(idempotency.Header, idempotency.NewKey())
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	return resp.StatusCode
}

func decisionWindowOf(t *testing.T, app *webtest.App, envID string) int {
	t.Helper()
	var hours int
	require.NoError(t, app.DB.Raw("SELECT decision_window_hours FROM environments WHERE id = ?", envID).Scan(&hours).Error)
	return hours
}

// TestDecisionWindowForm: the form offers the window with its default, saves it,
// shows it again on edit and in the list, and refuses a bad value with a field message,
// showing what was typed and saving nothing.
func TestDecisionWindowForm(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.LoggedIn(t, "admin@acme.test")
	token := app.CSRF(t, admin)

	page := webtest.ReadBody(t, app.Get(t, admin, "/environments/new"))
	require.Contains(t, page, `<label for="decision_window_hours">Decision window (hours)</label>`)
	require.Contains(t, page, `name="decision_window_hours" value="168"`)
	require.Contains(t, page, "How long a run may wait for a decision before it expires; 168 hours = 7 days.")

	before := counts(t, app)
	for _, typed := range []string{"721", "0", "-3", "a week"} {
		resp := app.PostForm(t, admin, "/environments", url.Values{"_csrf": {token}, "name": {"qa"}, "tier": {"staging"}, "decision_window_hours": {typed}})
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, typed)
		require.Contains(t, body, `data-testid="error-decision_window_hours"`, typed)
		require.Contains(t, body, "Between 1 and 720 hours.", typed)
		require.Contains(t, body, `name="decision_window_hours" value="`+typed+`"`, typed)
	}
	require.Equal(t, before, counts(t, app), "a refused form saves nothing")

	resp := app.PostForm(t, admin, "/environments", url.Values{"_csrf": {token}, "name": {"qa"}, "tier": {"staging"}, "decision_window_hours": {"36"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	qa := app.OrgEnvironmentID(t, "acme", "qa")
	require.Equal(t, 36, decisionWindowOf(t, app, qa))
	require.Contains(t, webtest.ReadBody(t, app.Get(t, admin, "/environments/"+qa+"/edit")), `name="decision_window_hours" value="36"`)
	require.Contains(t, webtest.ReadBody(t, app.Get(t, admin, "/environments")), `data-testid="decision-window">36 hours<`)

	// An edit with a bad value saves nothing, not even the other fields.
	resp = app.PostForm(t, admin, "/environments/"+qa, url.Values{"_csrf": {token}, "name": {"qa-eu"}, "tier": {"staging"},
		"requires_approval": {"off"}, "decision_window_hours": {"721"}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "Between 1 and 720 hours.")
	require.Contains(t, body, `name="decision_window_hours" value="721"`)
	require.Equal(t, 36, decisionWindowOf(t, app, qa))
	require.Equal(t, qa, app.OrgEnvironmentID(t, "acme", "qa"))

	resp = app.PostForm(t, admin, "/environments/"+qa, url.Values{"_csrf": {token}, "name": {"qa"}, "tier": {"staging"},
		"requires_approval": {"off"}, "decision_window_hours": {"48"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, 48, decisionWindowOf(t, app, qa))
	require.Contains(t, webtest.ReadBody(t, app.Get(t, admin, "/environments")), `data-testid="decision-window">2 days<`)

	var ev audit.Event
	require.NoError(t, app.DB.Where("target_id = ? AND action = 'environment.updated'", qa).Take(&ev).Error)
	var data struct{ Before, After map[string]any }
	require.NoError(t, json.Unmarshal(ev.Data, &data))
	require.EqualValues(t, 36, data.Before["decision_window_hours"])
	require.EqualValues(t, 48, data.After["decision_window_hours"])
}

// TestDecisionWindowAPI: the JSON API reads and writes decision_window_hours; absent
// is the default on create and unchanged on edit; out of range is a 422 field message.
func TestDecisionWindowAPI(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.LoggedIn(t, "admin@acme.test")
	type envJSON struct {
		ID                  string `json:"id"`
		DecisionWindowHours int    `json:"decision_window_hours"`
	}

	var created envJSON
	require.Equal(t, http.StatusCreated, environmentJSON(t, app, admin, http.MethodPost, "/api/v1/environments",
		`{"name":"api-env","tier":"staging","decision_window_hours":12}`, &created))
	require.Equal(t, 12, created.DecisionWindowHours)
	require.Equal(t, 12, decisionWindowOf(t, app, created.ID))

	var got envJSON
	resp := app.Get(t, admin, "/api/v1/environments/"+created.ID)
	require.NoError(t, json.Unmarshal([]byte(webtest.ReadBody(t, resp)), &got))
	require.Equal(t, created, got)

	var updated envJSON
	require.Equal(t, http.StatusOK, environmentJSON(t, app, admin, http.MethodPut, "/api/v1/environments/"+created.ID,
		`{"name":"api-env","tier":"staging"}`, &updated))
	require.Equal(t, 12, updated.DecisionWindowHours, "an edit without the field keeps the window")
	require.Equal(t, http.StatusOK, environmentJSON(t, app, admin, http.MethodPut, "/api/v1/environments/"+created.ID,
		`{"name":"api-env","tier":"staging","decision_window_hours":720}`, &updated))
	require.Equal(t, 720, updated.DecisionWindowHours)
	require.Equal(t, 720, decisionWindowOf(t, app, created.ID))

	var plain envJSON
	require.Equal(t, http.StatusCreated, environmentJSON(t, app, admin, http.MethodPost, "/api/v1/environments",
		`{"name":"api-default","tier":"development"}`, &plain))
	require.Equal(t, 168, plain.DecisionWindowHours)

	var list struct {
		Environments []envJSON `json:"environments"`
	}
	require.NoError(t, json.Unmarshal([]byte(webtest.ReadBody(t, app.Get(t, admin, "/api/v1/environments"))), &list))
	require.Contains(t, list.Environments, envJSON{ID: created.ID, DecisionWindowHours: 720})

	before := counts(t, app)
	var problem struct {
		Fields map[string]string `json:"fields"`
	}
	require.Equal(t, http.StatusUnprocessableEntity, environmentJSON(t, app, admin, http.MethodPost, "/api/v1/environments",
		`{"name":"api-long","tier":"staging","decision_window_hours":721}`, &problem))
	require.Equal(t, map[string]string{"decision_window_hours": "Between 1 and 720 hours."}, problem.Fields)
	require.Equal(t, http.StatusUnprocessableEntity, environmentJSON(t, app, admin, http.MethodPut, "/api/v1/environments/"+created.ID,
		`{"name":"api-env","tier":"staging","decision_window_hours":-1}`, &problem))
	require.Equal(t, "Between 1 and 720 hours.", problem.Fields["decision_window_hours"])
	require.Equal(t, before, counts(t, app))
	require.Equal(t, 720, decisionWindowOf(t, app, created.ID))
}

// TestDecisionDeadlineFromEnvironmentWindow: an admin gives staging a 1-hour decision
// window; a run that waits for a decision there must be decided within the hour, both
// when its plan sends it to PENDING_APPROVAL and when an admin's override releases it
// there, and its expiry job is scheduled at that deadline.
func TestDecisionDeadlineFromEnvironmentWindow(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	resp := app.PostForm(t, admin, "/environments/"+staging, url.Values{"_csrf": {app.CSRF(t, admin)}, "name": {"staging"}, "tier": {"staging"},
		"requires_approval": {"off", "on"}, "decision_window_hours": {"1"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	requireDeadlineInAnHour := func(r run.Run) {
		t.Helper()
		entry := "run." + strings.ToLower(string(r.State))
		require.NotNil(t, r.DecisionDeadline)
		// The run entered PENDING_APPROVAL at updated_at (nothing has touched it since),
		// and the transition's audit event carries the same database clock.
		require.WithinDuration(t, r.UpdatedAt.Add(time.Hour), *r.DecisionDeadline, 5*time.Second)
		var entered time.Time
		require.NoError(t, app.DB.Raw("SELECT occurred_at FROM audit_events WHERE target_id = ? AND action = ? ORDER BY seq DESC LIMIT 1",
			r.ID, entry).Scan(&entered).Error)
		require.WithinDuration(t, entered.Add(time.Hour), *r.DecisionDeadline, 5*time.Second)
		var scheduled time.Time
		require.NoError(t, app.DB.Raw("SELECT scheduled_at FROM river_job WHERE kind = 'run.expire' AND args->>'run_id' = ? AND args->>'state' = ?",
			r.ID, string(r.State)).Scan(&scheduled).Error)
		require.WithinDuration(t, *r.DecisionDeadline, scheduled, time.Second, "the expiry job runs at the deadline")
	}

	operator := app.LoggedIn(t, "operator@acme.test")
	pending := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "orders", "small", "7")), run.PendingApproval)
	requireDeadlineInAnHour(pending)
	page := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+pending.ID))
	require.Contains(t, page, pending.DecisionDeadline.UTC().Format("2006-01-02 15:04 UTC"))

	// Too few backups: blocked by a soft-mandatory policy until an admin overrides it.
	// The override and the approval after it share one decision window, which starts
	// when the run is blocked.
	blocked := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "billing", "small", "3")), run.PolicyBlocked)
	requireDeadlineInAnHour(blocked)
	ev := evaluationOf(t, app, blocked)
	resp = app.PostForm(t, admin, "/runs/"+blocked.ID+"/override",
		overrideForm(t, app, admin, blocked, "database_protection", ruleVersion(t, ev, "database_protection"), "backups are kept by the nightly export"))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	released := waitForState(t, app, blocked.ID, run.PendingApproval)
	require.Equal(t, *blocked.DecisionDeadline, *released.DecisionDeadline, "the release keeps the window's deadline")
}
