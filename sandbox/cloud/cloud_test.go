package cloud_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gantry/sandbox/api"
	"gantry/sandbox/client"
	"gantry/sandbox/cloud"
	"gantry/sandbox/sandboxtest"
)

type env struct {
	t     *testing.T
	iss   *sandboxtest.Issuer
	cloud *sandboxtest.Cloud
	admin *client.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	iss := sandboxtest.NewIssuer(t)
	c := sandboxtest.NewCloud(t, iss)
	return &env{t: t, iss: iss, cloud: c, admin: newClient(t, c.URL, c.AdminToken)}
}

func newClient(t *testing.T, url, token string) *client.Client {
	t.Helper()
	c, err := client.New(url, token, client.WithRetries(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// as returns a client acting as a workload of (org, env, ws) with the given scope.
func (e *env) as(org, envName, ws, scope string) *client.Client {
	return newClient(e.t, e.cloud.URL, e.iss.Token(e.t, org, envName, ws, scope))
}

func ctx() context.Context { return context.Background() }

func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantStatus(t *testing.T, err error, status int, code string) {
	t.Helper()
	var ce *client.Error
	if err == nil {
		t.Fatalf("want HTTP %d %s, got success", status, code)
	}
	if !errors.As(err, &ce) {
		t.Fatalf("want HTTP %d %s, got %v", status, code, err)
	}
	if ce.Status != status || (code != "" && ce.Code != code) {
		t.Fatalf("want HTTP %d %s, got %v", status, code, err)
	}
}

// baseline creates a network and a subnet in the writer's namespace.
func baseline(t *testing.T, w *client.Client) (network, subnet api.Object) {
	t.Helper()
	network = must(w.Create(ctx(), "network", map[string]any{"name": "app-net", "cidr": "10.20.0.0/16", "region": "eu-west", "labels": map[string]any{"managed_by": "gantry"}}))(t)
	subnet = must(w.Create(ctx(), "subnet", map[string]any{"network_id": network.ID, "name": "app-0", "cidr": "10.20.1.0/24"}))(t)
	return network, subnet
}

func TestCRUDPerKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.as("acme", "prod", "ws-a", "write")
	network, subnet := baseline(t, w)

	cases := []struct {
		kind     string
		create   map[string]any
		update   map[string]any
		computed map[string]func(string) bool
	}{
		{
			kind:   "network",
			create: map[string]any{"name": "other-net", "cidr": "10.40.0.0/16"},
			update: map[string]any{"name": "other-net", "cidr": "10.40.0.0/15", "labels": map[string]any{}},
		},
		{
			kind:   "subnet",
			create: map[string]any{"network_id": network.ID, "name": "app-1", "cidr": "10.20.2.0/24"},
			update: map[string]any{"network_id": network.ID, "name": "app-1-renamed", "cidr": "10.20.2.0/24"},
		},
		{
			kind: "database",
			create: map[string]any{"name": "orders", "engine": "postgres", "engine_version": "16", "size": "small", "storage_gb": 20,
				"backup_retention_days": 7, "encrypted": true, "network_id": network.ID, "subnet_id": subnet.ID, "labels": map[string]any{"template": "postgres"}},
			update: map[string]any{"name": "orders", "engine": "postgres", "engine_version": "16", "size": "large", "storage_gb": 50,
				"backup_retention_days": 14, "encrypted": true, "network_id": network.ID, "subnet_id": subnet.ID, "labels": map[string]any{"template": "postgres"}},
			computed: map[string]func(string) bool{"endpoint": func(v string) bool { return v == "orders.db.sandbox.internal:5432" }},
		},
		{
			kind:     "bucket",
			create:   map[string]any{"name": "reports", "region": "eu-west", "versioning": true, "retention_days": 30, "public": false},
			update:   map[string]any{"name": "reports", "region": "eu-west", "versioning": false, "retention_days": 0, "public": false},
			computed: map[string]func(string) bool{"url": func(v string) bool { return v == "https://reports.bucket.sandbox.internal" }},
		},
		{
			kind:   "instance",
			create: map[string]any{"name": "web", "size": "small", "image": "debian-12", "subnet_id": subnet.ID},
			update: map[string]any{"name": "web-1", "size": "medium", "image": "debian-12", "subnet_id": subnet.ID},
			computed: map[string]func(string) bool{"private_ip": func(v string) bool {
				a, err := netip.ParseAddr(v)
				return err == nil && netip.MustParsePrefix("10.20.1.0/24").Contains(a) && v != "10.20.1.0" && v != "10.20.1.255"
			}},
		},
		{
			kind:   "org_policy",
			create: map[string]any{"name": "no-public-buckets", "rules": []any{"deny sandbox_bucket.public = true"}},
			update: map[string]any{"name": "no-public-buckets", "rules": []any{"deny sandbox_bucket.public = true", "require encrypted"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			k, _ := api.Lookup(tc.kind)
			created := must(w.Create(ctx(), tc.kind, tc.create))(t)
			if !k.ValidID(created.ID) || created.Generation != 1 || created.LastChange.By != "run" || created.LastChange.Phase != "apply" {
				t.Fatalf("created %+v", created)
			}
			if got := created.Attributes["id"]; got != created.ID {
				t.Fatalf("attribute id %v, object id %s", got, created.ID)
			}
			for name, ok := range tc.computed {
				if v, _ := created.Attributes[name].(string); !ok(v) {
					t.Errorf("%s = %q", name, v)
				}
			}
			if k.DataBearing != (created.Data != nil && strings.HasPrefix(created.Data.Version, "dv-")) {
				t.Errorf("data %+v", created.Data)
			}
			wantNS := api.Namespace{Org: "acme", Env: "prod", Workspace: "ws-a"}
			if k.OrgScoped {
				wantNS = api.Namespace{Org: "acme"}
			}
			if created.Namespace != wantNS {
				t.Errorf("namespace %+v, want %+v", created.Namespace, wantNS)
			}
			got := must(w.Get(ctx(), tc.kind, created.ID))(t)
			if !api.Equal(got.Attributes, created.Attributes) {
				t.Fatalf("read %v, created %v", got.Attributes, created.Attributes)
			}
			for name, v := range tc.create {
				want, _ := k.Normalize(map[string]any{name: v}, false)
				if !api.Equal(got.Attributes[name], want[name]) {
					t.Errorf("%s = %#v, want %#v", name, got.Attributes[name], want[name])
				}
			}
			updated := must(w.Update(ctx(), tc.kind, created.ID, tc.update))(t)
			if updated.Generation != 2 || updated.ID != created.ID {
				t.Fatalf("updated %+v", updated)
			}
			for _, a := range k.Attrs {
				if a.Computed && !api.Equal(updated.Attributes[a.Name], created.Attributes[a.Name]) {
					t.Errorf("computed %s changed on update: %v -> %v", a.Name, created.Attributes[a.Name], updated.Attributes[a.Name])
				}
			}
			for name, v := range tc.update {
				want, _ := k.Normalize(map[string]any{name: v}, false)
				if !api.Equal(updated.Attributes[name], want[name]) {
					t.Errorf("after update %s = %#v, want %#v", name, updated.Attributes[name], want[name])
				}
			}
			// Unset optional attributes are null, not defaults.
			for _, a := range k.Attrs {
				if _, set := tc.update[a.Name]; !set && !a.Computed && updated.Attributes[a.Name] != nil {
					t.Errorf("unset %s = %#v, want null", a.Name, updated.Attributes[a.Name])
				}
			}
			list := must(w.List(ctx(), tc.kind))(t)
			if !containsID(list, created.ID) {
				t.Errorf("list lacks %s", created.ID)
			}
			if err := w.Delete(ctx(), tc.kind, created.ID); err != nil {
				t.Fatal(err)
			}
			_, err := w.Get(ctx(), tc.kind, created.ID)
			wantStatus(t, err, 404, api.CodeNotFound)
			wantStatus(t, w.Delete(ctx(), tc.kind, created.ID), 404, api.CodeNotFound)
		})
	}
}

func containsID(objs []api.Object, id string) bool {
	for _, o := range objs {
		if o.ID == id {
			return true
		}
	}
	return false
}

func TestNullVersusEmpty(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.as("acme", "prod", "ws-a", "write")
	a := must(w.Create(ctx(), "network", map[string]any{"name": "a", "cidr": "10.1.0.0/16"}))(t)
	b := must(w.Create(ctx(), "network", map[string]any{"name": "b", "cidr": "10.2.0.0/16", "labels": map[string]any{}}))(t)
	if a.Attributes["labels"] != nil || a.Attributes["region"] != nil {
		t.Errorf("unset labels/region: %#v", a.Attributes)
	}
	if m, ok := b.Attributes["labels"].(map[string]string); !ok || m == nil || len(m) != 0 {
		t.Errorf("empty labels came back as %#v", b.Attributes["labels"])
	}
}

func TestWorkspaceIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.as("acme", "prod", "ws-a", "write")
	network, _ := baseline(t, w)
	for name, other := range map[string]*client.Client{
		"other workspace":   e.as("acme", "prod", "ws-b", "write"),
		"other environment": e.as("acme", "staging", "ws-a", "write"),
		"other org":         e.as("globex", "prod", "ws-a", "write"),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := other.Get(ctx(), "network", network.ID)
			wantStatus(t, err, 404, api.CodeNotFound)
			_, err = other.Update(ctx(), "network", network.ID, map[string]any{"name": "app-net", "cidr": "10.20.0.0/16"})
			wantStatus(t, err, 404, api.CodeNotFound)
			wantStatus(t, other.Delete(ctx(), "network", network.ID), 404, api.CodeNotFound)
			if l := must(other.List(ctx(), "network"))(t); len(l) != 0 {
				t.Errorf("another namespace lists %d networks", len(l))
			}
			// Referencing another namespace's network is as if it did not exist.
			_, err = other.Create(ctx(), "subnet", map[string]any{"network_id": network.ID, "name": "x", "cidr": "10.20.9.0/24"})
			wantStatus(t, err, 422, api.CodeInvalid)
		})
	}
	// The owner still has it, unchanged.
	got := must(w.Get(ctx(), "network", network.ID))(t)
	if got.Generation != 1 {
		t.Errorf("generation %d", got.Generation)
	}
}

