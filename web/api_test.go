package web_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/idempotency"
	"gantry/models/run"
)

// apiRunDoc is the part of the API's run the tests read.
type apiRunDoc struct {
	ID          string `json:"id"`
	State       string `json:"state"`
	Finished    bool   `json:"finished"`
	PlanDigest  string `json:"plan_digest"`
	WorkspaceID string `json:"workspace_id"`
	RiskClass   *int   `json:"risk_class"`
	Links       struct {
		Self, Events, Review, Evidence string
	} `json:"links"`
}

type apiProblemDoc struct {
	Status int               `json:"status"`
	Code   string            `json:"code"`
	Fields map[string]string `json:"fields"`
}

func decodeJSON[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(body), &v), body)
	return v
}

// pollRun reads the run through the API until it is in want or finished elsewhere,
// reading again at each of the run's change notifications.
func (c *apiChecker) pollRun(token, id string, want run.State) apiRunDoc {
	c.t.Helper()
	var org string
	require.NoError(c.t, c.app.DB.Raw("SELECT organization_id FROM runs WHERE id = ?", id).Scan(&org).Error)
	require.NotEmpty(c.t, org, "no run %s", id)
	changed, stop := c.app.Server.Changes.Subscribe(org, id)
	defer stop()
	var r apiRunDoc
	bench.Eventually(c.t, fmt.Sprintf("run %s to be %s through the API", id, want), 20*time.Second, func() (bool, any) {
		status, body := c.call(token, http.MethodGet, "/api/v1/runs/"+id, nil)
		require.Equal(c.t, http.StatusOK, status, body)
		r = decodeJSON[apiRunDoc](c.t, body)
		return r.State == string(want) || r.Finished, r.State
	}, bench.Wake(changed))
	require.Equal(c.t, string(want), r.State)
	return r
}

// refused makes a call that must be refused with status and code. A request refused
// as unreadable or invalid (400, 422) may break the description on purpose: only its
// answer is checked against it.
func (c *apiChecker) refused(token, method, path string, body any, status int, code, why string) apiProblemDoc {
	c.t.Helper()
	send := c.call
	if status == http.StatusBadRequest || status == http.StatusUnprocessableEntity {
		send = c.callBadly
	}
	got, text := send(token, method, path, body)
	require.Equal(c.t, status, got, "%s: %s", why, text)
	p := decodeJSON[apiProblemDoc](c.t, text)
	require.Equal(c.t, code, p.Code, "%s: %s", why, text)
	return p
}

