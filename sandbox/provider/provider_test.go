package provider

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"gantry/sandbox/client"
	"gantry/sandbox/sandboxtest"
)

// clearEnv unsets the provider's environment variables for the test.
func clearEnv(t *testing.T) {
	for _, k := range []string{EnvEndpoint, EnvToken, EnvTokenFile} {
		t.Setenv(k, "")
	}
}

func hasError(diags []*tfprotov6.Diagnostic, attr, summary string) bool {
	for _, d := range diags {
		if d.Severity != tfprotov6.DiagnosticSeverityError || d.Summary != summary {
			continue
		}
		if attr == "" || (d.Attribute != nil && d.Attribute.Equal(tftypes.NewAttributePath().WithAttributeName(attr))) {
			return true
		}
	}
	return false
}

func TestConfigure(t *testing.T) {
	const secret = "sbx-SECRET-7f3a9c1e2d"
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		env     map[string]string
		config  map[string]any
		attr    string // expected error's attribute; "" for success
		summary string
	}{
		{"no token anywhere", map[string]string{EnvEndpoint: "http://127.0.0.1:1"}, nil, "token", "Missing sandbox token"},
		{"no endpoint", map[string]string{EnvToken: secret}, nil, "endpoint", "Missing sandbox endpoint"},
		{"bad endpoint", map[string]string{EnvToken: secret}, map[string]any{"endpoint": "ftp://x"}, "endpoint", "Invalid sandbox endpoint"},
		{"token from the environment", map[string]string{EnvEndpoint: "http://127.0.0.1:1", EnvToken: secret}, nil, "", ""},
		{"token file from the environment", map[string]string{EnvEndpoint: "http://127.0.0.1:1", EnvTokenFile: tokenFile}, nil, "", ""},
		{"token file attribute", nil, map[string]any{"endpoint": "http://127.0.0.1:1", "token_file": tokenFile}, "", ""},
		{"token attribute", nil, map[string]any{"endpoint": "http://127.0.0.1:1", "token": secret}, "", ""},
		{"token and token file", nil, map[string]any{"endpoint": "http://127.0.0.1:1", "token": secret, "token_file": tokenFile}, "token_file", "Conflicting sandbox credentials"},
		{"missing token file", map[string]string{EnvEndpoint: "http://127.0.0.1:1", EnvTokenFile: filepath.Join(dir, "nope")}, nil, "token_file", "Cannot read the sandbox token file"},
		{"empty token file", map[string]string{EnvEndpoint: "http://127.0.0.1:1"}, map[string]any{"token_file": emptyFile}, "token_file", "Missing sandbox token"},
		{"unknown endpoint", map[string]string{EnvToken: secret}, map[string]any{"endpoint": unknown}, "endpoint", "Unknown sandbox provider endpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			diags := newHarness(t).configure(tc.config)
			if tc.attr == "" {
				if d := errorsOf(diags); d != "" {
					t.Fatalf("unexpected: %s", d)
				}
			} else if !hasError(diags, tc.attr, tc.summary) {
				t.Fatalf("want %q on %s, got %s", tc.summary, tc.attr, errorsOf(diags))
			}
			for _, d := range diags {
				if strings.Contains(d.Summary+d.Detail, secret) {
					t.Errorf("a diagnostic echoes the token: %s", diagString(d))
				}
			}
		})
	}
}

// world is a provider configured against a running sandbox cloud.
type world struct {
	*harness
	iss    *sandboxtest.Issuer
	cloud  *sandboxtest.Cloud
	admin  *client.Client
	tokens []string
}

