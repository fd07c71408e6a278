//go:build !fast

// Live: needs runc (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package web_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"

	"gantry/models/bundle"
	"gantry/models/modules/modulestest"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/oci"
)

// configRecorder keeps the config bundle of every plan its runner is handed.
type configRecorder struct {
	runner.Runner
	mu      sync.Mutex
	configs [][]byte
}

func (r *configRecorder) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	r.mu.Lock()
	r.configs = append(r.configs, req.Config)
	r.mu.Unlock()
	return r.Runner.Plan(ctx, req)
}

// Health and Isolated are the wrapped runner's (the executors page asks for them).
func (r *configRecorder) Health(ctx context.Context) error {
	if h, ok := r.Runner.(interface{ Health(context.Context) error }); ok {
		return h.Health(ctx)
	}
	return nil
}

func (r *configRecorder) Isolated() bool {
	i, ok := r.Runner.(interface{ Isolated() bool })
	return ok && i.Isolated()
}

// TestLiveAllowlistedModuleInRunc: the team-bucket template calls the allowlisted
// labels module, served by a module registry over TLS on loopback (not the vendored
// copy). Gantry follows the registry protocol, fetches the archive once, checks its
// sha256 and bundles the module as a local one; the run plans and applies with
// OpenTofu in runc, whose container has no network: the bundle the runner got holds
// the module's files and no remote source, and the bucket carries the module's name
// and labels.
func TestLiveAllowlistedModuleInRunc(t *testing.T) {
	t.Parallel()
	cat, archive := fetchingCatalog(t)
	reg := modulestest.NewRegistry(t, map[string][]byte{labelsKey: archive})
	recorder := &configRecorder{}
	app := startRuncWith(t, runcOptions{limits: oci.Limits{MemoryBytes: 512 << 20, Pids: 256, CPUs: 1}, catalog: cat,
		moduleClient: reg.Client(), wrap: func(r runner.Runner) runner.Runner { recorder.Runner = r; return recorder }})
	require.True(t, app.tofu.NoEgress(), "the containers have only loopback")
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	const phase = 2 * time.Minute

	first := app.App.WaitForRun(t, app.App.RequestRun(t, operator, teamBucketForm(staging, "payments-invoices")), run.PendingApproval, phase)
	require.Equal(t, "tofu/oci", first.Runner)
	require.Equal(t, 1, first.PlanSummary.Create, first.StateReason+app.App.RunLogs(t, first))
	require.Equal(t, 1, reg.Hits("/.well-known/terraform.json"))
	require.Equal(t, 1, reg.Hits("/v1/modules/"+labelsKey+"/download"))
	require.Equal(t, 1, reg.Hits(modulestest.ArchivePath(labelsKey)))
	approve(t, app.App, admin, first)
	first = app.App.WaitForRun(t, first.ID, run.Succeeded, 2*phase)
	require.Equal(t, 3, reg.Requests(), "fetched once: the apply runs the approved bundle")

	// The bucket is named and labelled by the module.
	require.Equal(t, 1, app.cloudObjects(t, "bucket"))
	buckets, err := filepath.Glob(filepath.Join(app.cloudDir, "objects", "bucket", "*.json"))
	require.NoError(t, err)
	require.Len(t, buckets, 1)
	raw, err := os.ReadFile(buckets[0])
	require.NoError(t, err)
	var obj struct {
		Attributes struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"attributes"`
	}
	require.NoError(t, json.Unmarshal(raw, &obj))
	require.Equal(t, "payments-invoices", obj.Attributes.Name)
	require.Equal(t, map[string]string{"team": "payments", "cost_center": "cc-1042", "environment": first.EnvironmentID,
		"workspace": first.WorkspaceID, "managed_by": "gantry", "template": "team-bucket"}, obj.Attributes.Labels)
	require.Contains(t, string(first.Outputs), "https://payments-invoices.bucket.sandbox.internal")

	// The bundle the runner planned is the approved one: it holds the module's files,
	// and every module call in it is a path inside it, with no version.
	recorder.mu.Lock()
	configs := recorder.configs
	recorder.mu.Unlock()
	require.Len(t, configs, 1)
	require.Equal(t, first.ConfigDigest, bundle.Digest(configs[0]))
	b, err := bundle.FromTar(configs[0])
	require.NoError(t, err)
	dir := "modules/team-bucket/.modules/registry.acme.example-platform-labels-sandbox-" + strings.TrimPrefix(bundle.Digest(archive), "sha256:")[:12]
	for _, name := range []string{"main.tf", "variables.tf", "outputs.tf"} {
		src, err := os.ReadFile(filepath.Join("..", "catalog", "modules", "labels", name))
		require.NoError(t, err)
		require.Equal(t, string(src), string(b.Files[dir+"/"+name]), name)
	}
	calls := 0
	for name, body := range b.Files {
		if !strings.HasSuffix(name, ".tf") {
			continue
		}
		f, diags := hclsyntax.ParseConfig(body, name, hcl.InitialPos)
		require.False(t, diags.HasErrors(), diags.Error())
		for _, blk := range f.Body.(*hclsyntax.Body).Blocks {
			if blk.Type != "module" {
				continue
			}
			calls++
			v, diags := blk.Body.Attributes["source"].Expr.Value(nil)
			require.False(t, diags.HasErrors())
			require.Regexp(t, `^\.\.?/`, v.AsString(), "%s: module %s", name, blk.Labels[0])
			require.NotContains(t, blk.Body.Attributes, "version", "%s: module %s", name, blk.Labels[0])
		}
	}
	require.Equal(t, 2, calls, "the root's call of the template, the template's of the labels module")
	log := app.App.RunLogs(t, first)
	require.Contains(t, log, "Apply complete! Resources: 1 added")
	// tofu init, in a container with only loopback, found the module in the bundle.
	require.Contains(t, log, "- team-bucket.labels in "+dir+"\n")
	require.NotContains(t, log, "Downloading", "tofu init fetched nothing")
	require.NotContains(t, log, labelsSource)
	runcAssertNoLeftovers(t, app.exec)
}
