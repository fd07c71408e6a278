//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu).

package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
	"gantry/sandbox/api"
	"gantry/sandbox/client"
	"gantry/sandbox/cloud"
)

// TestLiveReadKeyForPlansAndVerifications (DESIGN §6, "Apply identity"; issue 15): with a
// read key and a write key set on an environment (the write key through the edit form, the
// read key through the JSON API), a live run's plan and verification hold only the read
// key — the sandbox cloud refuses a write made with the very key the plan phase received —
// and its apply holds the write key and succeeds with it. No page or API answer shows
// either key; the write key is refused as the read key.
func TestLiveReadKeyForPlansAndVerifications(t *testing.T) {
	t.Parallel()
	app := startCanary(t)
	ctx := t.Context()
	admin := app.LoggedIn(t, "admin@acme.test")
	operator := app.LoggedIn(t, "operator@acme.test")
	orgID := app.Orgs["acme"]
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	writeKey := createCloudKey(t, app.cloudURL, cloud.KeyRequest{Organization: orgID, Environment: staging, Scope: cloud.ScopeWrite, Reason: t.Name()})
	readKey := createCloudKey(t, app.cloudURL, cloud.KeyRequest{Organization: orgID, Environment: staging, Scope: cloud.ScopeRead, Reason: t.Name()})
	secrets := map[string]string{writeKey.Secret: "the write key", readKey.Secret: "the read key"}
	noKey := func(where, body string) {
		t.Helper()
		for secret, what := range secrets {
			require.NotContains(t, body, secret, "%s shows %s", where, what)
		}
	}

	// A write key alone is refused (its plans could not see what it makes), nothing stored.
	var refused json.RawMessage
	require.Equal(t, http.StatusUnprocessableEntity, environmentJSON(t, app.App, admin, http.MethodPut, "/api/v1/environments/"+staging,
		fmt.Sprintf(`{"name": "staging", "tier": "staging", "cloud_credential": %q}`, writeKey.Secret), &refused), "a write key needs a read key")
	require.Contains(t, string(refused), "A write credential needs a read credential")
	noKey("the refusal", string(refused))
	var env struct {
		CloudCredentialSetAt     *string `json:"cloud_credential_set_at"`
		CloudReadCredentialSetAt *string `json:"cloud_read_credential_set_at"`
	}
	require.Equal(t, http.StatusOK, environmentJSON(t, app.App, admin, http.MethodGet, "/api/v1/environments/"+staging, "", &env))
	require.Nil(t, env.CloudCredentialSetAt, "nothing was stored")

	// The read key through the API, then the write key through the edit form.
	require.Equal(t, http.StatusOK, environmentJSON(t, app.App, admin, http.MethodPut, "/api/v1/environments/"+staging,
		fmt.Sprintf(`{"name": "staging", "tier": "staging", "cloud_read_credential": %q}`, readKey.Secret), &env))
	require.NotNil(t, env.CloudReadCredentialSetAt, "the API says the read credential is set")
	setCredentialsThroughForm(t, app.App, admin, staging, url.Values{"cloud_credential": {writeKey.Secret}})
	require.Equal(t, http.StatusUnprocessableEntity, environmentJSON(t, app.App, admin, http.MethodPut, "/api/v1/environments/"+staging,
		fmt.Sprintf(`{"name": "staging", "tier": "staging", "cloud_read_credential": %q}`, writeKey.Secret), &refused), "the write key is refused as the read key")
	require.Contains(t, string(refused), "cloud_read_credential")
	noKey("the refusal", string(refused))
	require.Equal(t, http.StatusOK, environmentJSON(t, app.App, admin, http.MethodGet, "/api/v1/environments/"+staging, "", &env))
	require.NotNil(t, env.CloudCredentialSetAt, "the API says the write credential is set")
	require.NotNil(t, env.CloudReadCredentialSetAt, "the API says the read credential is set")

	// The pages and the API say both are set, since when, and never what they are.
	edit := webtest.ReadBody(t, app.Get(t, admin, "/environments/"+staging+"/edit"))
	require.Contains(t, edit, "Applies use a static write credential since")
	require.Contains(t, edit, "Plans and verifications use a static read credential since")
	require.Contains(t, edit, `name="cloud_credential" value=""`)
	require.Contains(t, edit, `name="cloud_read_credential" value=""`)
	require.Contains(t, edit, `data-testid="standing-write-credential"`)
	require.Contains(t, edit, `data-testid="standing-read-credential"`)
	governance := webtest.ReadBody(t, app.Get(t, app.LoggedIn(t, "auditor@acme.test"), "/governance"))
	require.Contains(t, governance, "a static write credential (used by applies) has been set on this environment since")
	require.Contains(t, governance, "a static read credential (used by plans and verifications) has been set on this environment since")
	for _, p := range []string{"/environments", "/environments/" + staging, "/api/v1/environments", "/api/v1/environments/" + staging, "/api/v1/openapi.json"} {
		resp := app.Get(t, admin, p)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
		noKey(p, body)
	}
	noKey("the edit page", edit)
	noKey("the governance report", governance)

	// The plan phase holds the read key and nothing else; with it the cloud reads but
	// refuses every write.
	r := waitForState(t, app.App, app.App.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {staging},
		"workspace": {"read-key"}, "kind": {"apply"}, "inputs.name": {"read-key"}, "inputs.retention_days": {"30"}}), run.PendingApproval)
	plan := app.exec.phaseTokens(t, app.App, r.ID)
	require.NotEmpty(t, plan["plan"], "no tofu command ran for the plan")
	for _, tok := range plan["plan"] {
		require.True(t, tok == readKey.Secret, "a plan command did not get the read key")
	}
	held, err := client.New(app.cloudURL, plan["plan"][0])
	require.NoError(t, err)
	_, err = held.List(ctx, "bucket")
	require.NoError(t, err, "the plan's key reads")
	_, err = held.Create(ctx, "bucket", map[string]any{"name": "written-by-a-plan", "retention_days": 1})
	require.Equal(t, http.StatusForbidden, client.StatusOf(err), "the cloud refuses a write with the plan's key: %v", err)
	require.ErrorContains(t, err, api.CodeForbidden)
	require.ErrorContains(t, err, "read-only")

	// The apply holds the write key and succeeds with it; the verification holds the read
	// key again and finds the world as applied.
	approve(t, app.App, admin, r)
	r = waitForState(t, app.App, r.ID, run.Succeeded)
	phases := app.exec.phaseTokens(t, app.App, r.ID)
	for _, phase := range []string{"plan", "apply", "verify"} {
		require.NotEmpty(t, phases[phase], "no tofu command ran for the %s", phase)
		want := map[bool]string{true: writeKey.Secret, false: readKey.Secret}[phase == "apply"]
		for _, tok := range phases[phase] {
			require.True(t, tok == want, "a %s command got the wrong key", phase)
		}
	}
	cloudAdmin, err := client.New(app.cloudURL, canaryCloudAdmin)
	require.NoError(t, err)
	buckets, err := cloudAdmin.AdminList(ctx, "bucket")
	require.NoError(t, err)
	require.Len(t, buckets, 1, "the plan's attempted write left nothing")
	require.Equal(t, "key:"+writeKey.ID, buckets[0].LastChange.Subject, "the apply wrote with the write key")
	require.Equal(t, "read-key", buckets[0].Attributes["name"])

	// The run's pages and logs never show either key either.
	for _, p := range []string{"/runs/" + r.ID, "/runs/" + r.ID + "/plan.json", "/api/v1/runs/" + r.ID, "/workspaces/" + r.WorkspaceID} {
		noKey(p, webtest.ReadBody(t, app.Get(t, admin, p)))
	}
	for _, phase := range []string{"plan", "apply", "verify"} {
		noKey(phase+" log", webtest.ReadBody(t, app.Get(t, admin, "/api/v1/runs/"+r.ID+"/logs?phase="+phase)))
	}
}

// phaseTokens groups the cloud credentials the commands of run runID were given by phase,
// through the state credential each command presented.
func (r *recordingExecutor) phaseTokens(t *testing.T, app *webtest.App, runID string) map[string][]string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for _, c := range r.calls {
		var cred struct{ RunID, Phase string }
		require.NoError(t, app.DB.Raw("SELECT run_id, phase FROM state_credentials WHERE id = ?", c.stateUser).Scan(&cred).Error)
		if cred.RunID == runID {
			out[cred.Phase] = append(out[cred.Phase], c.cloudTk)
		}
	}
	return out
}
