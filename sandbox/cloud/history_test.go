package cloud_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"gantry/sandbox/api"
	"gantry/sandbox/cloud"
	"gantry/sandbox/sandboxtest"
)

// TestBreakglassTokensAndHistory: a break-glass window's token writes to its workspace and
// every change records who made it (the window, a run, the admin API), also after a
// delete; a read token of the workspace reads the history as Gantry's change history
// protocol asks for it (GET /v1/changes/<type>/<id>), another workspace's token gets nothing; a breakglass token must name its window, and only it.
func TestBreakglassTokensAndHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	apply := e.as("acme", "prod", "ws-a", "write")
	network, _ := baseline(t, apply)
	bucket := must(apply.Create(ctx(), "bucket", map[string]any{"name": "logs", "region": "eu-west"}))(t)

	glass := newClient(t, e.cloud.URL, e.iss.Mint(t, sandboxtest.Claims{Org: "acme", Env: "prod", Workspace: "ws-a",
		Window: "bgw-1", Phase: cloud.PhaseBreakglass, Scope: "write"}))
	changed := must(glass.Update(ctx(), "network", network.ID, map[string]any{"name": "app-net", "cidr": "10.20.0.0/15", "region": "eu-west", "labels": map[string]any{"managed_by": "gantry"}}))(t)
	if changed.LastChange.By != "breakglass" || changed.LastChange.Phase != "breakglass" || changed.LastChange.Run != "" {
		t.Errorf("last change %+v", changed.LastChange)
	}
	noErr(t, glass.Delete(ctx(), "bucket", bucket.ID))
	must(e.admin.AdminUpdate(ctx(), "network", network.ID, map[string]any{"labels": map[string]any{"team": "ops"}}, "INC-7"))(t)

	read := e.iss.Token(t, "acme", "prod", "ws-a", "read")
	h := readHistory(t, e.cloud.URL, read, "sandbox_network", network.ID)
	if len(h.Changes) != 3 || h.Deleted || h.Namespace != (api.Namespace{Org: "acme", Env: "prod", Workspace: "ws-a"}) {
		t.Fatalf("network history %+v", h)
	}
	if c := h.Changes[0]; c.By != "run" || c.Action != "create" || c.Run != "run-1" || c.Phase != "apply" || c.Generation != 1 {
		t.Errorf("create %+v", c)
	}
	if c := h.Changes[1]; c.By != "breakglass" || c.Window != "bgw-1" || c.Action != "update" || c.Generation != 2 ||
		c.Subject != "org:acme:env:prod:ws:ws-a:window:bgw-1:phase:breakglass" {
		t.Errorf("break-glass change %+v", c)
	}
	if c := h.Changes[2]; c.By != "admin" || c.Reason != "INC-7" || c.Generation != 3 {
		t.Errorf("admin change %+v", c)
	}
	// A deleted object keeps its history, with who deleted it.
	h = readHistory(t, e.cloud.URL, read, "sandbox_bucket", bucket.ID)
	if !h.Deleted || len(h.Changes) != 2 || h.Changes[1].Action != "delete" || h.Changes[1].Window != "bgw-1" {
		t.Errorf("bucket history %+v", h)
	}
	// Another workspace, organization, a made-up id or a type of another cloud: nothing (404).
	for _, tok := range []string{e.iss.Token(t, "acme", "prod", "ws-b", "read"), e.iss.Token(t, "globex", "prod", "ws-a", "read")} {
		if got := historyStatus(t, e.cloud.URL, tok, "sandbox_network", network.ID); got != http.StatusNotFound {
			t.Errorf("another namespace read the history: %d", got)
		}
	}
	for typ, id := range map[string]string{"sandbox_network": "net-00000000", "aws_instance": "i-1", "network": network.ID,
		"sandbox_network%00": network.ID, "sandbox_..%2Fnetwork": network.ID, "sandbox_bucket": network.ID} {
		if got := historyStatus(t, e.cloud.URL, read, typ, id); got != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", typ, id, got)
		}
	}
	if got := historyStatus(t, e.cloud.URL, "", "sandbox_network", network.ID); got != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", got)
	}

	// A breakglass token names its window; no other token does; a plan token never writes.
	for name, c := range map[string]sandboxtest.Claims{
		"breakglass without window": {Org: "acme", Env: "prod", Workspace: "ws-a", Phase: cloud.PhaseBreakglass, Scope: "write"},
		"apply naming a window":     {Org: "acme", Env: "prod", Workspace: "ws-a", Run: "run-2", Window: "bgw-1", Phase: "apply", Scope: "write"},
		"plan writing":              {Org: "acme", Env: "prod", Workspace: "ws-a", Run: "run-2", Phase: "plan", Scope: "write"},
	} {
		_, err := newClient(t, e.cloud.URL, e.iss.Mint(t, c)).List(ctx(), "network")
		t.Logf("%s: %v", name, err)
		wantStatus(t, err, 401, api.CodeUnauthenticated)
	}
}

// historyGet asks for the change history of typ id as Gantry's drift checks do.
func historyGet(t *testing.T, endpoint, token, typ, id string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(), http.MethodGet, endpoint+"/v1/changes/"+typ+"/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func historyStatus(t *testing.T, endpoint, token, typ, id string) int {
	t.Helper()
	resp := historyGet(t, endpoint, token, typ, id)
	resp.Body.Close()
	return resp.StatusCode
}

func readHistory(t *testing.T, endpoint, token, typ, id string) cloud.History {
	t.Helper()
	resp := historyGet(t, endpoint, token, typ, id)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("history of %s %s: %d", typ, id, resp.StatusCode)
	}
	var h cloud.History
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}