func TestReadScopeCannotMutate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.as("acme", "prod", "ws-a", "write")
	network, _ := baseline(t, w)
	r := e.as("acme", "prod", "ws-a", "read")
	if _, err := r.Get(ctx(), "network", network.ID); err != nil {
		t.Fatalf("a read token cannot read its own workspace: %v", err)
	}
	_, err := r.Create(ctx(), "network", map[string]any{"name": "x", "cidr": "10.9.0.0/16"})
	wantStatus(t, err, 403, api.CodeForbidden)
	if !strings.Contains(err.Error(), "read-only") {
		t.Errorf("message %q does not say read-only", err)
	}
	_, err = r.Update(ctx(), "network", network.ID, map[string]any{"name": "app-net", "cidr": "10.20.0.0/15"})
	wantStatus(t, err, 403, api.CodeForbidden)
	wantStatus(t, r.Delete(ctx(), "network", network.ID), 403, api.CodeForbidden)
	// 403 even for an id that does not exist: a read token learns nothing by mutating.
	wantStatus(t, r.Delete(ctx(), "network", "net-00000000"), 403, api.CodeForbidden)
	if got := must(w.Get(ctx(), "network", network.ID))(t); got.Attributes["cidr"] != "10.20.0.0/16" {
		t.Errorf("cidr changed to %v", got.Attributes["cidr"])
	}
}

func TestBadTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.as("acme", "prod", "ws-a", "write")
	network, _ := baseline(t, w)
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	base := sandboxtest.Claims{Org: "acme", Env: "prod", Workspace: "ws-a", Run: "r", Phase: "apply", Scope: "write"}
	with := func(f func(*sandboxtest.Claims)) string {
		c := base
		f(&c)
		return e.iss.Mint(t, c)
	}
	tokens := map[string]string{
		"expired":         with(func(c *sandboxtest.Claims) { c.Expiry = time.Now().Add(-time.Minute) }),
		"wrong audience":  with(func(c *sandboxtest.Claims) { c.Audience = "gantry" }),
		"wrong issuer":    with(func(c *sandboxtest.Claims) { c.Issuer = "https://evil.example" }),
		"forged":          with(func(c *sandboxtest.Claims) { c.Key = otherKey }),
		"no org":          with(func(c *sandboxtest.Claims) { c.Org = "" }),
		"no workspace":    with(func(c *sandboxtest.Claims) { c.Workspace = "" }),
		"bad scope":       with(func(c *sandboxtest.Claims) { c.Scope = "admin" }),
		"write in plan":   with(func(c *sandboxtest.Claims) { c.Phase = "plan" }),
		"apply, no plan":  with(func(c *sandboxtest.Claims) { c.NoPlan = true }),
		"bad plan digest": with(func(c *sandboxtest.Claims) { c.PlanDigest = "sha256:abc" }),
		"plan names one": with(func(c *sandboxtest.Claims) {
			c.Phase, c.Scope, c.PlanDigest = "plan", "read", sandboxtest.TestPlanDigest
		}),
		"unsigned":        unsigned(e.iss.URL),
		"garbage":         "not-a-jwt",
		"admin token":     e.cloud.AdminToken,
		"tampered claims": tamper(t, e.iss.Token(t, "acme", "prod", "ws-b", "write"), "ws-b", "ws-a"),
	}
	for name, tok := range tokens {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, e.cloud.URL, tok)
			_, err := c.Get(ctx(), "network", network.ID)
			wantStatus(t, err, 401, api.CodeUnauthenticated)
			if strings.Contains(err.Error(), tok) {
				t.Errorf("the error echoes the token: %v", err)
			}
		})
	}
	t.Run("no token", func(t *testing.T) {
		resp, err := http.Get(e.cloud.URL + "/v1/network/" + network.ID)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	})
}

