package kube_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/runner/kube"
)

// masks records the secrets a live log was told to mask.
type masks struct {
	mu   sync.Mutex
	seen []string
}

func (m *masks) AddSecret(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, s)
}

// call sends one request to the endpoint with token ("": none) and returns the status
// and body.
func call(t *testing.T, srv *httptest.Server, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(data)
}

// TestPhaseEndpointIsJobScoped: each session answers only to its own token (another
// phase's is 403, none 401), an unknown or ended Job is 404 whatever the token, only an
// apply has a plan file, a fresh token is masked before it is handed out, and the result
// is taken once.
func TestPhaseEndpointIsJobScoped(t *testing.T) {
	t.Parallel()
	p := kube.NewPortal()
	p.MaxResultBytes = 1 << 20
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	expires := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
	var mask masks
	minted := 0
	planSess, planTok, err := p.Open(kube.Inputs{
		Description: kube.Description{Job: "gantry-plan-aaaa", Phase: kube.PhasePlan, Kind: "apply", RunID: "run-a", WorkspaceID: "ws-a", CloudExpires: expires},
		Config:      []byte("config of run a"),
		Refresh: func(context.Context) (string, time.Time, error) {
			minted++
			return "fresh-token-" + string(rune('0'+minted)), expires.Add(time.Minute), nil
		},
		Mask: &mask})
	require.NoError(t, err)
	applySess, applyTok, err := p.Open(kube.Inputs{
		Description: kube.Description{Job: "gantry-apply-bbbb", Phase: kube.PhaseApply, RunID: "run-b", WorkspaceID: "ws-b"},
		Config:      []byte("config of run b"), PlanFile: []byte("plan of run b")})
	require.NoError(t, err)
	require.NotEqual(t, planTok, applyTok)
	require.Len(t, planTok, 64, "256 random bits")
	require.Equal(t, 2, p.Sessions())

	_, _, err = p.Open(kube.Inputs{Description: kube.Description{Job: "gantry-plan-aaaa"}})
	require.ErrorContains(t, err, "open already")
	_, _, err = p.Open(kube.Inputs{Description: kube.Description{Job: "Not_A_Job"}})
	require.ErrorContains(t, err, "not a Job name")

	const a, b = kube.PathPrefix + "gantry-plan-aaaa", kube.PathPrefix + "gantry-apply-bbbb"
	code, body := call(t, srv, http.MethodGet, a, planTok, "")
	require.Equal(t, http.StatusOK, code, body)
	var d kube.Description
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Equal(t, kube.Description{Job: "gantry-plan-aaaa", Phase: kube.PhasePlan, Kind: "apply", RunID: "run-a", WorkspaceID: "ws-a",
		CloudExpires: expires, Refreshable: true}, d)
	code, body = call(t, srv, http.MethodGet, a+"/config", planTok, "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "config of run a", body)

	// Another run's token, no token, an unknown Job.
	for _, path := range []string{a, a + "/config", a + "/token", a + "/result"} {
		method := http.MethodGet
		if strings.HasSuffix(path, "/token") || strings.HasSuffix(path, "/result") {
			method = http.MethodPost
		}
		code, _ = call(t, srv, method, path, applyTok, "{}")
		require.Equal(t, http.StatusForbidden, code, "%s %s with run b's token", method, path)
		code, _ = call(t, srv, method, path, "", "{}")
		require.Equal(t, http.StatusUnauthorized, code, "%s %s without a token", method, path)
	}
	code, _ = call(t, srv, http.MethodGet, kube.PathPrefix+"gantry-plan-zzzz/config", planTok, "")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, srv, http.MethodGet, "/state/ws-a", planTok, "")
	require.Equal(t, http.StatusNotFound, code)

	// Only an apply has a plan file.
	code, _ = call(t, srv, http.MethodGet, a+"/plan", planTok, "")
	require.Equal(t, http.StatusNotFound, code)
	code, body = call(t, srv, http.MethodGet, b+"/plan", applyTok, "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "plan of run b", body)
	code, _ = call(t, srv, http.MethodPut, b+"/plan", applyTok, "x")
	require.Equal(t, http.StatusMethodNotAllowed, code)

	// A fresh token is masked before the pod gets it; a phase without refresh has none.
	code, body = call(t, srv, http.MethodPost, a+"/token", planTok, "{}")
	require.Equal(t, http.StatusOK, code, body)
	var fresh kube.TokenAnswer
	require.NoError(t, json.Unmarshal([]byte(body), &fresh))
	require.Equal(t, "fresh-token-1", fresh.Token)
	require.Equal(t, []string{"fresh-token-1"}, mask.seen)
	code, _ = call(t, srv, http.MethodPost, b+"/token", applyTok, "{}")
	require.Equal(t, http.StatusConflict, code)

	// The result: refused when it is not one or too large, then taken once.
	code, _ = call(t, srv, http.MethodPost, a+"/result", planTok, "not json")
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = call(t, srv, http.MethodPost, a+"/result", planTok, `{"log":"`+strings.Repeat("A", 2<<20)+`"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	select {
	case <-planSess.Done():
		t.Fatal("a refused upload finished the phase")
	default:
	}
	first, err := json.Marshal(kube.Result{PlanFile: []byte("plan.bin"), PlanJSON: []byte(`{}`), HasChanges: true, Log: []byte("the log")})
	require.NoError(t, err)
	code, body = call(t, srv, http.MethodPost, a+"/result", planTok, string(first))
	require.Equal(t, http.StatusNoContent, code, body)
	<-planSess.Done()
	second, err := json.Marshal(kube.Result{PlanFile: []byte("another plan"), HasChanges: false})
	require.NoError(t, err)
	code, _ = call(t, srv, http.MethodPost, a+"/result", planTok, string(second))
	require.Equal(t, http.StatusConflict, code, "a second upload is refused")
	got, ok := planSess.Result()
	require.True(t, ok)
	require.Equal(t, "plan.bin", string(got.PlanFile))
	require.True(t, got.HasChanges)
	_, ok = applySess.Result()
	require.False(t, ok)

	// Once the phase ended, its token is useless.
	p.Close(planSess)
	for _, path := range []string{a, a + "/config"} {
		code, _ = call(t, srv, http.MethodGet, path, planTok, "")
		require.Equal(t, http.StatusNotFound, code, path)
	}
	code, _ = call(t, srv, http.MethodGet, b+"/config", applyTok, "")
	require.Equal(t, http.StatusOK, code, "the other session lives on")
	p.Close(applySess)
	require.Zero(t, p.Sessions())
}
