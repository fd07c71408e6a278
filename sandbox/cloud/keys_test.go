package cloud_test

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gantry/sandbox/api"
	"gantry/sandbox/client"
	"gantry/sandbox/cloud"
	"gantry/sandbox/sandboxtest"
)

// TestStaticKeyActsForTheWholeEnvironment: a static API key sees and changes every workspace
// of its environment, creates in the environment-wide namespace that workload tokens never see,
// and reaches nothing of another environment or organization.
func TestStaticKeyActsForTheWholeEnvironment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	created := must(keysOf(t, e.cloud.URL, e.cloud.AdminToken).create("acme", "prod", "write", "legacy pipeline"))(t)
	if !strings.HasPrefix(created.Secret, cloud.KeyPrefix) || len(created.Secret) < 40 || created.ID == "" || created.Scope != "write" {
		t.Fatalf("created key: %+v", created.Key)
	}
	key := newClient(t, e.cloud.URL, created.Secret)

	// Objects of two workspaces, made with workload tokens: the key sees and changes both.
	wsA := e.as("acme", "prod", "ws-a", "write")
	wsB := e.as("acme", "prod", "ws-b", "write")
	netA := must(wsA.Create(ctx(), "network", map[string]any{"name": "a", "cidr": "10.1.0.0/16"}))(t)
	netB := must(wsB.Create(ctx(), "network", map[string]any{"name": "b", "cidr": "10.2.0.0/16"}))(t)
	seen := must(key.List(ctx(), "network"))(t)
	if !containsID(seen, netA.ID) || !containsID(seen, netB.ID) {
		t.Fatalf("the key sees %v, want both workspaces' networks", seen)
	}
	changed := must(key.Update(ctx(), "network", netA.ID, map[string]any{"name": "a", "cidr": "10.0.0.0/15"}))(t)
	if changed.LastChange.By != "key" || changed.LastChange.Subject != "key:"+created.ID || changed.LastChange.Run != "" {
		t.Errorf("last change: %+v", changed.LastChange)
	}

	// What the key creates lives in (org, env, "*"), with references inside that namespace.
	own := must(key.Create(ctx(), "network", map[string]any{"name": "shared", "cidr": "10.3.0.0/16"}))(t)
	if want := (api.Namespace{Org: "acme", Env: "prod", Workspace: cloud.AnyWorkspace}); own.Namespace != want {
		t.Errorf("namespace %+v, want %+v", own.Namespace, want)
	}
	must(key.Create(ctx(), "subnet", map[string]any{"network_id": own.ID, "name": "s", "cidr": "10.3.1.0/24"}))(t)
	_, err := key.Create(ctx(), "subnet", map[string]any{"network_id": netB.ID, "name": "s", "cidr": "10.2.1.0/24"})
	wantStatus(t, err, 422, api.CodeInvalid) // another namespace's network is no reference for "*"
	// Workload tokens do not see the environment-wide namespace.
	_, err = wsA.Get(ctx(), "network", own.ID)
	wantStatus(t, err, 404, api.CodeNotFound)
	if l := must(wsA.List(ctx(), "network"))(t); containsID(l, own.ID) {
		t.Error("a workspace token lists the key's network")
	}

	// Another environment and another organization: nothing, by key or by token.
	otherEnv := newClient(t, e.cloud.URL, must(keysOf(t, e.cloud.URL, e.cloud.AdminToken).create("acme", "dev", "write", ""))(t).Secret)
	otherOrg := newClient(t, e.cloud.URL, must(keysOf(t, e.cloud.URL, e.cloud.AdminToken).create("globex", "prod", "write", ""))(t).Secret)
	for _, c := range []struct {
		name string
		get  func(id string) error
		list func() ([]api.Object, error)
	}{
		{"key of another environment", func(id string) error { _, err := otherEnv.Get(ctx(), "network", id); return err }, func() ([]api.Object, error) { return otherEnv.List(ctx(), "network") }},
		{"key of another organization", func(id string) error { _, err := otherOrg.Get(ctx(), "network", id); return err }, func() ([]api.Object, error) { return otherOrg.List(ctx(), "network") }},
		{"token of another environment", func(id string) error {
			_, err := e.as("acme", "dev", "ws-a", "read").Get(ctx(), "network", id)
			return err
		}, func() ([]api.Object, error) { return e.as("acme", "dev", "ws-a", "read").List(ctx(), "network") }},
	} {
		for _, id := range []string{netA.ID, own.ID} {
			wantStatus(t, c.get(id), 404, api.CodeNotFound)
		}
		if l := must(c.list())(t); len(l) != 0 {
			t.Errorf("%s lists %d networks", c.name, len(l))
		}
	}
	_, err = otherEnv.Update(ctx(), "network", netA.ID, map[string]any{"name": "a", "cidr": "10.1.0.0/16"})
	wantStatus(t, err, 404, api.CodeNotFound)

	// Org policies: a key reads and (with write scope) writes its organization's.
	pol := must(key.Create(ctx(), "org_policy", map[string]any{"name": "p", "rules": []any{"r"}}))(t)
	must(e.as("acme", "staging", "ws-z", "read").Get(ctx(), "org_policy", pol.ID))(t)
	_, err = otherOrg.Get(ctx(), "org_policy", pol.ID)
	wantStatus(t, err, 404, api.CodeNotFound)

	// The key deletes any workspace's object.
	noErr(t, key.Delete(ctx(), "network", netB.ID))
	_, err = wsB.Get(ctx(), "network", netB.ID)
	wantStatus(t, err, 404, api.CodeNotFound)
}

