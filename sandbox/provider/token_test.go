package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"gantry/sandbox/sandboxtest"
)

// TestTokenFileIsReadAgain: a provider configured with SANDBOX_TOKEN_FILE presents the
// file's current token with every request, as Gantry's runner refreshes it during a long
// job: an expired token written over it fails the next request, a fresh one after it
// works, with no new Configure in between.
func TestTokenFileIsReadAgain(t *testing.T) {
	w := newWorld(t)
	clearEnv(t)
	file := filepath.Join(t.TempDir(), "cloud-token")
	write := func(expiry time.Time) {
		t.Helper()
		tok := w.iss.Mint(t, sandboxtest.Claims{Org: "acme", Env: "prod", Workspace: "ws-file", Run: "run-1", Phase: "apply", Scope: "write", Expiry: expiry})
		w.tokens = append(w.tokens, tok)
		tmp := file + ".new"
		if err := os.WriteFile(tmp, []byte(tok), 0o400); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(time.Now().Add(10 * time.Minute))
	t.Setenv(EnvEndpoint, w.cloud.URL)
	t.Setenv(EnvTokenFile, file)
	h := newHarness(t)
	if d := errorsOf(h.configure(nil)); d != "" {
		t.Fatal(d)
	}
	bucket := func(name string) (string, string) {
		t.Helper()
		cfg := map[string]any{"name": name, "region": "eu-west", "versioning": false, "retention_days": 1, "public": false}
		p := h.plan("sandbox_bucket", tftypes.Value{}, cfg)
		state, diags := h.apply("sandbox_bucket", tftypes.Value{}, p, cfg)
		w.noTokens(t, nil, diags)
		if d := errorsOf(diags); d != "" {
			return "", d
		}
		return attrsOf(t, state)["id"].(string), ""
	}
	if _, errs := bucket("first"); errs != "" {
		t.Fatal(errs)
	}

	write(time.Now().Add(-time.Minute))
	if _, errs := bucket("with-expired-token"); !strings.Contains(errs, "rejected the provider's token") || !strings.Contains(errs, "token is expired") {
		t.Fatalf("a request with the expired token in the file: %q", errs)
	}

	write(time.Now().Add(10 * time.Minute))
	id, errs := bucket("after-refresh")
	if errs != "" {
		t.Fatal(errs)
	}
	obj, err := w.admin.AdminGet(t.Context(), "bucket", id)
	if err != nil || obj.Namespace.Workspace != "ws-file" {
		t.Fatalf("%+v %v", obj, err)
	}
}
