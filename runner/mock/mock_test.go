package mock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/bundle"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
)

const workspace = "ws-1"

// templateFiles reads a real catalog template's module into bundle paths
// modules/<name>/<file>.
func templateFiles(t *testing.T, name string) map[string][]byte {
	t.Helper()
	dir := filepath.Join("..", "..", "catalog", "templates", name, "module")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".tf") {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		files["modules/"+name+"/"+e.Name()] = body
	}
	require.NotEmpty(t, files)
	return files
}

// rootModule writes a main.tf like the one Gantry generates: one module call
// with literal inputs, and root outputs forwarding the module's.
func rootModule(module string, inputs map[string]string, outputs ...string) []byte {
	var b strings.Builder
	b.WriteString(`terraform {
  required_providers {
    sandbox = { source = "portal.local/sandbox/sandbox", version = "0.1.0" }
  }
  backend "http" {
    address = "https://gantry.example/state/ws-1"
  }
}

provider "sandbox" {}

`)
	fmt.Fprintf(&b, "module %q {\n  source = \"./modules/%s\"\n", module, module)
	keys := make([]string, 0, len(inputs))
	for k := range inputs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s = %s\n", k, inputs[k])
	}
	b.WriteString("}\n")
	for _, o := range outputs {
		fmt.Fprintf(&b, "\noutput %q {\n  value = module.%s.%s\n}\n", o, module, o)
	}
	return []byte(b.String())
}

func makeBundle(t *testing.T, module string, files map[string][]byte, inputs map[string]string, outputs ...string) []byte {
	t.Helper()
	all := map[string][]byte{
		"main.tf":             rootModule(module, inputs, outputs...),
		".terraform.lock.hcl": []byte("# lock\n"),
	}
	for k, v := range files {
		all[k] = v
	}
	tarball, _, err := bundle.Bundle{Files: all}.Tar()
	require.NoError(t, err)
	return tarball
}

func postgresInputs() map[string]string {
	return map[string]string{
		"name": `"orders"`, "engine_version": `"16"`, "size": `"small"`,
		"storage_gb": "20", "backup_retention_days": "7", "network_cidr": `"10.20.0.0/16"`,
	}
}

func postgresBundle(t *testing.T, change func(map[string]string)) []byte {
	t.Helper()
	in := postgresInputs()
	if change != nil {
		change(in)
	}
	return makeBundle(t, "postgres", templateFiles(t, "postgres"), in, "endpoint", "database_id")
}

// planJSON is the part of `tofu show -json` the tests read.
type planJSON struct {
	FormatVersion    string `json:"format_version"`
	TerraformVersion string `json:"terraform_version"`
	GantrySimulated  bool   `json:"gantry_simulated"`
	ResourceChanges  []struct {
		Address       string `json:"address"`
		ModuleAddress string `json:"module_address"`
		Type          string `json:"type"`
		Index         *int   `json:"index"`
		ProviderName  string `json:"provider_name"`
		ActionReason  string `json:"action_reason"`
		Change        struct {
			Actions      []string       `json:"actions"`
			Before       map[string]any `json:"before"`
			After        map[string]any `json:"after"`
			AfterUnknown map[string]any `json:"after_unknown"`
			ReplacePaths [][]any        `json:"replace_paths"`
		} `json:"change"`
	} `json:"resource_changes"`
	OutputChanges map[string]struct {
		Actions      []string `json:"actions"`
		AfterUnknown any      `json:"after_unknown"`
	} `json:"output_changes"`
	Configuration struct {
		RootModule struct {
			ModuleCalls map[string]struct {
				Source string `json:"source"`
				Module struct {
					Resources []struct {
						Address     string `json:"address"`
						Expressions map[string]struct {
							References    []string        `json:"references"`
							ConstantValue json.RawMessage `json:"constant_value"`
						} `json:"expressions"`
					} `json:"resources"`
				} `json:"module"`
			} `json:"module_calls"`
		} `json:"root_module"`
	} `json:"configuration"`
}

func decodePlan(t *testing.T, res runner.PlanResult) planJSON {
	t.Helper()
	var p planJSON
	require.NoError(t, json.Unmarshal(res.PlanJSON, &p))
	return p
}

// actions maps each address to its actions, joined by ",".
func (p planJSON) actions() map[string]string {
	out := map[string]string{}
	for _, rc := range p.ResourceChanges {
		out[rc.Address] = strings.Join(rc.Change.Actions, ",")
	}
	return out
}

