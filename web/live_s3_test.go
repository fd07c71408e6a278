//go:build !fast

// Live: needs live OpenTofu (bin/tofu), Gantry's S3 provider (built by the toolchain) and
// the pinned SeaweedFS (tools/seaweedfs) for an S3-compatible store with STS.

package web_test

import (
	"bytes"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
	"gantry/runner/targets/seaweed"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/runner/tofurun"
	"gantry/web"
)

// syncBuffer is a log several goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// TestS3TargetThroughThePortal (issue 38): an environment whose target is an
// S3-compatible store (SeaweedFS) whose STS trusts Gantry's issuer: a "Bucket on S3"
// requested through the portal is planned with a read-scoped token the store's STS
// exchanges for the read role, approved, applied with a write-scoped one (the write
// role: the bucket is created), verified, and destroyed (the approval covered a delete,
// so the role lets it). Gantry's S3 provider takes its credentials only from the
// standard AWS chain the phase's environment configures. No token is left in any file,
// plan, state, log, page, the database or the store's files and log.
func TestS3TargetThroughThePortal(t *testing.T) {
	t.Parallel()
	root := ".."
	tc := tofutest.Toolchain(t, root, t.TempDir(), testLogWriter{t})
	issuer, err := web.ListenIssuerTLS("127.0.0.1:0")
	require.NoError(t, err)
	exec := &recordingExecutor{Executor: &tofurun.Process{Tofu: tc.Tofu, CLIConfig: tc.CLIConfig}}
	app := webtest.StartWith(t, webtest.Options{IssuerTLS: issuer,
		Runner: tofurun.New(exec, t.TempDir(), &tofu.PluginCache{Mirror: tc.Mirror, Root: t.TempDir()})})
	ctx := t.Context()

	weed, err := seaweed.EnsureBinary(ctx, root, t.Output())
	require.NoError(t, err)
	write, read := seaweed.GantryRoles("acme", "gantry", map[string]string{"gantry_org": app.Orgs["acme"]})
	var storeLog syncBuffer
	storeDir := t.TempDir()
	store, err := seaweed.Start(ctx, seaweed.Options{Binary: weed, Log: &storeLog, Dir: storeDir,
		Providers: []seaweed.Provider{{Name: "gantry", Issuer: issuer.URL, Audiences: []string{seaweed.Audience}, CAPEM: issuer.CAPEM}},
		Roles:     []seaweed.Role{write, read}})
	require.NoError(t, err, "store log:\n%s", storeLog.Bytes())
	t.Cleanup(func() { require.NoError(t, store.Stop()) })

	admin := app.LoggedIn(t, "admin@acme.test")
	operator := app.LoggedIn(t, "operator@acme.test")
	owner := app.LoggedIn(t, "owner@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	resp := app.PostForm(t, admin, "/environments/"+dev, url.Values{"_csrf": {app.CSRF(t, admin)}, "name": {"development"},
		"tier": {"development"}, "executor": {"default"}, "requires_approval": {"on"}, "target_kind": {"aws"}, "target_audience": {seaweed.Audience},
		"target_aws_read_role_arn": {store.RoleARNs[read.Name]}, "target_aws_write_role_arn": {store.RoleARNs[write.Name]},
		"target_aws_region": {seaweed.Region}, "target_aws_sts_endpoint": {store.URL}, "target_aws_s3_endpoint": {store.URL}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)

	request := func(kind run.Kind) url.Values {
		return url.Values{"template": {"bucket-s3"}, "environment": {dev}, "workspace": {"reports-s3"}, "kind": {string(kind)},
			"inputs.name": {"reports"}, "inputs.versioning": {"true"}}
	}
	created := waitForState(t, app, app.RequestRun(t, operator, request(run.KindApply)), run.PendingApproval)
	require.Equal(t, 1, created.PlanSummary.Create, created.StateReason)
	approve(t, app, admin, created)
	created = waitForState(t, app, created.ID, run.Succeeded)
	require.Contains(t, string(created.Outputs), "gantry-"+created.WorkspaceID+"-reports")
	kube := kubeApp{App: app, exec: exec} // for phaseTokens
	tokens := kube.phaseTokens(t, created.ID)
	require.Equal(t, "read", claimsOf(t, tokens["plan"])["scope"])
	require.Equal(t, "write", claimsOf(t, tokens["apply"])["scope"])
	require.Equal(t, seaweed.Audience, claimsOf(t, tokens["apply"])["aud"])
	require.Equal(t, "read", claimsOf(t, tokens["verify"])["scope"], "verified with the read role")

	destroy := waitForState(t, app, app.RequestRun(t, operator, request(run.KindDestroy)), run.PendingApproval)
	require.Equal(t, 1, destroy.PlanSummary.Delete, "the bucket is in the state the destroy planned from")
	approve(t, app, owner, destroy)
	destroy = waitForState(t, app, destroy.ID, run.Succeeded)

	runs := []run.Run{created, destroy}
	scan := &leakScanner{t: t, canaries: exec.canaries(t), seen: map[string]int{}}
	for _, f := range exec.files() {
		scan.blob("workdir", f.name, f.data)
	}
	scan.artifacts(app, runs)
	scan.liveLogs(app, runs)
	scan.pages(app, admin, adminPages(runs, dev))
	scan.pages(app, operator, operatorPages(runs))
	scan.blob("database", "pg_dump", pgDump(t, app.DSN))
	scan.blob("store", "log", storeLog.Bytes())
	scan.tree("store", storeDir)
	for _, where := range []string{"workdir", "config_bundle", "plan_json", "apply_log", "state", "live_log", "page", "database", "store"} {
		require.Positive(t, scan.seen[where], "nothing was scanned in %s: the check could not fail", where)
	}
}
