//go:build !fast

// Live: needs runc (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package tofurun_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/runner"
	"gantry/runner/oci"
	"gantry/runner/tofu"
	"gantry/runner/tofurun"
	"gantry/sandbox/sandboxtest"
)

// slowCloud answers every change to a cloud object (POST, PUT, DELETE under /v1/) late:
// after the cloud has checked the token and made the change, so a token is judged when
// its request arrives, and each request of an apply comes a while after the one before.
// It records the tokens the changes came with.
type slowCloud struct {
	next  http.Handler
	delay time.Duration
	mu    sync.Mutex
	used  map[string]bool
}

func (s *slowCloud) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.next.ServeHTTP(w, r)
	if r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/") {
		s.mu.Lock()
		s.used[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] = true
		s.mu.Unlock()
		// Fixed, not a budget: the delay is the subject (each change answered later than
		// the token lives); a busier machine only makes the requests later still.
		time.Sleep(s.delay)
	}
}

func (s *slowCloud) tokens() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.used) }

// shortLived are apply credentials whose workload token lives life (JWT times are whole
// seconds, so a little less), and, when refresh is set, a Refresh that mints the next one
// alike, as the worker's credentials do. minted gets every token.
func shortLived(t *testing.T, iss *sandboxtest.Issuer, life time.Duration, refresh bool, minted *[]string) runner.Credentials {
	var mu sync.Mutex
	mint := func() (string, time.Time) {
		exp := time.Now().Add(life).Truncate(time.Second)
		tok := iss.Mint(t, sandboxtest.Claims{Org: "acme", Env: "staging", Workspace: workspaceID, Run: "run-1", Phase: "apply", Scope: "write", Expiry: exp})
		mu.Lock()
		*minted = append(*minted, tok)
		mu.Unlock()
		return tok, exp
	}
	tok, exp := mint()
	c := runner.Credentials{StateUsername: stateUser, StatePassword: statePass, CloudToken: tok, CloudExpires: exp}
	if refresh {
		c.Refresh = func(context.Context) (string, time.Time, error) { tok, exp := mint(); return tok, exp, nil }
	}
	return c
}

// TestTokenRefreshedDuringApply: an apply of the postgres template (network, subnet,
// database, one after the other) against a cloud that answers each change 5 s late takes
// longer than its 4 s workload token lives. In runc and as a plain process, the job's
// token file is replaced while tofu runs and the provider presents the fresh token, so
// the apply succeeds, with more than one token used and every token masked in the live
// log; without a Refresh the same apply fails when the cloud refuses the expired token.
func TestTokenRefreshedDuringApply(t *testing.T) {
	const life, delay = 4 * time.Second, 5 * time.Second
	for _, executor := range []string{"oci", "process"} {
		for _, refresh := range []bool{true, false} {
			name := executor + "/refreshed"
			if !refresh {
				name = executor + "/expires" // short: the process executor's plugin sockets live under the test's temporary directory
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := setupOCI(t)
				// A cgroup name without the subtest's slashes (setupOCI's cleanup reads it).
				e.ex.CgroupRoot = fmt.Sprintf("gantry-tofurun-refresh-%d-%s-%t", os.Getpid(), executor, refresh)
				slow := &slowCloud{next: e.cloud.Server, delay: delay, used: map[string]bool{}}
				var exec tofurun.Executor
				if executor == "oci" {
					sock, ln := unixSocket(t, "slowcloud")
					serve(t, ln, slow)
					o, err := tofurun.NewOCI(t.Context(), tofurun.OCIConfig{Toolchain: e.tc, Fwd: e.fwd, RootfsDir: filepath.Join(e.dir, "rootfs"),
						StateSocket: e.stateSk, StatePort: e.port, CloudSocket: sock, Limits: oci.Limits{MemoryBytes: 512 << 20, Pids: 256, CPUs: 1},
						Timeout: 2 * time.Minute, Executor: e.ex})
					require.NoError(t, err)
					exec = o
				} else {
					srv := httptest.NewServer(slow)
					t.Cleanup(srv.Close)
					exec = &tofurun.Process{Tofu: e.tc.Tofu, CLIConfig: e.tc.CLIConfig, CloudEndpoint: srv.URL}
				}
				r := tofurun.New(exec, filepath.Join(e.dir, "work"), &tofu.PluginCache{Mirror: e.tc.Mirror, Root: filepath.Join(e.dir, "plugins")})
				plan, err := r.Plan(t.Context(), runner.PlanRequest{RunID: "run-1", WorkspaceID: workspaceID, Kind: runner.KindApply,
					Config: e.config, Credentials: e.creds(t, "plan", "read")})
				require.NoError(t, err, "%s", plan.Log)

				var minted []string
				creds := shortLived(t, e.iss, life, refresh, &minted)
				var chunks strings.Builder
				var mu sync.Mutex
				live := runner.NewLiveLog(t.Context(), func(_ context.Context, b []byte) error {
					mu.Lock()
					defer mu.Unlock()
					chunks.Write(b)
					return nil
				}, nil, creds.StatePassword, creds.CloudToken)
				apply, err := r.Apply(t.Context(), runner.ApplyRequest{RunID: "run-1", WorkspaceID: workspaceID, Config: e.config,
					PlanFile: plan.PlanFile, Credentials: creds, Log: live})
				live.Close()
				log := string(apply.Log)
				if !refresh {
					require.ErrorIs(t, err, tofurun.ErrTofu, log)
					require.Regexp(t, `rejected the provider.s token: invalid token: oidc: token\s+is expired`, log, "the cloud refused the token the apply began with")
					require.NotContains(t, log, "workload token was refreshed")
					require.Len(t, minted, 1)
					return
				}
				require.NoError(t, err, log)
				require.Contains(t, log, "Apply complete! Resources: 3 added")
				require.Contains(t, log, "# the workload token was refreshed; the new one expires at")
				require.GreaterOrEqual(t, slow.tokens(), 2, "the provider presented refreshed tokens")
				require.GreaterOrEqual(t, len(minted), 3)
				mu.Lock()
				stored := chunks.String()
				mu.Unlock()
				require.Contains(t, stored, "workload token was refreshed", "the live log tells of it")
				for _, tok := range minted {
					require.Equal(t, runner.Masked, string(live.Mask([]byte(tok))), "every minted token is masked")
					require.NotContains(t, stored, tok)
				}
				if executor == "oci" {
					e.assertClean(t)
				}
			})
		}
	}
}
