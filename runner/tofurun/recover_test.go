//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu).

package tofurun_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	catalogfiles "gantry/catalog"
	"gantry/handlers"
	"gantry/models/catalog"
	"gantry/models/db/dbtest"
	"gantry/models/state"
	"gantry/models/state/statetest"
	"gantry/runner"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/runner/tofurun"
	"gantry/sandbox/client"
	"gantry/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// awayBackend is Gantry's state backend (handlers.State over the state service) that
// answers 503, as it does while its database is away, whenever away is set.
type awayBackend struct {
	next http.Handler
	away atomic.Bool
}

func (b *awayBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.away.Load() {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the state backend's database is unavailable; try again", http.StatusServiceUnavailable)
		return
	}
	b.next.ServeHTTP(w, r)
}

// fewRetries gives tofu no retries of a 5xx (its own defaults are two, the runner's ten),
// so that a backend away for a few seconds is away longer than tofu waits, and calls
// pushed after each `tofu state push`.
type fewRetries struct {
	tofurun.Executor
	pushed func(attempt int)
	pushes atomic.Int32
}

func (e *fewRetries) Run(ctx context.Context, dir string, c tofurun.Command) (int, string, error) {
	c.Secrets = maps.Clone(c.Secrets) // the process executor sets these after tofu.Env: they win
	c.Secrets["TF_HTTP_RETRY_MAX"] = "0"
	code, explain, err := e.Executor.Run(ctx, dir, c)
	if len(c.Args) > 1 && c.Args[0] == "state" && c.Args[1] == "push" {
		if n := int(e.pushes.Add(1)); e.pushed != nil {
			e.pushed(n)
		}
	}
	return code, explain, err
}

