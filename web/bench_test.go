//go:build !fast

// Live: needs runc (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package web_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
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
  labels = {
    managed_by = "gantry"
    template   = "fleet"
  }
}
`,
	}
}

// BenchmarkRequestToPendingApproval50 compares, for a 50-resource configuration in runc
// containers, the time from submitting a request to PENDING_APPROVAL with a raw
// `tofu init && tofu plan -out` of the same configuration bundle: a fresh work directory,
// the same provider mirror, no plugin cache, one container per command. Five pairs,
// interleaved, in one run; it reports the medians, their ratio (goal <= 1.1) and the
// median of each step (the portal's tofu commands from its job log; "other" is the rest:
// validation, generation, encryption, queueing, credentials, storage, gates). The first
// portal run of a node also unpacks the providers into the plugin cache; it is in the five.
// Run with -benchtime=1x.
func BenchmarkRequestToPendingApproval50(b *testing.B) {
	app := startRuncWith(b, runcOptions{catalog: catalogWith(b, fleetCatalog(b))})
	operator := app.LoggedIn(b, "operator@acme.test")
	staging := app.OrgEnvironmentID(b, "acme", "staging")
	const pairs = 5
	deadline := bench.Deadline(30 * time.Second)
	steps := map[string][]float64{}
	var portal, raw []float64
	timeouts := 0
	for i := range pairs {
		start := time.Now()
		id := app.App.RequestRun(b, operator, url.Values{"template": {"fleet"}, "environment": {staging}, "workspace": {fmt.Sprintf("fleet-%d", i)},
			"kind": {"apply"}, "inputs.prefix": {fmt.Sprintf("fleet%d", i)}, "inputs.size": {"50"}})
		r, waited := waitForStateWithin(b, app.App, id, run.PendingApproval, deadline)
		took := time.Since(start)
		portal = append(portal, took.Seconds())
		if waited.TimedOut {
			timeouts++
			continue // the figure is the deadline: a lower bound, and the summary says so
		}
		require.Equal(b, 50, r.PlanSummary.Create)
		var tofuTotal float64
		for name, secs := range tofuSteps(b, app.App, r) {
			steps[name] = append(steps[name], secs)
			tofuTotal += secs
		}
		steps["other"] = append(steps["other"], took.Seconds()-tofuTotal)
		init, plan, total := rawPlan(b, app, r)
		steps["raw_init"] = append(steps["raw_init"], init.Seconds())
		steps["raw_plan"] = append(steps["raw_plan"], plan.Seconds())
		raw = append(raw, total.Seconds())
	}
	bench.ReportTimeouts(b, timeouts)
	p := median(portal)
	b.ReportMetric(p, "portal_s")
	if len(raw) > 0 {
		q := median(raw)
		b.ReportMetric(q, "raw_s")
		b.ReportMetric(p/q, "ratio")
	}
	for name, v := range steps {
		b.ReportMetric(median(v), name+"_s")
	}
}

// median of v (v is sorted in place).
func median(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

// waitForStateWithin waits for the run to reach want, woken by its change notifications,
// for at most deadline; a run that ends elsewhere fails the benchmark (that is a bug, not
// a slow machine), a deadline passing is reported.
func waitForStateWithin(b testing.TB, app *webtest.App, runID string, want run.State, deadline time.Duration) (run.Run, bench.Waited) {
	b.Helper()
	var r run.Run
	require.NoError(b, app.DB.Where("id = ?", runID).Take(&r).Error)
	wake, stop := app.Server.Changes.Subscribe(r.OrganizationID, runID)
	defer stop()
	waited := bench.Until(wake, time.Second, deadline, func() bool {
		require.NoError(b, app.DB.Where("id = ?", runID).Take(&r).Error)
		return r.State == want || r.State.Terminal()
	})
	if !waited.TimedOut {
		require.Equal(b, want, r.State, "run ended %s: %s\n%s", r.State, r.StateReason, phaseLogs(b, app, r))
	}
	return r, waited
}

// tofuSteps reads the seconds of each tofu command from the run's plan log ("# tofu
// plan: exit 2 in 0.94 s").
func tofuSteps(b testing.TB, app *webtest.App, r run.Run) map[string]float64 {
	b.Helper()
	require.NotNil(b, r.PlanLogArtifactID)
	log, _, err := app.System.Artifacts.Get(b.Context(), r.OrganizationID, *r.PlanLogArtifactID)
	require.NoError(b, err)
	out := map[string]float64{}
	for _, m := range stepLine.FindAllStringSubmatch(string(log), -1) {
		secs, err := strconv.ParseFloat(m[2], 64)
		require.NoError(b, err)
		out[m[1]] += secs
	}
	require.NotEmpty(b, out, "no step times in the plan log:\n%s", log)
	return out
}

var stepLine = regexp.MustCompile(`(?m)^# tofu ([a-z]+): exit \d+ in ([0-9.]+) s$`)

// rawPlan runs `tofu init` and `tofu plan -out` of r's config bundle in a fresh directory,
// one runc container per command, with no plugin cache and the same kind of credentials,
// and returns how long each command and the whole took.
func rawPlan(b testing.TB, app runcApp, r run.Run) (init, plan, total time.Duration) {
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
	var took [2]time.Duration
	for i, args := range [][]string{{"init", "-input=false", "-no-color", "-lockfile=readonly"}, {"plan", "-input=false", "-no-color", "-out=plan.bin"}} {
		start := time.Now()
		var out strings.Builder
		code, explain, err := app.tofu.Run(ctx, dir, tofurun.Command{Args: args, Secrets: secrets, Stdout: &out, Stderr: &out})
		took[i] = time.Since(start)
		require.NoError(b, err)
		require.Zero(b, code, "%s\n%s", explain, out.String())
	}
	return took[0], took[1], took[0] + took[1]
}