// unsigned is a token with alg "none".
func unsigned(issuer string) string {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	payload, _ := json.Marshal(map[string]any{"iss": issuer, "aud": "sandbox", "sub": "x", "exp": time.Now().Add(time.Hour).Unix(),
		"gantry_org": "acme", "gantry_env": "prod", "gantry_ws": "ws-a", "scope": "write"})
	return header + "." + enc.EncodeToString(payload) + "."
}

// tamper rewrites a claim in a signed token, keeping the signature.
func tamper(t *testing.T, tok, from, to string) string {
	parts := strings.Split(tok, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.ReplaceAll(string(payload), from, to)))
	return strings.Join(parts, ".")
}

func TestOrgPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.as("acme", "prod", "ws-a", "write")
	pol := must(a.Create(ctx(), "org_policy", map[string]any{"name": "baseline", "rules": []any{"require encrypted"}}))(t)
	if pol.Namespace != (api.Namespace{Org: "acme"}) {
		t.Fatalf("policy namespace %+v", pol.Namespace)
	}
	// Any token of the org reads it, whatever its environment, workspace or scope.
	for _, c := range []*client.Client{e.as("acme", "prod", "ws-b", "read"), e.as("acme", "staging", "ws-c", "read"), e.as("acme", "dev", "ws-d", "write")} {
		must(c.Get(ctx(), "org_policy", pol.ID))(t)
		if l := must(c.List(ctx(), "org_policy"))(t); len(l) != 1 {
			t.Errorf("list: %d policies", len(l))
		}
	}
	// A read token of the org cannot change it.
	_, err := e.as("acme", "prod", "ws-b", "read").Update(ctx(), "org_policy", pol.ID, map[string]any{"name": "baseline", "rules": []any{"allow all"}})
	wantStatus(t, err, 403, api.CodeForbidden)
	// Another org neither sees nor changes it.
	other := e.as("globex", "prod", "ws-a", "write")
	_, err = other.Get(ctx(), "org_policy", pol.ID)
	wantStatus(t, err, 404, api.CodeNotFound)
	_, err = other.Update(ctx(), "org_policy", pol.ID, map[string]any{"name": "baseline", "rules": []any{"allow all"}})
	wantStatus(t, err, 404, api.CodeNotFound)
	wantStatus(t, other.Delete(ctx(), "org_policy", pol.ID), 404, api.CodeNotFound)
	// A write token of another workspace of the org changes it.
	b := e.as("acme", "dev", "ws-d", "write")
	up := must(b.Update(ctx(), "org_policy", pol.ID, map[string]any{"name": "baseline", "rules": []any{"require encrypted", "deny public"}}))(t)
	if rules := up.Attributes["rules"].([]string); len(rules) != 2 {
		t.Errorf("rules %v", rules)
	}
	if err := b.Delete(ctx(), "org_policy", pol.ID); err != nil {
		t.Fatal(err)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.as("acme", "prod", "ws-a", "write")
	network, subnet := baseline(t, w)
	db := func(over map[string]any) map[string]any {
		m := map[string]any{"name": "orders", "engine": "postgres", "engine_version": "16", "size": "small", "storage_gb": 20, "network_id": network.ID, "subnet_id": subnet.ID}
		for k, v := range over {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name  string
		kind  string
		attrs map[string]any
		field string
	}{
		{"bad engine", "database", db(map[string]any{"engine": "oracle"}), "engine"},
		{"engine version of another engine", "database", db(map[string]any{"engine": "mysql", "engine_version": "16"}), "engine_version"},
		{"fractional storage", "database", db(map[string]any{"storage_gb": 20.5}), "storage_gb"},
		{"storage too small", "database", db(map[string]any{"storage_gb": 5}), "storage_gb"},
		{"missing required", "database", db(map[string]any{"size": nil}), "size"},
		{"computed set", "database", db(map[string]any{"endpoint": "x:1"}), "endpoint"},
		{"unknown attribute", "database", db(map[string]any{"colour": "red"}), "colour"},
		{"wrong type", "database", db(map[string]any{"encrypted": "yes"}), "encrypted"},
		{"missing network", "database", db(map[string]any{"network_id": "net-00000000"}), "network_id"},
		{"non-canonical cidr", "network", map[string]any{"name": "n", "cidr": "10.20.0.1/16"}, "cidr"},
		{"ipv6 cidr", "network", map[string]any{"name": "n", "cidr": "fd00::/64"}, "cidr"},
		{"bad region", "network", map[string]any{"name": "n", "cidr": "10.9.0.0/16", "region": "mars"}, "region"},
		{"bad name", "network", map[string]any{"name": "Bad_Name", "cidr": "10.9.0.0/16"}, "name"},
		{"bad label key", "network", map[string]any{"name": "n", "cidr": "10.9.0.0/16", "labels": map[string]any{"Bad Key": "x"}}, "labels"},
		{"subnet outside its network", "subnet", map[string]any{"network_id": network.ID, "name": "s", "cidr": "10.99.1.0/24"}, "cidr"},
		{"empty rules", "org_policy", map[string]any{"name": "p", "rules": []any{}}, "rules"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := w.Create(ctx(), tc.kind, tc.attrs)
			wantStatus(t, err, 422, api.CodeInvalid)
			var ce *client.Error
			errors.As(err, &ce)
			found := false
			for _, f := range ce.Fields {
				found = found || f.Attr == tc.field
			}
			if !found {
				t.Errorf("fields %+v do not name %s", ce.Fields, tc.field)
			}
		})
	}
}

func TestUpdateRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.as("acme", "prod", "ws-a", "write")
	network, subnet := baseline(t, w)
	attrs := map[string]any{"name": "orders", "engine": "postgres", "engine_version": "16", "size": "small", "storage_gb": 20, "subnet_id": subnet.ID}
	db := must(w.Create(ctx(), "database", attrs))(t)

	changed := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, x := range attrs {
			m[a] = x
		}
		m[k] = v
		return m
	}
	// Attributes that force replacement cannot change in place.
	toMySQL := changed("engine", "mysql")
	toMySQL["engine_version"] = "8.0"
	for _, c := range []map[string]any{toMySQL, changed("engine_version", "17"), changed("encrypted", true), changed("name", "other")} {
		_, err := w.Update(ctx(), "database", db.ID, c)
		wantStatus(t, err, 409, api.CodeConflict)
	}
	_, err := w.Update(ctx(), "database", db.ID, changed("storage_gb", 10))
	wantStatus(t, err, 409, api.CodeConflict)
	if !strings.Contains(err.Error(), "never shrink") {
		t.Errorf("message %v", err)
	}
	// The network cannot shrink below its subnets, nor be deleted while they exist.
	_, err = w.Update(ctx(), "network", network.ID, map[string]any{"name": "app-net", "cidr": "10.20.128.0/17"})
	wantStatus(t, err, 409, api.CodeConflict)
	wantStatus(t, w.Delete(ctx(), "network", network.ID), 409, api.CodeConflict)
	wantStatus(t, w.Delete(ctx(), "subnet", subnet.ID), 409, api.CodeConflict) // the database uses it
	noErr(t, w.Delete(ctx(), "database", db.ID))
	noErr(t, w.Delete(ctx(), "subnet", subnet.ID))
	noErr(t, w.Delete(ctx(), "network", network.ID))
}