func newWorld(t *testing.T) *world {
	iss := sandboxtest.NewIssuer(t)
	c := sandboxtest.NewCloud(t, iss)
	admin, err := client.New(c.URL, c.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	return &world{iss: iss, cloud: c, admin: admin}
}

// provider returns a provider configured (through the environment, as Gantry's runner does) with
// a token of the given workspace and scope.
func (w *world) provider(t *testing.T, ws, scope string) *harness {
	clearEnv(t)
	tok := w.iss.Token(t, "acme", "prod", ws, scope)
	w.tokens = append(w.tokens, tok)
	t.Setenv(EnvEndpoint, w.cloud.URL)
	t.Setenv(EnvToken, tok)
	h := newHarness(t)
	if d := errorsOf(h.configure(nil)); d != "" {
		t.Fatal(d)
	}
	return h
}

// noTokens fails if a token shows up in any state or diagnostic.
func (w *world) noTokens(t *testing.T, states []tftypes.Value, diags ...[]*tfprotov6.Diagnostic) {
	t.Helper()
	for _, tok := range append(slices.Clone(w.tokens), w.cloud.AdminToken) {
		for _, s := range states {
			if strings.Contains(s.String(), tok) {
				t.Errorf("a state holds a token: %s", s)
			}
		}
		for _, ds := range diags {
			for _, d := range ds {
				if strings.Contains(diagString(d), tok) {
					t.Errorf("a diagnostic holds a token: %s", diagString(d))
				}
			}
		}
	}
}

func TestLifecycleAgainstTheCloud(t *testing.T) {
	w := newWorld(t)
	h := w.provider(t, "ws-a", "write")
	ctx := context.Background()

	netState, net := h.create("sandbox_network", map[string]any{"name": "orders-net", "cidr": "10.30.0.0/16", "region": "eu-west", "labels": map[string]string{"managed_by": "gantry"}})
	subState, sub := h.create("sandbox_subnet", map[string]any{"network_id": net["id"], "name": "orders-db", "cidr": "10.30.1.0/24"})
	dbConfig := map[string]any{
		"name": "orders", "engine": "postgres", "engine_version": "16", "size": "small", "storage_gb": 20,
		"backup_retention_days": 7, "encrypted": true, "network_id": net["id"], "subnet_id": sub["id"],
		"labels": map[string]string{"managed_by": "gantry", "template": "postgres"},
	}
	dbState, db := h.create("sandbox_database", dbConfig)
	if db["endpoint"] != "orders.db.sandbox.internal:5432" || !strings.HasPrefix(db["id"].(string), "db-") {
		t.Fatalf("database: %s", fmtAttrs(db))
	}
	_, bucket := h.create("sandbox_bucket", map[string]any{"name": "reports", "region": "eu-west", "versioning": true, "retention_days": 30, "public": false})
	if bucket["url"] != "https://reports.bucket.sandbox.internal" {
		t.Errorf("bucket url %v", bucket["url"])
	}
	_, inst := h.create("sandbox_instance", map[string]any{"name": "web", "size": "small", "image": "debian-12", "subnet_id": sub["id"]})
	if ip, _ := inst["private_ip"].(string); !strings.HasPrefix(ip, "10.30.1.") {
		t.Errorf("private ip %v", inst["private_ip"])
	}
	_, pol := h.create("sandbox_org_policy", map[string]any{"name": "baseline", "rules": []string{"require encrypted"}})
	if !strings.HasPrefix(pol["id"].(string), "pol-") {
		t.Errorf("policy %s", fmtAttrs(pol))
	}

	// A refresh of an unchanged object is the same state.
	if got, diags := h.read("sandbox_database", dbState); errorsOf(diags) != "" || !got.Equal(dbState) {
		t.Fatalf("read: %s %s", got, errorsOf(diags))
	}

	// In-place update: the endpoint and id stay known in the plan.
	dbConfig["size"], dbConfig["storage_gb"] = "medium", 40
	p := h.plan("sandbox_database", dbState, dbConfig)
	if errorsOf(p.diags) != "" || len(p.replace) != 0 || p.attrs["endpoint"] != db["endpoint"] || p.attrs["id"] != db["id"] {
		t.Fatalf("update plan: %s replace %v %s", fmtAttrs(p.attrs), p.replace, errorsOf(p.diags))
	}
	dbState, diags := h.apply("sandbox_database", dbState, p, dbConfig)
	if d := errorsOf(diags); d != "" {
		t.Fatal(d)
	}
	live, err := w.admin.AdminGet(ctx, "database", db["id"].(string))
	if err != nil || live.Attributes["size"] != "medium" || live.Attributes["storage_gb"] != int64(40) || live.Generation != 2 {
		t.Fatalf("live after update: %+v %v", live.Attributes, err)
	}
	oldData := live.Data.Version

	// Shrinking storage plans fine but the cloud refuses it at apply, with the cloud's reason.
	dbConfig["storage_gb"] = 20
	p = h.plan("sandbox_database", dbState, dbConfig)
	if _, diags := h.apply("sandbox_database", dbState, p, dbConfig); !strings.Contains(errorsOf(diags), "never shrink") {
		t.Errorf("shrink: %s", errorsOf(diags))
	}
	dbConfig["storage_gb"] = 40

	// Engine version change: replacement, as in the mock (replace_paths [engine_version]).
	dbConfig["engine_version"] = "17"
	p = h.plan("sandbox_database", dbState, dbConfig)
	if !slices.Equal(p.replace, []string{"engine_version"}) {
		t.Fatalf("replace %v", p.replace)
	}
	// OpenTofu applies a replacement as destroy then create.
	if d := errorsOf(h.destroy("sandbox_database", dbState)); d != "" {
		t.Fatal(d)
	}
	dbState, db2 := h.create("sandbox_database", dbConfig)
	if db2["id"] == db["id"] || db2["endpoint"] != db["endpoint"] {
		t.Errorf("replacement: %s", fmtAttrs(db2))
	}
	live, _ = w.admin.AdminGet(ctx, "database", db2["id"].(string))
	if live.Data.Version == oldData {
		t.Errorf("the replacement kept the old data version")
	}

	// Drift: an out-of-band change shows up on refresh, and the next plan reverts it in place.
	if _, err := w.admin.AdminUpdate(ctx, "database", db2["id"].(string), map[string]any{"size": "large"}, "drift test"); err != nil {
		t.Fatal(err)
	}
	refreshed, diags := h.read("sandbox_database", dbState)
	if got := attrsOf(t, refreshed); errorsOf(diags) != "" || got["size"] != "large" {
		t.Fatalf("refresh after drift: %s %s", fmtAttrs(got), errorsOf(diags))
	}
	if p := h.plan("sandbox_database", refreshed, dbConfig); len(p.replace) != 0 || p.attrs["size"] != "medium" {
		t.Errorf("plan after drift: %s replace %v", fmtAttrs(p.attrs), p.replace)
	}
	// Deleted out of band: refresh removes it from state.
	if err := w.admin.AdminDelete(ctx, "database", db2["id"].(string), "drift test"); err != nil {
		t.Fatal(err)
	}
	gone, diags := h.read("sandbox_database", dbState)
	if errorsOf(diags) != "" || !gone.IsNull() {
		t.Fatalf("refresh after out-of-band delete: %s %s", gone, errorsOf(diags))
	}
	// Destroying something already gone succeeds.
	if d := errorsOf(h.destroy("sandbox_database", dbState)); d != "" {
		t.Errorf("destroy of a deleted object: %s", d)
	}

	// Import by id, then refresh fills in the attributes.
	imported, diags := h.importState("sandbox_subnet", sub["id"].(string))
	if errorsOf(diags) != "" {
		t.Fatal(errorsOf(diags))
	}
	imported, diags = h.read("sandbox_subnet", imported)
	if errorsOf(diags) != "" || !imported.Equal(subState) {
		t.Errorf("imported %s, want %s", imported, subState)
	}
	if _, diags := h.importState("sandbox_subnet", "net-12345678"); !hasError(diags, "", "Invalid import id") {
		t.Errorf("import of a network id as a subnet: %s", errorsOf(diags))
	}

	// The cloud refuses to delete a network that a subnet still uses; the message says why.
	if diags := h.destroy("sandbox_network", netState); !strings.Contains(errorsOf(diags), "still used by") {
		t.Errorf("destroy of a used network: %s", errorsOf(diags))
	}

	// A plan-phase (read) token refreshes but cannot change anything.
	r := w.provider(t, "ws-a", "read")
	if _, diags := r.read("sandbox_subnet", subState); errorsOf(diags) != "" {
		t.Errorf("read token refresh: %s", errorsOf(diags))
	}
	p = r.plan("sandbox_bucket", tftypes.Value{}, map[string]any{"name": "sneaky"})
	_, roDiags := r.apply("sandbox_bucket", tftypes.Value{}, p, map[string]any{"name": "sneaky"})
	if !strings.Contains(errorsOf(roDiags), "read-only") {
		t.Errorf("create with a read token: %s", errorsOf(roDiags))
	}
	// Another workspace's token does not see this workspace's objects: to it they are gone.
	o := w.provider(t, "ws-b", "write")
	if st, diags := o.read("sandbox_subnet", subState); errorsOf(diags) != "" || !st.IsNull() {
		t.Errorf("another workspace reads %s %s", st, errorsOf(diags))
	}

	w.noTokens(t, []tftypes.Value{netState, subState, dbState, refreshed, imported}, diags, roDiags)
}

// TestCatalogTemplateShapes creates the objects the catalog templates declare, with the attribute
// sets the templates use (catalog/templates/*/module/main.tf), to show the provider accepts them.
func TestCatalogTemplateShapes(t *testing.T) {
	w := newWorld(t)
	h := w.provider(t, "ws-cat", "write")
	labels := func(tpl string) map[string]string { return map[string]string{"managed_by": "gantry", "template": tpl} }
	// network template
	_, net := h.create("sandbox_network", map[string]any{"name": "core", "cidr": "10.20.0.0/16", "region": "eu-west", "labels": labels("network")})
	for i, cidr := range []string{"10.20.0.0/24", "10.20.1.0/24"} {
		h.create("sandbox_subnet", map[string]any{"network_id": net["id"], "name": "core-" + string(rune('0'+i)), "cidr": cidr})
	}
	// bucket template
	h.create("sandbox_bucket", map[string]any{"name": "logs", "region": "eu-west", "versioning": true, "retention_days": 30, "public": false, "labels": labels("bucket")})
	// postgres template
	_, pnet := h.create("sandbox_network", map[string]any{"name": "app-net", "cidr": "10.30.0.0/16", "region": "eu-west", "labels": labels("postgres")})
	_, psub := h.create("sandbox_subnet", map[string]any{"network_id": pnet["id"], "name": "app-db", "cidr": "10.30.1.0/24"})
	_, db := h.create("sandbox_database", map[string]any{
		"name": "app", "engine": "postgres", "engine_version": "16", "size": "small", "storage_gb": 20, "backup_retention_days": 7,
		"encrypted": true, "network_id": pnet["id"], "subnet_id": psub["id"], "labels": labels("postgres"),
	})
	if db["endpoint"] != "app.db.sandbox.internal:5432" {
		t.Errorf("endpoint %v", db["endpoint"])
	}
}