func plan(t *testing.T, kind runner.Kind, config, prior []byte) runner.PlanResult {
	t.Helper()
	res, err := mock.New().Plan(context.Background(), runner.PlanRequest{RunID: "run-1", WorkspaceID: workspace, Kind: kind, Config: config, PriorState: prior})
	require.NoError(t, err)
	return res
}

func apply(t *testing.T, config []byte, pr runner.PlanResult, prior []byte) runner.ApplyResult {
	t.Helper()
	res, err := mock.New().Apply(context.Background(), runner.ApplyRequest{RunID: "run-1", WorkspaceID: workspace, Config: config, PlanFile: pr.PlanFile, PriorState: prior})
	require.NoError(t, err)
	return res
}

// stateJSON is the part of a state v4 file the tests read.
type stateJSON struct {
	Version          int    `json:"version"`
	TerraformVersion string `json:"terraform_version"`
	Serial           int    `json:"serial"`
	Lineage          string `json:"lineage"`
	Outputs          map[string]struct {
		Value any `json:"value"`
		Type  any `json:"type"`
	} `json:"outputs"`
	Resources []struct {
		Module    string `json:"module"`
		Mode      string `json:"mode"`
		Type      string `json:"type"`
		Name      string `json:"name"`
		Provider  string `json:"provider"`
		Instances []struct {
			IndexKey     *int           `json:"index_key"`
			Attributes   map[string]any `json:"attributes"`
			Dependencies []string       `json:"dependencies"`
		} `json:"instances"`
	} `json:"resources"`
}

func decodeState(t *testing.T, state []byte) stateJSON {
	t.Helper()
	var s stateJSON
	require.NoError(t, json.Unmarshal(state, &s))
	return s
}

// attrs finds the attributes of a resource (first instance) in a state.
func (s stateJSON) attrs(typ string) map[string]any {
	for _, r := range s.Resources {
		if r.Type == typ {
			return r.Instances[0].Attributes
		}
	}
	return nil
}

// appliedPostgres plans and applies the postgres template on an empty state.
func appliedPostgres(t *testing.T) ([]byte, runner.ApplyResult) {
	t.Helper()
	cfg := postgresBundle(t, nil)
	return cfg, apply(t, cfg, plan(t, runner.KindApply, cfg, nil), nil)
}

func TestNameAndSimulated(t *testing.T) {
	t.Parallel()
	r := mock.New()
	require.Equal(t, "mock", r.Name())
	require.True(t, r.Simulated())
}

func TestPostgresFirstPlanCreatesThreeResources(t *testing.T) {
	t.Parallel()
	cfg := postgresBundle(t, nil)
	res := plan(t, runner.KindApply, cfg, nil)
	require.True(t, res.HasChanges)

	p := decodePlan(t, res)
	require.Equal(t, "1.2", p.FormatVersion)
	require.Equal(t, "1.10.10", p.TerraformVersion)
	require.True(t, p.GantrySimulated)
	require.Equal(t, map[string]string{
		"module.postgres.sandbox_database.this": "create",
		"module.postgres.sandbox_network.this":  "create",
		"module.postgres.sandbox_subnet.this":   "create",
	}, p.actions())
	// Sorted by address.
	require.Equal(t, "module.postgres.sandbox_database.this", p.ResourceChanges[0].Address)
	for _, rc := range p.ResourceChanges {
		require.Equal(t, "module.postgres", rc.ModuleAddress)
		require.Equal(t, "portal.local/sandbox/sandbox", rc.ProviderName)
		require.Nil(t, rc.Change.Before)
		require.Equal(t, true, rc.Change.AfterUnknown["id"], rc.Address)
		require.NotContains(t, rc.Change.After, "id")
	}
	db := p.ResourceChanges[0].Change
	require.Equal(t, true, db.AfterUnknown["network_id"])
	require.Equal(t, true, db.AfterUnknown["subnet_id"])
	require.Equal(t, true, db.AfterUnknown["endpoint"])
	require.NotContains(t, db.After, "network_id")
	require.Equal(t, "16", db.After["engine_version"])
	require.Equal(t, float64(20), db.After["storage_gb"])
	require.Equal(t, true, db.After["encrypted"])
	require.Equal(t, map[string]any{"managed_by": "gantry", "template": "postgres"}, db.After["labels"])
	subnet := p.ResourceChanges[2].Change
	require.Equal(t, "10.20.1.0/24", subnet.After["cidr"])
	require.Equal(t, "orders-db", subnet.After["name"])
	require.Equal(t, "orders-net", p.ResourceChanges[1].Change.After["name"])
	require.Equal(t, []string{"create"}, p.OutputChanges["endpoint"].Actions)
	require.Equal(t, true, p.OutputChanges["endpoint"].AfterUnknown)

	log := string(res.Log)
	require.True(t, strings.HasPrefix(log, "SIMULATED by the MockTofuRunner: nothing was planned against real infrastructure.\n"), log)
	require.Contains(t, log, "# module.postgres.sandbox_database.this will be created")
	require.Contains(t, log, "Plan: 3 to add, 0 to change, 0 to destroy.")

	again := plan(t, runner.KindApply, cfg, nil)
	require.Equal(t, res.PlanJSON, again.PlanJSON)
	require.Equal(t, res.PlanFile, again.PlanFile)
	require.Equal(t, res.Log, again.Log)
}