// TestStaticReadKey: a read key reads in any phase but never changes anything.
func TestStaticReadKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.as("acme", "prod", "ws-a", "write")
	network, _ := baseline(t, w)
	secret := must(keysOf(t, e.cloud.URL, e.cloud.AdminToken).create("acme", "prod", "read", ""))(t).Secret
	r := newClient(t, e.cloud.URL, secret)
	must(r.Get(ctx(), "network", network.ID))(t)
	_, err := r.Create(ctx(), "bucket", map[string]any{"name": "b"})
	wantStatus(t, err, 403, api.CodeForbidden)
	if !strings.Contains(err.Error(), "static API key is read-only") || strings.Contains(err.Error(), secret) {
		t.Errorf("message: %v", err)
	}
	wantStatus(t, r.Delete(ctx(), "network", network.ID), 403, api.CodeForbidden)
	wantStatus(t, r.Delete(ctx(), "network", "net-00000000"), 403, api.CodeForbidden)
}

// TestStaticKeyLifecycle: created by the admin only, listed without secrets, durable across
// restarts, refused everywhere once deleted; only the digest is on disk.
func TestStaticKeyLifecycle(t *testing.T) {
	t.Parallel()
	iss := sandboxtest.NewIssuer(t)
	dir := t.TempDir()
	first := sandboxtest.NewCloudAt(t, iss, dir)
	second := sandboxtest.NewCloudAt(t, iss, dir)
	keys := keysOf(t, first.URL, first.AdminToken)
	created := must(keys.create("acme", "prod", "write", "INC-7"))(t)

	// The other server on the same directory accepts it, also while the issuer is down: a key
	// needs no issuer.
	iss.SetDown(true)
	viaSecond := newClient(t, second.URL, created.Secret)
	bucket := must(viaSecond.Create(ctx(), "bucket", map[string]any{"name": "kept"}))(t)
	iss.SetDown(false)

	listed := must(keys.list())(t)
	if len(listed) != 1 || listed[0].ID != created.ID || listed[0].Organization != "acme" || listed[0].Environment != "prod" || listed[0].Reason != "INC-7" {
		t.Fatalf("keys: %+v", listed)
	}
	raw := rawGet(t, first.URL+"/admin/v1/keys", first.AdminToken)
	if strings.Contains(raw, created.Secret) || strings.Contains(raw, "sha256") {
		t.Errorf("the key list shows a secret or digest: %s", raw)
	}

	// Only digests are on disk, in private files.
	files := 0
	noErr(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(body), created.Secret) || strings.Contains(string(body), strings.TrimPrefix(created.Secret, cloud.KeyPrefix)) {
			t.Errorf("%s holds the key", p)
		}
		if info, _ := d.Info(); info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v", p, info.Mode())
		}
		return nil
	}))
	if files != 3 {
		t.Errorf("%d files, want the key, the bucket and its change history", files)
	}

	// Deleted through one server, refused by both at once.
	noErr(t, keys.delete(created.ID, "rotated"))
	for _, url := range []string{first.URL, second.URL} {
		_, err := newClient(t, url, created.Secret).Get(ctx(), "bucket", bucket.ID)
		wantStatus(t, err, 401, api.CodeUnauthenticated)
		if strings.Contains(err.Error(), created.Secret) {
			t.Errorf("the error echoes the key: %v", err)
		}
	}
	wantStatus(t, keys.delete(created.ID, ""), 404, api.CodeNotFound)
	wantStatus(t, keys.delete("../objects", ""), 404, "")
}

