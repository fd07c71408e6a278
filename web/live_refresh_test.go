//go:build !fast

// Live: needs runc (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package web_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/oci"
)

// lateWrites answers every change to a cloud object (POST, PUT, DELETE under /v1/)
// late: after the cloud has checked the token and made the change, so a token is judged
// when its request arrives and the next change of an apply comes a while after it. It
// records the tokens the changes came with.
type lateWrites struct {
	delay time.Duration
	mu    sync.Mutex
	used  []string
}

func (l *lateWrites) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/") {
			l.mu.Lock()
			l.used = append(l.used, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			l.mu.Unlock()
			// Fixed, not a budget: the delay outlasting the token's life is the subject
			// (a busy machine only makes the apply longer still).
			time.Sleep(l.delay)
		}
	})
}

func (l *lateWrites) tokens() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.used...)
}

// ociTestLimits are the containers' limits in TestLiveTokenRefresh.
var ociTestLimits = oci.Limits{MemoryBytes: 512 << 20, Pids: 256, CPUs: 1}

// withoutRefresh is the live runner with token refresh taken away: every phase keeps the
// token it began with, as before runners refreshed it.
type withoutRefresh struct{ runner.Runner }

func (w withoutRefresh) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	req.Credentials.Refresh = nil
	return w.Runner.Plan(ctx, req)
}

func (w withoutRefresh) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	req.Credentials.Refresh = nil
	return w.Runner.Apply(ctx, req)
}

func (w withoutRefresh) Verify(ctx context.Context, req runner.VerifyRequest) (runner.VerifyResult, error) {
	req.Credentials.Refresh = nil
	return w.Runner.Verify(ctx, req)
}

// subjectOf is a JWT's sub (the token is Gantry's own; nothing is verified here).
func subjectOf(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3, "a workload token")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var c struct{ Sub string }
	require.NoError(t, json.Unmarshal(payload, &c))
	return c.Sub
}

// TestLiveTokenRefresh: Gantry's workload tokens live 4 s, and the sandbox cloud answers
// each change 5 s late, so the apply of the postgres template (network, subnet, database,
// one after the other) outlives the token it began with by far. With the runner
// refreshing the job's token file, the run succeeds, in runc and as a plain process: the
// cloud saw fresh tokens of the same run and phase, and none of them is in the logs. The
// same setup without the refresh fails: the cloud refuses the expired token.
func TestLiveTokenRefresh(t *testing.T) {
	t.Parallel()
	const life, delay = 4 * time.Second, 5 * time.Second
	for _, executor := range []string{"process", "oci"} {
		for _, refresh := range []bool{true, false} {
			name := executor + "/refreshed"
			if !refresh {
				name = executor + "/expires"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				late := &lateWrites{delay: delay}
				wrap := func(r runner.Runner) runner.Runner { return r }
				if !refresh {
					wrap = func(r runner.Runner) runner.Runner { return withoutRefresh{r} }
				}
				var app *webtest.App
				if executor == "oci" {
					app = startRuncWith(t, runcOptions{limits: ociTestLimits, cloud: late.wrap, wrap: wrap, tokenLifetime: life}).App
				} else {
					app = startLiveWith(t, liveOptions{Cloud: late.wrap, Runner: wrap, WorkloadTokenLifetime: life}).App
				}
				operator := app.LoggedIn(t, "operator@acme.test")
				dev := app.OrgEnvironmentID(t, "acme", "development")
				id := app.RequestRun(t, operator, runcPostgresInputs(dev, run.KindApply))

				if !refresh {
					r := app.WaitForRun(t, id, run.Failed, 3*time.Minute)
					require.Contains(t, r.StateReason, "apply failed")
					logs := app.RunLogs(t, r)
					require.Regexp(t, `rejected the provider.s token: invalid token: oidc: token\s+is expired`, logs)
					require.NotContains(t, logs, "workload token was refreshed")
					return
				}
				r := app.WaitForRun(t, id, run.Succeeded, 3*time.Minute)
				require.Equal(t, "tofu/"+executor, r.Runner)
				logs := app.RunLogs(t, r)
				require.Contains(t, logs, "Apply complete! Resources: 3 added")
				require.Regexp(t, `(?m)^# the workload token was refreshed; the new one expires at `, logs)

				// Three changes, at least two tokens: all of this run's apply, minted by
				// the same issuer for the same claims.
				used := late.tokens()
				require.Len(t, used, 3)
				distinct := map[string]bool{}
				for _, tok := range used {
					distinct[tok] = true
					require.Regexp(t, `^org:[^:]+:env:`+regexp.QuoteMeta(dev)+`:ws:[^:]+:run:`+regexp.QuoteMeta(r.ID)+`:phase:apply$`, subjectOf(t, tok))
				}
				require.GreaterOrEqual(t, len(distinct), 2, "the provider presented a refreshed token")
				// No token is in a stored log or a live log chunk.
				ctx := authz.WithSubject(t.Context(), authz.System(r.OrganizationID))
				var stored strings.Builder
				stored.WriteString(logs)
				for _, phase := range []run.JobKind{run.JobPlan, run.JobApply, run.JobVerify} {
					chunks, err := app.System.Runs.Reads.LogChunks(ctx, r.ID, phase, 0, 1000)
					require.NoError(t, err)
					for _, c := range chunks {
						stored.WriteString(c.Text)
					}
				}
				require.Contains(t, stored.String(), "workload token was refreshed")
				for tok := range distinct {
					require.NotContains(t, stored.String(), tok)
				}
			})
		}
	}
}