func TestApplyWritesStateAndSamePlanIsNoOp(t *testing.T) {
	t.Parallel()
	cfg, res := appliedPostgres(t)
	s := decodeState(t, res.State)
	require.Equal(t, 4, s.Version)
	require.Equal(t, "1.10.10", s.TerraformVersion)
	require.Equal(t, 1, s.Serial)
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, s.Lineage)
	require.Len(t, s.Resources, 3)
	for _, r := range s.Resources {
		require.Equal(t, "module.postgres", r.Module)
		require.Equal(t, "managed", r.Mode)
		require.Equal(t, `provider["portal.local/sandbox/sandbox"]`, r.Provider)
	}

	net, subnet, db := s.attrs("sandbox_network"), s.attrs("sandbox_subnet"), s.attrs("sandbox_database")
	require.Regexp(t, `^net-[0-9a-f]{8}$`, net["id"])
	require.Regexp(t, `^subnet-[0-9a-f]{8}$`, subnet["id"])
	require.Equal(t, net["id"], subnet["network_id"])
	require.Equal(t, net["id"], db["network_id"])
	require.Equal(t, subnet["id"], db["subnet_id"])
	require.Equal(t, "orders.db.sandbox.internal:5432", db["endpoint"])
	for _, r := range s.Resources {
		if r.Type == "sandbox_database" {
			require.Equal(t, []string{"module.postgres.sandbox_network.this", "module.postgres.sandbox_subnet.this"}, r.Instances[0].Dependencies)
		}
	}

	require.Equal(t, "orders.db.sandbox.internal:5432", s.Outputs["endpoint"].Value)
	require.Equal(t, "string", s.Outputs["endpoint"].Type)
	var outputs map[string]struct {
		Sensitive bool `json:"sensitive"`
		Value     any  `json:"value"`
	}
	require.NoError(t, json.Unmarshal(res.Outputs, &outputs))
	require.Equal(t, "orders.db.sandbox.internal:5432", outputs["endpoint"].Value)
	require.Equal(t, db["id"], outputs["database_id"].Value)

	log := string(res.Log)
	require.True(t, strings.HasPrefix(log, "SIMULATED by the MockTofuRunner"), log)
	require.Contains(t, log, "Apply complete! Resources: 3 added, 0 changed, 0 destroyed.")

	// Deterministic apply.
	_, res2 := appliedPostgres(t)
	require.Equal(t, res.State, res2.State)

	again := plan(t, runner.KindApply, cfg, res.State)
	require.False(t, again.HasChanges)
	require.Equal(t, map[string]string{
		"module.postgres.sandbox_database.this": "no-op",
		"module.postgres.sandbox_network.this":  "no-op",
		"module.postgres.sandbox_subnet.this":   "no-op",
	}, decodePlan(t, again).actions())
	require.Contains(t, string(again.Log), "No changes. Your infrastructure matches the configuration.")
}

func TestEngineVersionChangeReplacesTheDatabase(t *testing.T) {
	t.Parallel()
	_, first := appliedPostgres(t)
	cfg := postgresBundle(t, func(in map[string]string) { in["engine_version"] = `"17"` })
	res := plan(t, runner.KindApply, cfg, first.State)
	p := decodePlan(t, res)
	require.Equal(t, map[string]string{
		"module.postgres.sandbox_database.this": "delete,create",
		"module.postgres.sandbox_network.this":  "no-op",
		"module.postgres.sandbox_subnet.this":   "no-op",
	}, p.actions())
	db := p.ResourceChanges[0]
	require.Equal(t, "replace_because_cannot_update", db.ActionReason)
	require.Equal(t, [][]any{{"engine_version"}}, db.Change.ReplacePaths)
	require.Equal(t, true, db.Change.AfterUnknown["id"])
	require.Equal(t, "16", db.Change.Before["engine_version"])
	require.Contains(t, string(res.Log), "# module.postgres.sandbox_database.this must be replaced")
	require.Contains(t, string(res.Log), `~ engine_version = "16" -> "17" # forces replacement`)
	require.Contains(t, string(res.Log), "Plan: 1 to add, 0 to change, 1 to destroy.")

	second := apply(t, cfg, res, first.State)
	s := decodeState(t, second.State)
	require.Equal(t, 2, s.Serial)
	require.Equal(t, decodeState(t, first.State).Lineage, s.Lineage)
	require.NotEqual(t, decodeState(t, first.State).attrs("sandbox_database")["id"], s.attrs("sandbox_database")["id"], "a replacement gets a new id")
	require.Equal(t, "17", s.attrs("sandbox_database")["engine_version"])
	require.Contains(t, string(second.Log), "Apply complete! Resources: 1 added, 0 changed, 1 destroyed.")
}