// TestStaticKeyAdminOnly: keys are managed with the admin token only, and requests are checked.
func TestStaticKeyAdminOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	secret := must(keysOf(t, e.cloud.URL, e.cloud.AdminToken).create("acme", "prod", "write", ""))(t).Secret
	for name, tok := range map[string]string{
		"workload token": e.iss.Token(t, "acme", "prod", "ws-a", "write"),
		"static key":     secret,
		"unknown key":    cloud.KeyPrefix + "nope",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := keysOf(t, e.cloud.URL, tok).create("acme", "prod", "write", "")
			wantStatus(t, err, 401, api.CodeUnauthenticated)
			_, err = keysOf(t, e.cloud.URL, tok).list()
			wantStatus(t, err, 401, api.CodeUnauthenticated)
			wantStatus(t, keysOf(t, e.cloud.URL, tok).delete("key-0000000000000000", ""), 401, api.CodeUnauthenticated)
			// and a static key is no admin token for objects either
			_, err = newClient(t, e.cloud.URL, tok).AdminList(ctx(), "network")
			wantStatus(t, err, 401, api.CodeUnauthenticated)
		})
	}
	// An unknown key is 401 on the workload API, without echoing it.
	_, err := newClient(t, e.cloud.URL, cloud.KeyPrefix+"not-a-key").List(ctx(), "network")
	wantStatus(t, err, 401, api.CodeUnauthenticated)
	if strings.Contains(err.Error(), "not-a-key") {
		t.Errorf("the error echoes the key: %v", err)
	}
	for name, req := range map[string][3]string{
		"no organization":   {"", "prod", "write"},
		"no environment":    {"acme", "", "write"},
		"any environment":   {"acme", "*", "write"},
		"slash":             {"acme", "prod/x", "write"},
		"bad scope":         {"acme", "prod", "admin"},
		"no scope":          {"acme", "prod", ""},
		"organization star": {"*", "prod", "read"},
	} {
		_, err := keysOf(t, e.cloud.URL, e.cloud.AdminToken).create(req[0], req[1], req[2], "")
		if err == nil {
			t.Errorf("%s: created", name)
			continue
		}
		wantStatus(t, err, 400, api.CodeBadRequest)
	}
	// Without an admin token the key API is off too.
	_, err = keysOf(t, e.cloud.URL, e.cloud.AdminToken+"x").list()
	wantStatus(t, err, 401, api.CodeUnauthenticated)
}

// TestWorkloadTokenCannotClaimEveryWorkspace: "*" is the static keys' namespace, never a
// token's workspace.
func TestWorkloadTokenCannotClaimEveryWorkspace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := newClient(t, e.cloud.URL, must(keysOf(t, e.cloud.URL, e.cloud.AdminToken).create("acme", "prod", "write", ""))(t).Secret)
	own := must(key.Create(ctx(), "bucket", map[string]any{"name": "b"}))(t)
	star := e.iss.Mint(t, sandboxtest.Claims{Org: "acme", Env: "prod", Workspace: cloud.AnyWorkspace, Run: "r", Phase: "apply", Scope: "write"})
	_, err := newClient(t, e.cloud.URL, star).Get(ctx(), "bucket", own.ID)
	wantStatus(t, err, 401, api.CodeUnauthenticated)
}

// keyAPI calls the admin API's key endpoints (the client package has no methods for them:
// the provider links it, and its build is pinned by the catalog's lock files).
type keyAPI struct {
	t          *testing.T
	url, token string
}

func keysOf(t *testing.T, url, token string) keyAPI { return keyAPI{t: t, url: url, token: token} }

func (k keyAPI) call(method, path string, body any, out any) error {
	k.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			k.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, k.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+k.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var eb api.ErrorBody
		_ = json.Unmarshal(raw, &eb)
		return &client.Error{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Method: method, Path: path}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			k.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return nil
}

func (k keyAPI) create(org, env, scope, reason string) (cloud.CreatedKey, error) {
	var out cloud.CreatedKey
	err := k.call(http.MethodPost, "/admin/v1/keys", cloud.KeyRequest{Organization: org, Environment: env, Scope: scope, Reason: reason}, &out)
	return out, err
}

func (k keyAPI) list() ([]cloud.Key, error) {
	var out cloud.KeyList
	err := k.call(http.MethodGet, "/admin/v1/keys", nil, &out)
	return out.Keys, err
}

func (k keyAPI) delete(id, reason string) error {
	return k.call(http.MethodDelete, "/admin/v1/keys/"+url.PathEscape(id)+"?reason="+url.QueryEscape(reason), nil, nil)
}

func rawGet(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return string(body)
}