// TestWholeRunThroughTheAPI drives a run from request to evidence report with API
// tokens only, every request and answer checked against the OpenAPI description: a
// requester's token asks for it, a second holder's decide token approves the plan the
// review named, the run applies, and its timeline, logs, plan, state and evidence are
// read back. On the way, the refusals a person gets in the browser: four eyes, role,
// scope, a restricted environment, another organization, stale evidence, a decision
// after the deadline, and a token on a risk-3 run, each with its problem code.
func TestWholeRunThroughTheAPI(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	api := newAPIChecker(t, app)
	requester := app.NewMember(t, "acme", "Rae Requester", authz.RoleOperator, false)
	approver := app.NewMember(t, "acme", "Abe Approver", authz.RoleAdmin, false)
	owner := app.NewMember(t, "acme", "Oona Owner", authz.RoleOwner, false)
	viewer := app.NewMember(t, "acme", "Vic Viewer", authz.RoleViewer, false)
	outsider := app.NewMember(t, "globex", "Gil Globex", authz.RoleOwner, false)
	reqTok := app.Token(t, requester, "read", "plan", "apply", "decide")
	decideTok, adminReadTok := app.Token(t, approver, "read", "decide"), app.Token(t, approver, "read")
	ownerTok, viewerTok, outsiderTok := app.Token(t, owner, "read", "decide", "apply", "admin"), app.Token(t, viewer, "read"), app.Token(t, outsider, "read", "decide")
	staging := app.OrgEnvironmentID(t, "acme", "staging")

	// The catalog says what the request needs.
	status, body := api.call(reqTok, http.MethodGet, "/api/v1/templates", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"name":"bucket"`)
	status, body = api.call(reqTok, http.MethodGet, "/api/v1/templates/bucket", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"name":"retention_days"`)

	request := map[string]any{"template": "bucket", "environment_id": staging, "workspace": "api-assets",
		"inputs": map[string]string{"name": "api-assets", "retention_days": "30", "region": "eu-west"}}
	// Field-level refusals, nothing created.
	p := api.refused(reqTok, http.MethodPost, "/api/v1/requests", map[string]any{"template": "bucket", "environment_id": staging,
		"workspace": "Not A Name", "inputs": map[string]string{"retention_days": "-3"}}, http.StatusUnprocessableEntity, "INVALID_INPUT", "bad inputs")
	require.NotEmpty(t, p.Fields["workspace"], "the workspace field says what is wrong")
	api.refused(reqTok, http.MethodPost, "/api/v1/requests", map[string]any{"template": "bucket", "surprise": true},
		http.StatusBadRequest, "BAD_REQUEST", "an unknown field")
	api.refused(viewerTok, http.MethodPost, "/api/v1/requests", request, http.StatusForbidden, "FORBIDDEN", "a viewer requests nothing")
	api.refused(adminReadTok, http.MethodPost, "/api/v1/requests", request, http.StatusForbidden, "FORBIDDEN", "a read token requests nothing")
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM workspaces WHERE name = 'api-assets'"))

	// The request, with a key: a retry with the same key replays the answer, another
	// payload with it is refused, and no key at all is a 400.
	raw, err := json.Marshal(request)
	require.NoError(t, err)
	key := idempotency.NewKey()
	resp := app.APIKeyed(t, reqTok, key, http.MethodPost, "/api/v1/requests", string(raw))
	first := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode, first)
	api.check(reqTok, http.MethodPost, "/api/v1/requests", string(raw), resp, first)
	created := decodeJSON[apiRunDoc](t, first)
	require.Equal(t, "/api/v1/runs/"+created.ID, resp.Header.Get("Location"))
	require.Equal(t, "/api/v1/runs/"+created.ID+"/events", created.Links.Events, "a URL to stream")
	resp = app.APIKeyed(t, reqTok, key, http.MethodPost, "/api/v1/requests", string(raw))
	require.Equal(t, first, webtest.ReadBody(t, resp))
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	resp = app.APIKeyed(t, reqTok, key, http.MethodPost, "/api/v1/requests", strings.Replace(string(raw), "eu-west", "us-east", 1))
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, webtest.ReadBody(t, resp))
	resp = app.APIKeyed(t, reqTok, "", http.MethodPost, "/api/v1/requests", string(raw))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, webtest.ReadBody(t, resp), `"code":"INVALID_INPUT"`)
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM runs WHERE workspace_id = ?", created.WorkspaceID), "one run")

	waiting := api.pollRun(reqTok, created.ID, run.PendingApproval)
	status, body = api.call(reqTok, http.MethodGet, waiting.Links.Review, nil)
	require.Equal(t, http.StatusOK, status, body)
	review := decodeJSON[struct {
		Evidence map[string]any `json:"evidence"`
		Changes  []struct {
			Address, Class string
		} `json:"changes"`
		Deciders string `json:"deciders"`
		Allowed  struct {
			Approve struct {
				Allowed bool
				Code    string
			}
		} `json:"allowed"`
	}](t, body)
	require.Equal(t, waiting.PlanDigest, review.Evidence["plan_digest"])
	require.NotEmpty(t, review.Changes)
	require.False(t, review.Allowed.Approve.Allowed, "the requester may not approve their own run")
	require.Equal(t, "FORBIDDEN", review.Allowed.Approve.Code)
	approve := map[string]any{"evidence": review.Evidence}
	approvePath := "/api/v1/runs/" + created.ID + "/approve"

	// Refusals, none of which decides anything.
	api.refused(reqTok, http.MethodPost, approvePath, approve, http.StatusForbidden, "FORBIDDEN", "four eyes: the requester's own decide token")
	api.refused(viewerTok, http.MethodPost, approvePath, approve, http.StatusForbidden, "FORBIDDEN", "a viewer's role decides nothing")
	api.refused(adminReadTok, http.MethodPost, approvePath, approve, http.StatusForbidden, "FORBIDDEN", "an admin's read-only token")
	api.refused(outsiderTok, http.MethodPost, approvePath, approve, http.StatusNotFound, "NOT_FOUND", "another organization's run")
	api.refused(outsiderTok, http.MethodGet, "/api/v1/runs/"+created.ID, nil, http.StatusNotFound, "NOT_FOUND", "another organization's run")
	stale := map[string]any{}
	for k, v := range review.Evidence {
		stale[k] = v
	}
	stale["plan_digest"] = "sha256:" + strings.Repeat("0", 64)
	api.refused(decideTok, http.MethodPost, approvePath, map[string]any{"evidence": stale}, http.StatusConflict, "STALE_EVIDENCE", "evidence of another plan")
	half := map[string]any{"plan_digest": review.Evidence["plan_digest"]}
	api.refused(decideTok, http.MethodPost, approvePath, map[string]any{"evidence": half}, http.StatusUnprocessableEntity, "INVALID_INPUT", "half the evidence")
	require.Equal(t, string(run.PendingApproval), api.pollRun(reqTok, created.ID, run.PendingApproval).State)

	// The second holder approves the plan the review named; it applies.
	status, body = api.call(decideTok, http.MethodPost, approvePath, approve)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, string(run.Approved), decodeJSON[apiRunDoc](t, body).State)
	done := api.pollRun(reqTok, created.ID, run.Succeeded)

	// Everything a pipeline reads back afterwards.
	status, body = api.call(reqTok, http.MethodGet, "/api/v1/runs/"+done.ID+"/timeline", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Abe Approver")
	for _, phase := range []string{"plan", "apply", "verify"} {
		status, body = api.call(reqTok, http.MethodGet, "/api/v1/runs/"+done.ID+"/logs?phase="+phase, nil)
		require.Equal(t, http.StatusOK, status, body)
		require.NotEmpty(t, body, phase)
	}
	api.refused(reqTok, http.MethodGet, "/api/v1/runs/"+done.ID+"/logs?phase=destroy", nil, http.StatusUnprocessableEntity, "INVALID_INPUT", "no such phase")
	status, body = api.call(reqTok, http.MethodGet, "/api/v1/runs/"+done.ID+"/plan", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"resource_changes"`)
	status, body = api.call(app.Token(t, approver, "audit"), http.MethodGet, done.Links.Evidence, nil)
	require.Equal(t, http.StatusOK, status, body)
	report := decodeJSON[struct {
		Run struct {
			PlanDigest string `json:"plan_digest"`
		} `json:"run"`
		Decisions []map[string]any `json:"decisions"`
		Verdict   map[string]any   `json:"verdict"`
	}](t, body)
	require.Equal(t, done.PlanDigest, report.Run.PlanDigest)
	require.Len(t, report.Decisions, 1)
	status, body = api.call(reqTok, http.MethodGet, "/api/v1/workspaces/"+done.WorkspaceID+"/state-versions", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"run_id":"`+done.ID+`"`)
	status, body = api.call(reqTok, http.MethodGet, "/api/v1/workspaces/"+done.WorkspaceID+"/outputs", nil)
	require.Equal(t, http.StatusOK, status, body)
	status, body = api.call(reqTok, http.MethodGet, "/api/v1/workspaces?q=api-assets", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"total":1`)
	status, body = api.call(reqTok, http.MethodGet, "/api/v1/runs?state=SUCCEEDED&mine=true", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, done.ID)
	api.refused(reqTok, http.MethodGet, "/api/v1/runs?state=DONE", nil, http.StatusUnprocessableEntity, "INVALID_INPUT", "no such state")
	api.refused(reqTok, http.MethodGet, "/api/v1/runs?after=not-a-cursor", nil, http.StatusBadRequest, "BAD_REQUEST", "a cursor made up")
	streamed := firstEvent(t, app, reqTok, done.Links.Events)
	require.Contains(t, streamed, "event: run")
	require.Contains(t, streamed, `"state":"SUCCEEDED"`)

	// A run that waited past its deadline is too late to decide.
	request["workspace"], request["inputs"] = "api-late", map[string]string{"name": "api-late", "retention_days": "30", "region": "eu-west"}
	status, body = api.call(reqTok, http.MethodPost, "/api/v1/requests", request)
	require.Equal(t, http.StatusCreated, status, body)
	late := api.pollRun(reqTok, decodeJSON[apiRunDoc](t, body).ID, run.PendingApproval)
	_, body = api.call(reqTok, http.MethodGet, late.Links.Review, nil)
	lateEvidence := decodeJSON[struct {
		Evidence map[string]any `json:"evidence"`
	}](t, body).Evidence
	require.NoError(t, app.DB.Exec("UPDATE runs SET decision_deadline = clock_timestamp() - interval '1 second' WHERE id = ?", late.ID).Error)
	api.refused(decideTok, http.MethodPost, "/api/v1/runs/"+late.ID+"/approve", map[string]any{"evidence": lateEvidence},
		http.StatusConflict, "APPROVAL_EXPIRED", "after the deadline")
	api.pollRun(reqTok, late.ID, run.Expired)

	// A restricted environment's run does not exist for a member without a grant.
	status, body = api.call(ownerTok, http.MethodPost, "/api/v1/environments", map[string]any{"name": "api-vault", "tier": "staging", "restricted": true,
		"requires_approval": true})
	require.Equal(t, http.StatusCreated, status, body)
	vault := decodeJSON[struct {
		ID string `json:"id"`
	}](t, body).ID
	request["environment_id"], request["workspace"] = vault, "api-vault"
	request["inputs"] = map[string]string{"name": "api-vault", "retention_days": "30", "region": "eu-west"}
	status, body = api.call(ownerTok, http.MethodPost, "/api/v1/requests", request)
	require.Equal(t, http.StatusCreated, status, body)
	hidden := api.pollRun(ownerTok, decodeJSON[apiRunDoc](t, body).ID, run.PendingApproval)
	api.refused(reqTok, http.MethodGet, "/api/v1/runs/"+hidden.ID, nil, http.StatusNotFound, "NOT_FOUND", "a restricted environment's run")
	api.refused(reqTok, http.MethodPost, "/api/v1/runs/"+hidden.ID+"/approve", approve, http.StatusNotFound, "NOT_FOUND", "deciding a restricted run")
	status, body = api.call(reqTok, http.MethodGet, "/api/v1/runs", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, hidden.ID)

	// A destroy is risk 3: a token never decides it, even the owner's.
	status, body = api.call(reqTok, http.MethodPost, "/api/v1/workspaces/"+done.WorkspaceID+"/destroy", map[string]any{"confirm": "not-it"})
	require.Equal(t, http.StatusUnprocessableEntity, status, body)
	status, body = api.call(reqTok, http.MethodPost, "/api/v1/workspaces/"+done.WorkspaceID+"/destroy", map[string]any{"confirm": "api-assets"})
	require.Equal(t, http.StatusCreated, status, body)
	destroy := api.pollRun(reqTok, decodeJSON[apiRunDoc](t, body).ID, run.PendingApproval)
	require.Equal(t, 3, *destroy.RiskClass)
	_, body = api.call(ownerTok, http.MethodGet, destroy.Links.Review, nil)
	destroyEvidence := decodeJSON[struct {
		Evidence map[string]any `json:"evidence"`
	}](t, body).Evidence
	api.refused(ownerTok, http.MethodPost, "/api/v1/runs/"+destroy.ID+"/approve",
		map[string]any{"evidence": destroyEvidence, "confirm": run.ConfirmWord, "reason": "tearing the test bucket down"},
		http.StatusForbidden, "FORBIDDEN", "a token on a risk-3 run")
	status, body = api.call(reqTok, http.MethodPost, "/api/v1/runs/"+destroy.ID+"/cancel", map[string]any{"reason": "not today"})
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, string(run.Cancelled), decodeJSON[apiRunDoc](t, body).State)

	// The workspace's other runs: a drift check changes nothing and needs no decision;
	// a rollback to a version that is not the workspace's is refused.
	status, body = api.call(reqTok, http.MethodPost, "/api/v1/workspaces/"+done.WorkspaceID+"/drift-check", nil)
	require.Equal(t, http.StatusCreated, status, body)
	require.Contains(t, body, `"kind":"drift_check"`)
	status, body = api.call(reqTok, http.MethodPost, "/api/v1/workspaces/"+done.WorkspaceID+"/rollback", map[string]any{"version_id": "sv-not-here"})
	require.True(t, status == http.StatusNotFound || status == http.StatusUnprocessableEntity, "%d %s", status, body)
	// A policy whose tests fail is refused with its field, and an operator uploads none.
	api.refused(ownerTok, http.MethodPost, "/api/v1/policies", map[string]any{"name": "api-broken", "rego": "package gantry.org.api_broken\ndeny contains", "tests": ""},
		http.StatusUnprocessableEntity, "INVALID_INPUT", "Rego that does not parse")
	api.refused(reqTok, http.MethodPost, "/api/v1/policies", map[string]any{"name": "api-broken", "rego": "package x", "tests": ""},
		http.StatusForbidden, "FORBIDDEN", "an operator's token")
}

// firstEvent opens an SSE stream with a token and returns its first event.
func firstEvent(t *testing.T, app *webtest.App, token, path string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, app.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var ev strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if sc.Text() == "" && ev.Len() > 0 {
			break
		}
		ev.WriteString(sc.Text() + "\n")
	}
	return ev.String()
}