func TestSizeChangeUpdatesInPlace(t *testing.T) {
	t.Parallel()
	_, first := appliedPostgres(t)
	cfg := postgresBundle(t, func(in map[string]string) { in["size"] = `"medium"` })
	res := plan(t, runner.KindApply, cfg, first.State)
	p := decodePlan(t, res)
	require.Equal(t, "update", p.actions()["module.postgres.sandbox_database.this"])
	db := p.ResourceChanges[0]
	require.Empty(t, db.ActionReason)
	require.Nil(t, db.Change.ReplacePaths)
	require.Equal(t, "medium", db.Change.After["size"])
	require.Equal(t, decodeState(t, first.State).attrs("sandbox_database")["id"], db.Change.After["id"], "an update keeps the id")
	require.Contains(t, string(res.Log), "Plan: 0 to add, 1 to change, 0 to destroy.")

	second := apply(t, cfg, res, first.State)
	require.Equal(t, "medium", decodeState(t, second.State).attrs("sandbox_database")["size"])
	require.Contains(t, string(second.Log), "Apply complete! Resources: 0 added, 1 changed, 0 destroyed.")
}

func TestCreateBeforeDestroyReplacesCreateFirst(t *testing.T) {
	t.Parallel()
	files := templateFiles(t, "postgres")
	main := string(files["modules/postgres/main.tf"])
	withLifecycle := strings.Replace(main, "  encrypted             = true\n", "  encrypted             = true\n\n  lifecycle {\n    create_before_destroy = true\n  }\n", 1)
	require.NotEqual(t, main, withLifecycle, "the test's edit of the template must apply")
	files["modules/postgres/main.tf"] = []byte(withLifecycle)

	first := makeBundle(t, "postgres", files, postgresInputs(), "endpoint")
	applied := apply(t, first, plan(t, runner.KindApply, first, nil), nil)
	in := postgresInputs()
	in["engine_version"] = `"17"`
	second := makeBundle(t, "postgres", files, in, "endpoint")
	res := plan(t, runner.KindApply, second, applied.State)
	p := decodePlan(t, res)
	require.Equal(t, "create,delete", p.actions()["module.postgres.sandbox_database.this"])
	require.Equal(t, "replace_because_cannot_update", p.ResourceChanges[0].ActionReason)
	require.Equal(t, [][]any{{"engine_version"}}, p.ResourceChanges[0].Change.ReplacePaths)
	require.Contains(t, string(res.Log), "+/- resource \"sandbox_database\" \"this\"")

	out := apply(t, second, res, applied.State)
	require.Contains(t, string(out.Log), "(deposed object)")
	require.Contains(t, string(out.State), `"create_before_destroy": true`)
}

func networkBundle(t *testing.T, subnets int) []byte {
	t.Helper()
	return makeBundle(t, "network", templateFiles(t, "network"), map[string]string{
		"name": `"core"`, "cidr": `"10.0.0.0/16"`, "region": `"eu-west"`, "subnet_count": fmt.Sprint(subnets),
	}, "network_id", "subnet_ids")
}

