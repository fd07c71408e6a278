package web_test

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/bundle"
	"gantry/models/identity"
	"gantry/models/run"
	"gantry/models/state"
	"gantry/runner/tofurun"
)

// fleetCatalog is the shipped catalog plus a test template of many buckets.
func fleetCatalog(b testing.TB) map[string]string {
	lock, err := os.ReadFile("../catalog/templates/bucket/.terraform.lock.hcl")
	require.NoError(b, err)
	versions, err := os.ReadFile("../catalog/templates/bucket/module/versions.tf")
	require.NoError(b, err)
	return map[string]string{
		"templates/fleet/template.yaml": `name: fleet
version: 1.0.0
title: Bucket fleet
description: Many buckets, for measuring plans of a realistic size.
owner: platform
inputs:
  - name: prefix
    type: string
    required: true
    pattern: "^[a-z][a-z0-9-]{2,20}$"
  - name: size
    type: number
    default: 50
    min: 1
    max: 200
prices:
  sandbox_bucket: 2.3
irreversible: [sandbox_bucket]
rollback: Re-apply the previous inputs.
`,
		"templates/fleet/.terraform.lock.hcl": string(lock),
		"templates/fleet/module/versions.tf":  string(versions),
		"templates/fleet/module/variables.tf": "variable \"prefix\" {\n  type = string\n}\n\nvariable \"size\" {\n  type = number\n}\n",
		"templates/fleet/module/main.tf": `resource "sandbox_bucket" "this" {
  count          = var.size
  name           = "${var.prefix}-${count.index}"
  region         = "eu-west"
  versioning     = false
  retention_days = 0
  public         = false
}
`,
	}
}

// BenchmarkRequestToPendingApproval50 compares, for a 50-resource configuration, the time
// from submitting a request to PENDING_APPROVAL with a raw `tofu init && tofu plan -out`
// of the same configuration bundle on the same executor, and reports their ratio (the
// portal's overhead: validation, generation, encryption, queueing, credentials,
// show -json, storage). Run with -benchtime=1x: each iteration measures three runs.
func BenchmarkRequestToPendingApproval50(b *testing.B) {
	app := startLiveWith(b, liveOptions{catalog: catalogWith(b, fleetCatalog(b))})
	operator := app.LoggedIn(b, "operator@acme.test")
	staging := app.OrgEnvironmentID(b, "acme", "staging")
	var portal, raw []time.Duration
	for i := 0; i < 3; i++ {
		start := time.Now()
		id := requestRun(b, app.App, operator, url.Values{"template": {"fleet"}, "environment": {staging}, "workspace": {fmt.Sprintf("fleet-%d", i)},
			"kind": {"apply"}, "inputs.prefix": {fmt.Sprintf("fleet%d", i)}, "inputs.size": {"50"}})
		r := waitForState(b, app.App, id, run.PendingApproval)
		portal = append(portal, time.Since(start))
		require.Equal(b, 50, r.PlanSummary.Create)
		raw = append(raw, rawPlan(b, app, r))
	}
	median := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	p, q := median(portal), median(raw)
	b.ReportMetric(p.Seconds(), "portal_s")
	b.ReportMetric(q.Seconds(), "raw_s")
	b.ReportMetric(p.Seconds()/q.Seconds(), "ratio")
}

// rawPlan runs `tofu init` and `tofu plan -out` of r's config bundle on the same
// executor, with the same kind of credentials, and returns how long that took.
func rawPlan(b testing.TB, app liveApp, r run.Run) time.Duration {
	ctx := context.Background()
	cfg, _, err := app.System.Artifacts.Get(ctx, r.OrganizationID, r.ConfigArtifactID)
	require.NoError(b, err)
	files, err := bundle.FromTar(cfg)
	require.NoError(b, err)
	dir := b.TempDir()
	for name, body := range files.Files {
		path := filepath.Join(dir, name)
		require.NoError(b, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(b, os.WriteFile(path, body, 0o644))
	}
	user, pass, err := app.System.State.IssueCredentials(ctx, r.OrganizationID, r.WorkspaceID, r.ID, state.PhasePlan, 10*time.Minute)
	require.NoError(b, err)
	token, _, err := app.System.Identity.Mint(ctx, identity.Claims{OrganizationID: r.OrganizationID, EnvironmentID: r.EnvironmentID,
		WorkspaceID: r.WorkspaceID, RunID: r.ID, Phase: identity.PhasePlan})
	require.NoError(b, err)
	secrets := map[string]string{"TF_HTTP_USERNAME": user, "TF_HTTP_PASSWORD": pass, "SANDBOX_TOKEN": token}
	start := time.Now()
	for _, args := range [][]string{{"init", "-input=false", "-no-color", "-lockfile=readonly"}, {"plan", "-input=false", "-no-color", "-out=plan.bin"}} {
		code, explain, err := app.exec.Run(ctx, dir, tofurun.Command{Args: args, Secrets: secrets, Stdout: io.Discard, Stderr: io.Discard})
		require.NoError(b, err)
		require.Zero(b, code, explain)
	}
	return time.Since(start)
}
