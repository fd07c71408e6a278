package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	catalogfiles "gantry/catalog"
	"gantry/cmd/gantry/assemble"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/demo"
	"gantry/models/keyring"
	runpkg "gantry/models/run"
	"gantry/runner/mock"
	"gantry/web/devidp"
)

// startPortal runs this test binary as `gantry serve` (see TestMain) and returns it
// with its output, which the test may read while it runs.
func startPortal(t *testing.T, env []string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	encoded, err := json.Marshal(append([]string{"serve"}, args...))
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// Each portal's metrics on a free port of its own (the default one is shared).
	cmd.Env = append(os.Environ(), append(append([]string{"GANTRY_METRICS_ADDR=127.0.0.1:0"}, env...), "GANTRY_TEST_MAIN=1", "GANTRY_TEST_ARGS="+string(encoded))...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, out
}

// TestPortalKilledWhilePlanning: the portal dies (SIGKILL) while a run is PLANNING.
// After a restart the run completes exactly once: one plan recorded, one outcome, no
// lost run.
func TestPortalKilledWhilePlanning(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.NewURL(t)
	gdb, err := db.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() {
		if s, err := gdb.DB(); err == nil {
			s.Close()
		}
	})

	issuer := startTestIssuer(t)
	orgs, err := demo.Seed(ctx, gdb, issuer)
	require.NoError(t, err)
	keySpec := keyring.NewKeySpec("crash-1")
	keys, err := keyring.Parse(keySpec)
	require.NoError(t, err)
	// This process only requests the run; the portals work it.
	sys, err := assemble.Build(ctx, assemble.Config{DB: gdb, DSN: dsn, Keys: keys, CatalogFS: catalogfiles.FS, Runner: mock.New(),
		BaseURL: "http://127.0.0.1:1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(sys.Close)
	var operator, staging string
	require.NoError(t, gdb.Raw("SELECT id FROM users WHERE subject = 'acme-operator'").Scan(&operator).Error)
	require.NoError(t, gdb.Raw("SELECT id FROM environments WHERE organization_id = ? AND name = 'staging'", orgs["acme"]).Scan(&staging).Error)
	subject := authz.Subject{UserID: operator, Name: "Olivia", OrganizationID: orgs["acme"], Role: authz.RoleOperator}
	r, err := sys.Runs.Request(authz.WithSubject(ctx, subject), runpkg.Request{EnvironmentID: staging, Workspace: "crash", Template: "bucket",
		Kind: runpkg.KindApply, Inputs: map[string]string{"name": "crash-bucket"}})
	require.NoError(t, err)

	env := []string{"GANTRY_DATABASE_URL=" + dsn, "GANTRY_KEYS=" + keySpec, "GANTRY_OIDC_ISSUER=" + issuer,
		"GANTRY_OIDC_CLIENT_ID=gantry", "GANTRY_OIDC_CLIENT_SECRET=s", "GANTRY_BASE_URL=http://127.0.0.1:1", "GANTRY_ADDR=127.0.0.1:0"}
	state := func() runpkg.State {
		var s runpkg.State
		require.NoError(t, gdb.Raw("SELECT state FROM runs WHERE id = ?", r.ID).Scan(&s).Error)
		return s
	}

	// First portal: planning takes a minute, so it is surely mid-plan when killed.
	first, out1 := startPortal(t, env, "--runner-delay=1m", "--plan-timeout=3s", "--job-rescue-after=3s")
	require.Eventually(t, func() bool { return state() == runpkg.Planning }, 30*time.Second, 20*time.Millisecond, "first portal never started planning:\n%s", out1)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	require.Equal(t, runpkg.Planning, state(), "the killed portal finished nothing")

	// Second portal: River rescues the orphaned job; the plan worker finds the run in
	// PLANNING and plans it again (planning has no side effects).
	second, out2 := startPortal(t, env, "--plan-timeout=3s", "--job-rescue-after=3s")
	require.Eventually(t, func() bool { return state() == runpkg.PendingApproval }, 2*time.Minute, 100*time.Millisecond, "run not recovered:\n%s", out2)
	require.NoError(t, second.Process.Signal(syscall.SIGTERM))
	require.NoError(t, second.Wait(), "graceful stop:\n%s", out2)

	count := func(q string, args ...any) int64 {
		var n int64
		require.NoError(t, gdb.Raw(q, args...).Scan(&n).Error)
		return n
	}
	require.EqualValues(t, 1, count("SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.planning'", r.ID))
	require.EqualValues(t, 1, count("SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.pending_approval'", r.ID))
	require.EqualValues(t, 1, count("SELECT count(*) FROM artifacts WHERE workspace_id = ? AND kind = 'plan_file'", r.WorkspaceID), "exactly one plan recorded")
	require.EqualValues(t, 1, count("SELECT count(*) FROM runs WHERE workspace_id = ?", r.WorkspaceID), "no duplicate run")
	var job struct {
		State   string
		Attempt int
	}
	require.NoError(t, gdb.Raw("SELECT state, attempt FROM river_job WHERE kind = 'run.plan' AND args->>'run_id' = ?", r.ID).Scan(&job).Error)
	require.Equal(t, "completed", job.State)
	require.Equal(t, 2, job.Attempt, fmt.Sprintf("the plan job was rescued once: %+v", job))
	var revision int
	require.NoError(t, gdb.Raw("SELECT plan_revision FROM runs WHERE id = ?", r.ID).Scan(&revision).Error)
	require.Equal(t, 2, revision, "planned again after the crash")
}

// TestPortalKilledWhileApplying: the portal dies (SIGKILL) while a run is RUNNING. On
// restart the run becomes APPLY_INTERRUPTED and is never applied again blindly.
func TestPortalKilledWhileApplying(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.NewURL(t)
	gdb, err := db.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() {
		if s, err := gdb.DB(); err == nil {
			s.Close()
		}
	})
	issuer := startTestIssuer(t)
	orgs, err := demo.Seed(ctx, gdb, issuer)
	require.NoError(t, err)
	keySpec := keyring.NewKeySpec("crash-2")
	keys, err := keyring.Parse(keySpec)
	require.NoError(t, err)
	sys, err := assemble.Build(ctx, assemble.Config{DB: gdb, DSN: dsn, Keys: keys, CatalogFS: catalogfiles.FS, Runner: mock.New(),
		BaseURL: "http://127.0.0.1:1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(sys.Close)
	var operator, admin, staging string
	require.NoError(t, gdb.Raw("SELECT id FROM users WHERE subject = 'acme-operator'").Scan(&operator).Error)
	require.NoError(t, gdb.Raw("SELECT id FROM users WHERE subject = 'acme-admin'").Scan(&admin).Error)
	require.NoError(t, gdb.Raw("SELECT id FROM environments WHERE organization_id = ? AND name = 'staging'", orgs["acme"]).Scan(&staging).Error)
	asOperator := authz.WithSubject(ctx, authz.Subject{UserID: operator, Name: "Olivia", OrganizationID: orgs["acme"], Role: authz.RoleOperator})
	asAdmin := authz.WithSubject(ctx, authz.Subject{UserID: admin, Name: "Adam", OrganizationID: orgs["acme"], Role: authz.RoleAdmin})
	r, err := sys.Runs.Request(asOperator, runpkg.Request{EnvironmentID: staging, Workspace: "crash-apply", Template: "bucket",
		Kind: runpkg.KindApply, Inputs: map[string]string{"name": "crash-apply"}})
	require.NoError(t, err)

	env := []string{"GANTRY_DATABASE_URL=" + dsn, "GANTRY_KEYS=" + keySpec, "GANTRY_OIDC_ISSUER=" + issuer,
		"GANTRY_OIDC_CLIENT_ID=gantry", "GANTRY_OIDC_CLIENT_SECRET=s", "GANTRY_BASE_URL=http://127.0.0.1:1", "GANTRY_ADDR=127.0.0.1:0"}
	state := func() runpkg.Run {
		var got runpkg.Run
		require.NoError(t, gdb.Where("id = ?", r.ID).Take(&got).Error)
		return got
	}
	first, out1 := startPortal(t, env, "--runner-delay=1s", "--apply-timeout=3s", "--job-rescue-after=3s")
	require.Eventually(t, func() bool { return state().State == runpkg.PendingApproval }, 30*time.Second, 20*time.Millisecond, "no plan:\n%s", out1)
	_, err = sys.Runs.Approve(asAdmin, r.ID, runpkg.Approval{Evidence: runpkg.EvidenceOf(state())})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return state().State == runpkg.Running }, 30*time.Second, 5*time.Millisecond, "apply never started:\n%s", out1)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	require.Equal(t, runpkg.Running, state().State)

	second, out2 := startPortal(t, env, "--apply-timeout=3s", "--job-rescue-after=3s")
	require.Eventually(t, func() bool { return state().State == runpkg.ApplyInterrupted }, 2*time.Minute, 100*time.Millisecond, "not interrupted:\n%s", out2)
	require.NoError(t, second.Process.Signal(syscall.SIGTERM))
	require.NoError(t, second.Wait(), out2)
	var versions int64
	require.NoError(t, gdb.Table("state_versions").Where("run_id = ?", r.ID).Count(&versions).Error)
	require.Zero(t, versions, "never applied blindly")
}

// startTestIssuer runs an OpenID Provider for the portal to discover at start.
func startTestIssuer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	issuer := "http://" + ln.Addr().String()
	idp, err := devidp.New(devidp.Config{Issuer: issuer, Clients: []devidp.Client{{ID: "gantry", Secret: "s", RedirectURIs: []string{"http://127.0.0.1:1/auth/callback"}}},
		Users: []devidp.User{{Subject: "u", Email: "u@example.test", Password: "p"}}})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(idp)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return issuer
}