func TestSubnetCountShrinkDeletesTheLastSubnet(t *testing.T) {
	t.Parallel()
	three := networkBundle(t, 3)
	firstPlan := plan(t, runner.KindApply, three, nil)
	p := decodePlan(t, firstPlan)
	require.Equal(t, map[string]string{
		"module.network.sandbox_network.this":   "create",
		"module.network.sandbox_subnet.this[0]": "create",
		"module.network.sandbox_subnet.this[1]": "create",
		"module.network.sandbox_subnet.this[2]": "create",
	}, p.actions())
	require.Equal(t, 2, *p.ResourceChanges[3].Index)
	require.Equal(t, "10.0.2.0/24", p.ResourceChanges[3].Change.After["cidr"])
	require.Equal(t, "core-2", p.ResourceChanges[3].Change.After["name"])

	first := apply(t, three, firstPlan, nil)
	s := decodeState(t, first.State)
	require.Len(t, s.Resources, 2)
	require.Len(t, s.Resources[1].Instances, 3)
	require.Equal(t, 2, *s.Resources[1].Instances[2].IndexKey)
	ids := s.Outputs["subnet_ids"].Value.([]any)
	require.Len(t, ids, 3)
	require.Equal(t, s.Resources[1].Instances[0].Attributes["id"], ids[0])
	require.Equal(t, []any{"tuple", []any{"string", "string", "string"}}, s.Outputs["subnet_ids"].Type)

	two := networkBundle(t, 2)
	res := plan(t, runner.KindApply, two, first.State)
	p = decodePlan(t, res)
	require.Equal(t, map[string]string{
		"module.network.sandbox_network.this":   "no-op",
		"module.network.sandbox_subnet.this[0]": "no-op",
		"module.network.sandbox_subnet.this[1]": "no-op",
		"module.network.sandbox_subnet.this[2]": "delete",
	}, p.actions())
	require.Equal(t, "delete_because_count_index", p.ResourceChanges[3].ActionReason)
	require.Nil(t, p.ResourceChanges[3].Change.After)
	require.Equal(t, []string{"update"}, p.OutputChanges["subnet_ids"].Actions)
	require.Contains(t, string(res.Log), "(because index [2] is out of range for count)")
	require.Contains(t, string(res.Log), "Plan: 0 to add, 0 to change, 1 to destroy.")

	second := apply(t, two, res, first.State)
	require.Len(t, decodeState(t, second.State).Resources[1].Instances, 2)
}

func TestNetworkReplacementCascadesToTheSubnet(t *testing.T) {
	t.Parallel()
	first := networkBundle(t, 1)
	applied := apply(t, first, plan(t, runner.KindApply, first, nil), nil)
	moved := makeBundle(t, "network", templateFiles(t, "network"), map[string]string{
		"name": `"core"`, "cidr": `"10.0.0.0/16"`, "region": `"us-east"`, "subnet_count": "1",
	}, "network_id")
	p := decodePlan(t, plan(t, runner.KindApply, moved, applied.State))
	require.Equal(t, map[string]string{
		"module.network.sandbox_network.this":   "delete,create",
		"module.network.sandbox_subnet.this[0]": "delete,create",
	}, p.actions())
	require.Equal(t, [][]any{{"region"}}, p.ResourceChanges[0].Change.ReplacePaths)
	// The subnet's network_id refers to the new network's id: unknown, so it forces replacement.
	require.Equal(t, [][]any{{"network_id"}}, p.ResourceChanges[1].Change.ReplacePaths)
	require.Equal(t, true, p.ResourceChanges[1].Change.AfterUnknown["network_id"])
	// The output that lost its module output is deleted.
	require.Equal(t, []string{"delete"}, p.OutputChanges["subnet_ids"].Actions)
}

func TestDestroyDeletesEverything(t *testing.T) {
	t.Parallel()
	cfg, first := appliedPostgres(t)
	res := plan(t, runner.KindDestroy, cfg, first.State)
	require.True(t, res.HasChanges)
	p := decodePlan(t, res)
	require.Equal(t, map[string]string{
		"module.postgres.sandbox_database.this": "delete",
		"module.postgres.sandbox_network.this":  "delete",
		"module.postgres.sandbox_subnet.this":   "delete",
	}, p.actions())
	for _, rc := range p.ResourceChanges {
		require.Empty(t, rc.ActionReason)
	}
	require.Equal(t, []string{"delete"}, p.OutputChanges["endpoint"].Actions)
	require.Contains(t, string(res.Log), "Plan: 0 to add, 0 to change, 3 to destroy.")

	out := apply(t, cfg, res, first.State)
	s := decodeState(t, out.State)
	require.Equal(t, 2, s.Serial)
	require.Empty(t, s.Resources)
	require.Empty(t, s.Outputs)
	require.JSONEq(t, `{}`, string(out.Outputs))
	require.Contains(t, string(out.Log), "Destroy complete! Resources: 3 destroyed.")

	empty := plan(t, runner.KindDestroy, cfg, out.State)
	require.False(t, empty.HasChanges)
}

func TestPlanOnlyPlansLikeApply(t *testing.T) {
	t.Parallel()
	cfg := postgresBundle(t, nil)
	require.Equal(t, plan(t, runner.KindApply, cfg, nil).PlanJSON, plan(t, runner.KindPlanOnly, cfg, nil).PlanJSON)
}

