package web_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/breakglass"
	"gantry/models/identity"
	"gantry/models/run"
	"gantry/sandbox/api"
	"gantry/sandbox/client"
	"gantry/sandbox/cloud"
	"gantry/views/paths"
)

// TestWorkloadIssuerIsDiscoverable: a cloud that trusts Gantry discovers the workload
// issuer over HTTP and verifies a job token against the published keys.
func TestWorkloadIssuerIsDiscoverable(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	token, _, err := app.System.Identity.Mint(t.Context(), identity.Claims{OrganizationID: app.Orgs["acme"], EnvironmentID: "env-1",
		WorkspaceID: "ws-1", RunID: "run-1", Phase: identity.PhasePlan})
	require.NoError(t, err)
	provider, err := oidc.NewProvider(t.Context(), app.URL+"/workload")
	require.NoError(t, err)
	idToken, err := provider.Verifier(&oidc.Config{ClientID: "sandbox"}).Verify(t.Context(), token)
	require.NoError(t, err)
	var claims struct {
		Scope   string `json:"scope"`
		Run     string `json:"gantry_run"`
		Inspect string `json:"introspection_endpoint"`
	}
	require.NoError(t, idToken.Claims(&claims))
	require.Equal(t, "read", claims.Scope)
	require.Equal(t, "run-1", claims.Run)
	require.NoError(t, provider.Claims(&claims))
	require.Equal(t, app.URL+paths.WorkloadIntrospection(), claims.Inspect, "discovery offers introspection where Gantry serves it")
}

// introspect POSTs form to Gantry's introspection endpoint, as a cloud does.
func introspect(t *testing.T, app *webtest.App, method, contentType, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, app.URL+paths.WorkloadIntrospection(), strings.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp.StatusCode, webtest.ReadBody(t, resp), resp.Header
}

// TestWorkloadTokenIntrospection: the issuer's introspection endpoint (RFC 7662) needs
// no session or CSRF token, answers a POSTed form field token and nothing else (a
// clear 400 otherwise, 413 for a body far larger than a token), says {"active":false}
// and nothing more for anything not live, and is never cached.
func TestWorkloadTokenIntrospection(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	const form = "application/x-www-form-urlencoded"
	for _, c := range []struct{ method, contentType, body, why string }{
		{http.MethodGet, "", "", "introspection takes a POST"},
		{http.MethodPost, form, "", "send the token in the form field token"},
		{http.MethodPost, "application/json", `{"token":"x"}`, "send the token in the form field token"},
	} {
		status, body, _ := introspect(t, app, c.method, c.contentType, c.body)
		require.Equal(t, http.StatusBadRequest, status, "%s %s: %s", c.method, c.body, body)
		require.Contains(t, body, `"error":"invalid_request"`)
		require.Contains(t, body, c.why)
	}
	status, body, _ := introspect(t, app, http.MethodPost, form, "token="+strings.Repeat("x", 20_000))
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	// A token in the address is not read: it would be in access logs.
	resp, err := http.Post(app.URL+paths.WorkloadIntrospection()+"?token=x", form, strings.NewReader(""))
	require.NoError(t, err)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)

	// Not live: a stranger's string, a token of no run.
	gone, _, err := app.System.Identity.Mint(t.Context(), identity.Claims{OrganizationID: app.Orgs["acme"], EnvironmentID: "env-1",
		WorkspaceID: "ws-1", RunID: "run-1", Phase: identity.PhasePlan})
	require.NoError(t, err)
	for _, token := range []string{"not-a-token", gone} {
		status, body, header := introspect(t, app, http.MethodPost, form, url.Values{"token": {token}}.Encode())
		require.Equal(t, http.StatusOK, status, body)
		require.JSONEq(t, `{"active":false}`, body)
		require.Equal(t, "no-store", header.Get("Cache-Control"))
	}
}

// TestWindowCredentialsEndWithTheWindow (fast: the mock executor, so the window is
// written open directly, as the service opens none on a simulated workspace): the
// window's token lists and changes its workspace's objects on the sandbox cloud, and
// the next call after its holder ends it through the page ("End the window now") is
// refused; a second window's token is refused once its end passes by the clock, before
// its end job has even run. The cloud asks Gantry's introspection endpoint at every call.
func TestWindowCredentialsEndWithTheWindow(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sc, err := cloud.New(t.Context(), cloud.Config{DataDir: t.TempDir(), Issuer: "http://" + ln.Addr().String() + paths.WorkloadIssuer(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	cloudSrv := httptest.NewServer(sc)
	t.Cleanup(cloudSrv.Close)
	app := webtest.StartWith(t, webtest.Options{Listener: ln, CloudEndpoint: cloudSrv.URL})
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")

	for i, region := range []string{"eu-west", "eu-central"} {
		r := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, region)), run.PendingApproval)
		id := openWindowFor(t, app, r, userIDOf(t, app, "operator@acme.test"))
		status, body := windowAct(t, app, operator, id, "credentials", nil)
		require.Equal(t, http.StatusOK, status, body)
		m := tokenArea.FindStringSubmatch(body)
		require.NotNil(t, m, body)
		glass, err := client.New(cloudSrv.URL, strings.TrimSpace(m[1]))
		require.NoError(t, err)
		made, err := glass.Create(t.Context(), "bucket", map[string]any{"name": "by-hand-" + region})
		require.NoError(t, err)
		_, err = glass.List(t.Context(), "bucket")
		require.NoError(t, err)

		if i == 0 {
			status, body = windowAct(t, app, operator, id, "end", nil)
			require.Equal(t, http.StatusSeeOther, status, body)
			require.Equal(t, breakglass.AwaitingCodification, windowOf(t, app, id).State)
		} else {
			// Its clock ran out; its end job has not run yet (it is scheduled an hour on).
			require.NoError(t, app.DB.Exec("UPDATE breakglass_windows SET ends_at = now() WHERE id = ?", id).Error)
			require.Equal(t, breakglass.Open, windowOf(t, app, id).State)
		}
		_, err = glass.List(t.Context(), "bucket")
		requireGrantEnded(t, err)
		_, err = glass.Update(t.Context(), "bucket", made.ID, map[string]any{"name": "by-hand-" + region, "versioning": true})
		requireGrantEnded(t, err)
	}
}

// requireGrantEnded requires err to be the cloud's refusal of a token whose grant ended.
func requireGrantEnded(t *testing.T, err error) {
	t.Helper()
	require.Equal(t, http.StatusUnauthorized, client.StatusOf(err), "%v", err)
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, api.CodeUnauthenticated, ce.Code)
	require.Contains(t, ce.Message, "the token's grant has ended (window closed, phase over or run cancelled)")
}