func TestAdminOutOfBand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.as("acme", "prod", "ws-a", "write")
	network, subnet := baseline(t, w)
	db := must(w.Create(ctx(), "database", map[string]any{"name": "orders", "engine": "postgres", "engine_version": "16", "size": "small", "storage_gb": 20, "network_id": network.ID, "subnet_id": subnet.ID}))(t)

	// Drift: the size changes outside any run; the workspace sees it.
	changed := must(e.admin.AdminUpdate(ctx(), "database", db.ID, map[string]any{"size": "large"}, "incident 42"))(t)
	if changed.LastChange.By != "admin" || changed.LastChange.Reason != "incident 42" || changed.Generation != 2 {
		t.Errorf("last change %+v, generation %d", changed.LastChange, changed.Generation)
	}
	got := must(w.Get(ctx(), "database", db.ID))(t)
	if got.Attributes["size"] != "large" || got.Attributes["engine"] != "postgres" || got.Attributes["storage_gb"] != int64(20) {
		t.Errorf("after the out-of-band change: %v", got.Attributes)
	}
	// Break-glass may change what a run could only replace; the endpoint follows the name.
	renamed := must(e.admin.AdminUpdate(ctx(), "database", db.ID, map[string]any{"name": "orders-2", "engine": "mysql", "engine_version": "8.0"}, ""))(t)
	if renamed.Attributes["endpoint"] != "orders-2.db.sandbox.internal:3306" || renamed.Attributes["id"] != db.ID {
		t.Errorf("after rename: %v", renamed.Attributes)
	}
	// Still validated.
	_, err := e.admin.AdminUpdate(ctx(), "database", db.ID, map[string]any{"engine": "oracle"}, "")
	wantStatus(t, err, 422, api.CodeInvalid)
	_, err = e.admin.AdminUpdate(ctx(), "database", db.ID, map[string]any{"size": nil}, "")
	wantStatus(t, err, 422, api.CodeInvalid)
	// The admin sees every namespace.
	if l := must(e.admin.AdminList(ctx(), "database"))(t); len(l) != 1 {
		t.Errorf("admin list: %d", len(l))
	}
	// Out-of-band delete, regardless of references: the workspace sees it gone.
	noErr(t, e.admin.AdminDelete(ctx(), "network", network.ID, "drift test"))
	_, err = w.Get(ctx(), "network", network.ID)
	wantStatus(t, err, 404, api.CodeNotFound)

	// Wrong admin token, and a workload token on the admin API.
	for _, tok := range []string{"wrong", e.iss.Token(t, "acme", "prod", "ws-a", "write")} {
		_, err = newClient(t, e.cloud.URL, tok).AdminGet(ctx(), "database", db.ID)
		wantStatus(t, err, 401, api.CodeUnauthenticated)
	}
	// The admin token is not a workload token.
	_, err = e.admin.Get(ctx(), "database", db.ID)
	wantStatus(t, err, 401, api.CodeUnauthenticated)
}