// TestRefreshOnlyFindsNoDrift: the mock has no live cloud, so a refresh-only plan (a
// drift check, a codification) of an applied workspace, even of a configuration that
// would change it, finds nothing and says why.
func TestRefreshOnlyFindsNoDrift(t *testing.T) {
	t.Parallel()
	_, first := appliedPostgres(t)
	changed := postgresBundle(t, func(in map[string]string) { in["size"] = `"large"` })
	res := plan(t, runner.KindRefreshOnly, changed, first.State)
	require.False(t, res.HasChanges)
	require.Empty(t, decodePlan(t, res).actions())
	require.Contains(t, string(res.Log), "never finds drift (SIMULATED)")
	drift, err := run.DriftOf(res.PlanJSON)
	require.NoError(t, err)
	require.Empty(t, drift)
}

func TestStalePlanIsRefused(t *testing.T) {
	t.Parallel()
	_, first := appliedPostgres(t) // serial 1
	sizeCfg := postgresBundle(t, func(in map[string]string) { in["size"] = `"medium"` })
	stale := plan(t, runner.KindApply, sizeCfg, first.State) // planned against serial 1
	versionCfg := postgresBundle(t, func(in map[string]string) { in["storage_gb"] = "50" })
	second := apply(t, versionCfg, plan(t, runner.KindApply, versionCfg, first.State), first.State) // serial 2
	require.Equal(t, 2, decodeState(t, second.State).Serial)

	_, err := mock.New().Apply(context.Background(), runner.ApplyRequest{WorkspaceID: workspace, Config: sizeCfg, PlanFile: stale.PlanFile, PriorState: second.State})
	require.ErrorContains(t, err, "stale")

	// A plan made on an empty state is stale once a state exists.
	fresh := postgresBundle(t, nil)
	early := plan(t, runner.KindApply, fresh, nil)
	_, err = mock.New().Apply(context.Background(), runner.ApplyRequest{WorkspaceID: workspace, Config: fresh, PlanFile: early.PlanFile, PriorState: first.State})
	require.ErrorContains(t, err, "stale")
}

func TestApplyRefusesAnotherBundleOrWorkspace(t *testing.T) {
	t.Parallel()
	cfg := postgresBundle(t, nil)
	res := plan(t, runner.KindApply, cfg, nil)
	other := postgresBundle(t, func(in map[string]string) { in["size"] = `"large"` })
	_, err := mock.New().Apply(context.Background(), runner.ApplyRequest{WorkspaceID: workspace, Config: other, PlanFile: res.PlanFile})
	require.ErrorContains(t, err, "different config bundle")
	_, err = mock.New().Apply(context.Background(), runner.ApplyRequest{WorkspaceID: "ws-2", Config: cfg, PlanFile: res.PlanFile})
	require.ErrorContains(t, err, "workspace ws-1, not ws-2")
	_, err = mock.New().Apply(context.Background(), runner.ApplyRequest{WorkspaceID: workspace, Config: cfg, PlanFile: []byte(`PK\x03\x04`)})
	require.ErrorContains(t, err, "not a mock runner plan")
}

func TestConfigurationShowsReferences(t *testing.T) {
	t.Parallel()
	p := decodePlan(t, plan(t, runner.KindApply, postgresBundle(t, nil), nil))
	call := p.Configuration.RootModule.ModuleCalls["postgres"]
	require.Equal(t, "./modules/postgres", call.Source)
	refs := map[string][]string{}
	for _, r := range call.Module.Resources {
		for _, e := range r.Expressions {
			refs[r.Address] = append(refs[r.Address], e.References...)
		}
	}
	require.Contains(t, refs["sandbox_database.this"], "sandbox_network.this")
	require.Contains(t, refs["sandbox_database.this"], "sandbox_network.this.id")
	require.Contains(t, refs["sandbox_database.this"], "sandbox_subnet.this")
	require.Contains(t, refs["sandbox_subnet.this"], "sandbox_network.this")
	require.NotContains(t, refs["sandbox_network.this"], "sandbox_subnet.this")
	for _, r := range call.Module.Resources {
		if r.Address == "sandbox_database.this" {
			require.JSONEq(t, `"postgres"`, string(r.Expressions["engine"].ConstantValue))
			require.Equal(t, []string{"var.engine_version"}, r.Expressions["engine_version"].References)
		}
	}
}