// TestApplyPushesTheStateTofuCouldNotStore: the state backend goes away (503) while
// `tofu apply` creates a bucket and stays away past tofu's retries, so tofu leaves the
// state in errored.tfstate, and its lock held, and fails. The runner pushes the file
// with the apply's own credential: once the backend is back, the push takes the lock
// again as the same holding (the fence reserved for the apply), stores the state as the
// apply's version (same lineage, next serial) and unlocks, and the apply counts as
// applied, saying so in its log. When the backend never comes back within the recovery
// window, the apply fails with ErrStateNotStored and the state is kept on the host,
// never removed with the job.
func TestApplyPushesTheStateTofuCouldNotStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tc := tofutest.Toolchain(t, "../..", dir, io.Discard)
	cat, err := catalog.Load(t.Context(), catalogfiles.FS, &catalog.MemoryPins{})
	require.NoError(t, err)
	entry, err := cat.Get("bucket")
	require.NoError(t, err)
	inputs, verr := entry.Template.ValidateInputs(map[string]string{"name": "orders-archive"})
	require.Nil(t, verr)

	for _, comesBack := range []bool{true, false} {
		name := map[bool]string{true: "pushed", false: "kept"}[comesBack]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			f := statetest.New(t)
			e := echo.New()
			handlers.State{Backend: f.Service}.Register(e.Group(""))
			backend := &awayBackend{next: e}
			stateSrv := httptest.NewServer(backend)
			t.Cleanup(stateSrv.Close)

			// The backend goes away as the cloud creates the bucket: tofu has locked and
			// read the state by then, and writes it next.
			iss := sandboxtest.NewIssuer(t)
			sc := sandboxtest.NewCloud(t, iss)
			cloudSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/") {
					backend.away.Store(true)
				}
				sc.Server.ServeHTTP(w, r)
			}))
			t.Cleanup(cloudSrv.Close)

			b, err := entry.Generate(catalog.GenerateInput{WorkspaceID: f.WorkspaceID, Inputs: inputs,
				StateAddress: stateSrv.URL + "/state/" + f.WorkspaceID})
			require.NoError(t, err)
			config, _, err := b.Tar()
			require.NoError(t, err)

			// The workspace has a state already: the recovered one must follow it.
			const lineage = "5d6c0a57-8d1e-4c55-9a0b-7e0c2c49aaaa"
			seedRun := f.Run(t, f.OrgID, f.WorkspaceID)
			seedUser, seedPass := f.Issue(t, f.WorkspaceID, seedRun, state.PhaseApply)
			seedCred, err := f.Service.Authenticate(ctx, seedUser, seedPass)
			require.NoError(t, err)
			require.NoError(t, f.Service.Write(ctx, seedCred, f.WorkspaceID, "", statetest.StateJSON(1, lineage, "seed")))

			exec := &fewRetries{Executor: &tofurun.Process{Tofu: tc.Tofu, CLIConfig: tc.CLIConfig, CloudEndpoint: cloudSrv.URL}}
			if comesBack {
				// Back after the first push failed: the runner must try again.
				exec.pushed = func(attempt int) {
					if attempt == 1 {
						backend.away.Store(false)
					}
				}
			}
			// Short: the process executor's plugin sockets live in the job's directory.
			work, err := os.MkdirTemp("", "tofurun-recover-")
			require.NoError(t, err)
			t.Cleanup(func() { os.RemoveAll(work); os.RemoveAll(tofurun.KeptStates(work)) })
			r := tofurun.New(exec, work, &tofu.PluginCache{Mirror: tc.Mirror, Root: t.TempDir()})
			r.StateRecovery = 5 * time.Second

			token := func(phase, scope string) string {
				return iss.Mint(t, sandboxtest.Claims{Org: "acme", Env: "staging", Workspace: f.WorkspaceID, Run: f.RunID, Phase: phase, Scope: scope})
			}
			planUser, planPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhasePlan)
			plan, err := r.Plan(ctx, runner.PlanRequest{RunID: f.RunID, WorkspaceID: f.WorkspaceID, Kind: runner.KindApply, Config: config,
				Credentials: runner.Credentials{StateUsername: planUser, StatePassword: planPass, CloudToken: token("plan", "read")}})
			require.NoError(t, err, "%s", plan.Log)
			require.True(t, plan.HasChanges)

			// As the apply worker does: the state lock is the apply's before tofu runs.
			applyUser, applyPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
			fence, err := f.Service.Reserve(ctx, f.OrgID, f.WorkspaceID, f.RunID, applyUser)
			require.NoError(t, err)
			res, applyErr := r.Apply(ctx, runner.ApplyRequest{RunID: f.RunID, WorkspaceID: f.WorkspaceID, Config: config, PlanFile: plan.PlanFile,
				Credentials: runner.Credentials{StateUsername: applyUser, StatePassword: applyPass, CloudToken: token("apply", "write")}})
			log := string(res.Log)
			require.Contains(t, log, "Error: Failed to persist state to backend", "tofu could not store the state")
			require.Contains(t, log, "$ tofu state push -no-color -lock-timeout=2m errored.tfstate")

			admin, err := client.New(cloudSrv.URL, sc.AdminToken)
			require.NoError(t, err)
			buckets, err := admin.AdminList(ctx, "bucket")
			require.NoError(t, err)
			require.Len(t, buckets, 1, "the bucket was created once")
			latest, err := f.Service.Latest(ctx, f.OrgID, f.WorkspaceID)
			require.NoError(t, err)
			lock, err := f.Service.LockOf(ctx, f.WorkspaceID)
			require.NoError(t, err)
			entries, err := os.ReadDir(work)
			require.NoError(t, err)
			for _, ent := range entries {
				require.False(t, strings.HasPrefix(ent.Name(), "job-"), "the job's directory is removed: %s", ent.Name())
			}

			if comesBack {
				require.NoError(t, applyErr, log)
				require.EqualValues(t, 2, exec.pushes.Load(), log)
				require.Contains(t, log, "# the push failed; trying again in 1s")
				require.Contains(t, log, "# state recovered: errored.tfstate is stored in the state backend")
				require.Contains(t, string(res.Outputs), "orders-archive", "the outputs come from the stored state")
				require.NotNil(t, latest.RunID)
				require.Equal(t, f.RunID, *latest.RunID, "the apply's version, written with its credential")
				require.Equal(t, lineage, latest.Lineage)
				require.Greater(t, latest.Serial, int64(1))
				content, err := f.Service.Content(ctx, f.OrgID, latest.ID)
				require.NoError(t, err)
				require.Contains(t, string(content), `"sandbox_bucket"`)
				require.Contains(t, string(content), buckets[0].ID)
				var versions int64
				require.NoError(t, f.DB.Table("state_versions").Where("workspace_id = ?", f.WorkspaceID).Count(&versions).Error)
				require.EqualValues(t, 2, versions, "the seed and the apply's: one version per apply")
				require.False(t, lock.Held, "the push unlocked")
				require.Equal(t, fence, lock.Fence, "the push took the apply's lock again as the same holding")
				require.NoDirExists(t, tofurun.KeptStates(work), "nothing to keep")
				return
			}

			require.ErrorIs(t, applyErr, tofurun.ErrStateNotStored)
			require.ErrorIs(t, applyErr, tofurun.ErrTofu)
			require.GreaterOrEqual(t, exec.pushes.Load(), int32(2), "the push was retried")
			require.Equal(t, seedRun, *latest.RunID, "nothing was stored")
			require.True(t, lock.Held, "tofu could not unlock; the worker's failure fences the lock")
			require.Equal(t, f.RunID, lock.RunID)
			m := regexp.MustCompile(`kept on the runner's host at (\S+\.tfstate)`).FindStringSubmatch(applyErr.Error())
			require.NotNil(t, m, applyErr.Error())
			require.Contains(t, log, "is kept on the runner's host at "+m[1])
			require.Equal(t, tofurun.KeptStates(work), filepath.Dir(m[1]), "beside the work root, which a restarted portal empties")
			st, err := os.Stat(m[1])
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
			kept, err := os.ReadFile(m[1])
			require.NoError(t, err)
			var doc struct {
				Serial    int
				Lineage   string
				Resources []struct{ Type string }
			}
			require.NoError(t, json.Unmarshal(kept, &doc))
			require.Equal(t, lineage, doc.Lineage)
			require.Greater(t, doc.Serial, 1)
			require.Len(t, doc.Resources, 1)
			require.Equal(t, "sandbox_bucket", doc.Resources[0].Type)
		})
	}
}