func TestAdminDisabled(t *testing.T) {
	t.Parallel()
	iss := sandboxtest.NewIssuer(t)
	srv, err := cloud.New(ctx(), cloud.Config{DataDir: t.TempDir(), Issuer: iss.URL, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	_, err = newClient(t, hs.URL, "anything").AdminList(ctx(), "database")
	wantStatus(t, err, 404, api.CodeAdminDisabled)
}

func TestReplacementLosesData(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.as("acme", "prod", "ws-a", "write")
	attrs := map[string]any{"name": "orders", "engine": "postgres", "engine_version": "16", "size": "small", "storage_gb": 20}
	old := must(w.Create(ctx(), "database", attrs))(t)
	written := must(e.admin.AdminWriteData(ctx(), "database", old.ID, "42 customer rows", ""))(t)
	if written.Data.Marker != "42 customer rows" || written.Data.Version != old.Data.Version || written.Data.WrittenAt == nil {
		t.Fatalf("data %+v", written.Data)
	}
	// A replacement (engine_version 16 -> 17) is delete + create: a new object, new data.
	noErr(t, w.Delete(ctx(), "database", old.ID))
	attrs["engine_version"] = "17"
	replaced := must(w.Create(ctx(), "database", attrs))(t)
	if replaced.ID == old.ID || replaced.Data.Version == old.Data.Version || replaced.Data.Marker != "" || !replaced.CreatedAt.After(old.CreatedAt) {
		t.Errorf("replacement kept data: old %+v %+v, new %+v %+v", old.ID, written.Data, replaced.ID, replaced.Data)
	}
	// Kinds without data refuse a marker.
	net := must(w.Create(ctx(), "network", map[string]any{"name": "n", "cidr": "10.9.0.0/16"}))(t)
	_, err := e.admin.AdminWriteData(ctx(), "network", net.ID, "x", "")
	wantStatus(t, err, 400, api.CodeBadRequest)
}

func TestDurableAndTokenFree(t *testing.T) {
	t.Parallel()
	iss := sandboxtest.NewIssuer(t)
	dir := t.TempDir()
	first := sandboxtest.NewCloudAt(t, iss, dir)
	writeTok := iss.Token(t, "acme", "prod", "ws-a", "write")
	w := newClient(t, first.URL, writeTok)
	network, subnet := baseline(t, w)
	db := must(w.Create(ctx(), "database", map[string]any{"name": "orders", "engine": "postgres", "engine_version": "16", "size": "small", "storage_gb": 20, "network_id": network.ID, "subnet_id": subnet.ID}))(t)
	pol := must(w.Create(ctx(), "org_policy", map[string]any{"name": "p", "rules": []any{"r"}}))(t)

	// A new server on the same directory sees everything.
	second := sandboxtest.NewCloudAt(t, iss, dir)
	r := newClient(t, second.URL, iss.Token(t, "acme", "prod", "ws-a", "read"))
	for kind, obj := range map[string]api.Object{"network": network, "subnet": subnet, "database": db, "org_policy": pol} {
		got := must(r.Get(ctx(), kind, obj.ID))(t)
		if !api.Equal(got.Attributes, obj.Attributes) || !reflect.DeepEqual(got.Data, obj.Data) {
			t.Errorf("%s after restart: %v, want %v", kind, got.Attributes, obj.Attributes)
		}
	}

	// No token, nor any part of one, nor the admin token, is in any file.
	secrets := []string{writeTok, first.AdminToken, second.AdminToken}
	for _, part := range strings.Split(writeTok, ".") {
		secrets = append(secrets, part)
	}
	files := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, s := range secrets {
			if strings.Contains(string(body), s) {
				t.Errorf("%s contains a token", p)
			}
		}
		if info, _ := d.Info(); info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v", p, info.Mode())
		}
		return nil
	})
	// Four objects, the change history of each, and the applies ledger.
	if err != nil || files != 9 {
		t.Fatalf("walked %d files: %v", files, err)
	}
}

func TestIssuerNotReachableYet(t *testing.T) {
	t.Parallel()
	iss := sandboxtest.NewIssuer(t)
	iss.SetDown(true)
	c := sandboxtest.NewCloud(t, iss) // discovery fails at start: not an error
	tok := iss.Token(t, "acme", "prod", "ws-a", "read")
	_, err := newClient(t, c.URL, tok).List(ctx(), "network")
	wantStatus(t, err, 503, api.CodeIssuerUnavailable)
	iss.SetDown(false)
	// The client's retries cover the gap until the next discovery attempt.
	retrying, _ := client.New(c.URL, tok, client.WithRetries(5, 100*time.Millisecond))
	if _, err := retrying.List(ctx(), "network"); err != nil {
		t.Fatalf("after the issuer came up: %v", err)
	}
}

func TestIssuerUnderAPath(t *testing.T) {
	t.Parallel()
	iss := sandboxtest.NewIssuerAt(t, "/workload") // as Gantry publishes its issuer
	c := sandboxtest.NewCloud(t, iss)
	w := newClient(t, c.URL, iss.Token(t, "acme", "prod", "ws-a", "write"))
	if _, err := w.Create(ctx(), "bucket", map[string]any{"name": "b"}); err != nil {
		t.Fatal(err)
	}
}

func TestHealthAndUnknownRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	resp, err := http.Get(e.cloud.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ready"`) {
		t.Errorf("healthz %d %s", resp.StatusCode, body)
	}
	_, err = e.as("acme", "prod", "ws-a", "read").List(ctx(), "kubernetes_cluster")
	wantStatus(t, err, 404, api.CodeNotFound)
	_, err = e.as("acme", "prod", "ws-a", "read").Get(ctx(), "network", "../../etc/passwd")
	wantStatus(t, err, 404, "")
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