func TestBucketTemplate(t *testing.T) {
	t.Parallel()
	cfg := makeBundle(t, "bucket", templateFiles(t, "bucket"), map[string]string{
		"name": `"logs"`, "versioning": "true", "retention_days": "30", "region": `"eu-west"`,
	}, "url")
	out := apply(t, cfg, plan(t, runner.KindApply, cfg, nil), nil)
	s := decodeState(t, out.State)
	require.Equal(t, "https://logs.bucket.sandbox.internal", s.attrs("sandbox_bucket")["url"])
	require.Regexp(t, `^bkt-[0-9a-f]{8}$`, s.attrs("sandbox_bucket")["id"])
	require.Equal(t, false, s.attrs("sandbox_bucket")["public"])
}

func TestErrorsNameFileAndLine(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		main string
		want string
	}{
		"unknown function": {
			main: "resource \"sandbox_network\" \"this\" {\n  name = foo(var.name)\n}\n",
			want: `modules/postgres/main.tf:2: unsupported function "foo" in the mock runner`,
		},
		"undeclared variable": {
			main: "resource \"sandbox_network\" \"this\" {\n  name = var.nope\n}\n",
			want: `modules/postgres/main.tf:2: reference to undeclared input variable "nope"`,
		},
		"unknown attribute": {
			main: "resource \"sandbox_network\" \"this\" {\n  colour = \"red\"\n}\n",
			want: `modules/postgres/main.tf:2: sandbox_network.this: unsupported argument "colour"`,
		},
		"unknown type": {
			main: "resource \"sandbox_queue\" \"this\" {\n}\n",
			want: `modules/postgres/main.tf:1: unsupported resource type "sandbox_queue"`,
		},
		"data source": {
			main: "data \"sandbox_network\" \"this\" {\n}\n",
			want: `modules/postgres/main.tf:1: "data" blocks are not supported by the mock runner`,
		},
		"cycle": {
			main: "resource \"sandbox_network\" \"this\" {\n  name = sandbox_subnet.this.id\n}\nresource \"sandbox_subnet\" \"this\" {\n  name = sandbox_network.this.id\n}\n",
			want: `dependency cycle between sandbox_network.this, sandbox_subnet.this`,
		},
		"wrong type": {
			main: "resource \"sandbox_database\" \"this\" {\n  storage_gb = \"lots\"\n}\n",
			want: `modules/postgres/main.tf:2: sandbox_database.this: argument "storage_gb": number is required`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := templateFiles(t, "postgres")
			files["modules/postgres/main.tf"] = []byte(tc.main)
			delete(files, "modules/postgres/outputs.tf")
			cfg := makeBundle(t, "postgres", files, postgresInputs())
			_, err := mock.New().Plan(context.Background(), runner.PlanRequest{WorkspaceID: workspace, Kind: runner.KindApply, Config: cfg})
			require.ErrorContains(t, err, tc.want)
		})
	}

	in := postgresInputs()
	delete(in, "size")
	cfg := makeBundle(t, "postgres", templateFiles(t, "postgres"), in)
	_, err := mock.New().Plan(context.Background(), runner.PlanRequest{WorkspaceID: workspace, Kind: runner.KindApply, Config: cfg})
	require.ErrorContains(t, err, `module "postgres": missing required input "size"`)
}

func TestVerifyAlwaysConverges(t *testing.T) {
	t.Parallel()
	_, first := appliedPostgres(t)
	res, err := mock.New().Verify(context.Background(), runner.VerifyRequest{WorkspaceID: workspace, State: first.State})
	require.NoError(t, err)
	require.True(t, res.Converged)
	require.Empty(t, res.DriftJSON)
	require.True(t, strings.HasPrefix(string(res.Log), "SIMULATED"))

	res, err = mock.New().Verify(context.Background(), runner.VerifyRequest{WorkspaceID: workspace, State: []byte("{not json")})
	require.Error(t, err)
	require.False(t, res.Converged)
}

// editedPostgres returns the postgres template with main.tf edited by replace.
func editedPostgres(t *testing.T, old, new string) map[string][]byte {
	t.Helper()
	files := templateFiles(t, "postgres")
	main := string(files["modules/postgres/main.tf"])
	edited := strings.Replace(main, old, new, 1)
	require.NotEqual(t, main, edited, "the test's edit of the template must apply")
	files["modules/postgres/main.tf"] = []byte(edited)
	return files
}

func TestLifecycleIgnoreChangesAndPreventDestroy(t *testing.T) {
	t.Parallel()
	const anchor = "  encrypted             = true\n"
	ignoring := editedPostgres(t, anchor, anchor+"  lifecycle {\n    ignore_changes = [size]\n  }\n")
	first := makeBundle(t, "postgres", ignoring, postgresInputs())
	applied := apply(t, first, plan(t, runner.KindApply, first, nil), nil)
	in := postgresInputs()
	in["size"] = `"large"`
	res := plan(t, runner.KindApply, makeBundle(t, "postgres", ignoring, in), applied.State)
	require.False(t, res.HasChanges)

	protected := editedPostgres(t, anchor, anchor+"  lifecycle {\n    prevent_destroy = true\n  }\n")
	first = makeBundle(t, "postgres", protected, postgresInputs())
	applied = apply(t, first, plan(t, runner.KindApply, first, nil), nil)
	in = postgresInputs()
	in["engine_version"] = `"17"`
	_, err := mock.New().Plan(context.Background(), runner.PlanRequest{WorkspaceID: workspace, Kind: runner.KindApply, Config: makeBundle(t, "postgres", protected, in), PriorState: applied.State})
	require.ErrorContains(t, err, "modules/postgres/main.tf:19: instance cannot be destroyed: resource module.postgres.sandbox_database.this has lifecycle.prevent_destroy set")
	_, err = mock.New().Plan(context.Background(), runner.PlanRequest{WorkspaceID: workspace, Kind: runner.KindDestroy, Config: first, PriorState: applied.State})
	require.ErrorContains(t, err, "instance cannot be destroyed")
}

func TestApplyRunsInDependencyOrder(t *testing.T) {
	t.Parallel()
	cfg, first := appliedPostgres(t)
	log := string(first.Log)
	network := strings.Index(log, "module.postgres.sandbox_network.this: Creating...")
	subnet := strings.Index(log, "module.postgres.sandbox_subnet.this: Creating...")
	database := strings.Index(log, "module.postgres.sandbox_database.this: Creating...")
	require.True(t, network >= 0 && network < subnet && subnet < database, log)

	destroyed := string(apply(t, cfg, plan(t, runner.KindDestroy, cfg, first.State), first.State).Log)
	network = strings.Index(destroyed, "module.postgres.sandbox_network.this: Destroying...")
	database = strings.Index(destroyed, "module.postgres.sandbox_database.this: Destroying...")
	require.True(t, database >= 0 && database < network, destroyed)
}

func TestRemovedModuleIsDeletedWithItsReason(t *testing.T) {
	t.Parallel()
	_, first := appliedPostgres(t)
	bucket := makeBundle(t, "bucket", templateFiles(t, "bucket"), map[string]string{
		"name": `"logs"`, "versioning": "true", "retention_days": "30", "region": `"eu-west"`,
	})
	p := decodePlan(t, plan(t, runner.KindApply, bucket, first.State))
	require.Equal(t, "create", p.actions()["module.bucket.sandbox_bucket.this"])
	for _, rc := range p.ResourceChanges {
		if rc.ModuleAddress == "module.postgres" {
			require.Equal(t, []string{"delete"}, rc.Change.Actions)
			require.Equal(t, "delete_because_no_module", rc.ActionReason)
		}
	}
}

// lineWriter records each write it gets.
type lineWriter struct{ writes []string }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// TestLogIsWrittenLineByLine: every phase writes its log to the request's Log as it
// goes, one line per write (as tofu's output arrives for a live view), and the result
// carries the same log whole.
func TestLogIsWrittenLineByLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	config := postgresBundle(t, nil)
	var planned lineWriter
	pr, err := mock.New().Plan(ctx, runner.PlanRequest{RunID: "run-1", WorkspaceID: workspace, Kind: runner.KindApply, Config: config, Log: &planned})
	require.NoError(t, err)
	var applied lineWriter
	ar, err := mock.New().Apply(ctx, runner.ApplyRequest{RunID: "run-1", WorkspaceID: workspace, Config: config, PlanFile: pr.PlanFile, Log: &applied})
	require.NoError(t, err)
	var verified lineWriter
	vr, err := mock.New().Verify(ctx, runner.VerifyRequest{RunID: "run-1", WorkspaceID: workspace, Config: config, State: ar.State, Log: &verified})
	require.NoError(t, err)
	for _, phase := range []struct {
		name   string
		writes []string
		log    []byte
	}{{"plan", planned.writes, pr.Log}, {"apply", applied.writes, ar.Log}, {"verify", verified.writes, vr.Log}} {
		require.Greater(t, len(phase.writes), 2, "the %s log comes in lines", phase.name)
		for i, w := range phase.writes {
			require.Equal(t, 1, strings.Count(w, "\n"), "%s write %d is one line: %q", phase.name, i, w)
		}
		require.Equal(t, string(phase.log), strings.Join(phase.writes, ""), "the %s result carries what was written", phase.name)
		require.True(t, strings.HasPrefix(phase.writes[0], "SIMULATED"), "the %s log says SIMULATED first: %q", phase.name, phase.writes[0])
	}
}
