package cloud_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gantry/sandbox/client"
	"gantry/sandbox/cloud"
	"gantry/sandbox/sandboxtest"
)

// TestAppliesCountedPerPlanDigest: every apply token's first change is recorded under the
// plan digest it names, once per attempt (its lease), durably across a restart of the
// cloud; a second attempt at the same digest shows as a plan applied twice. Reads, plan
// tokens and static keys are not applies.
func TestAppliesCountedPerPlanDigest(t *testing.T) {
	t.Parallel()
	iss := sandboxtest.NewIssuer(t)
	dir := t.TempDir()
	first := sandboxtest.NewCloudAt(t, iss, dir)
	d1 := "sha256:" + strings.Repeat("a1", 32)
	d2 := "sha256:" + strings.Repeat("b2", 32)
	apply := func(url, run, digest string, lease int64) *client.Client {
		return newClient(t, url, iss.Mint(t, sandboxtest.Claims{Org: "acme", Env: "prod", Workspace: "ws-a",
			Run: run, Phase: "apply", Scope: "write", PlanDigest: digest, Lease: lease}))
	}

	// One attempt, two changes and a read: one entry.
	a := apply(first.URL, "run-1", d1, 4)
	net := must(a.Create(ctx(), "network", map[string]any{"name": "n", "cidr": "10.1.0.0/16"}))(t)
	subnet := must(a.Create(ctx(), "subnet", map[string]any{"network_id": net.ID, "name": "s", "cidr": "10.1.1.0/24"}))(t)
	must(a.Get(ctx(), "network", net.ID))(t)
	// A plan token reads; it is no apply.
	must(newClient(t, first.URL, iss.Token(t, "acme", "prod", "ws-a", "read")).List(ctx(), "network"))(t)
	got := applies(t, first)
	if len(got.Plans) != 1 || got.Plans[0].PlanDigest != d1 || len(got.Plans[0].Attempts) != 1 || len(got.Twice()) != 0 {
		t.Fatalf("after one attempt: %+v", got)
	}
	if at := got.Plans[0].Attempts[0]; at.Run != "run-1" || at.Lease != 4 || at.Org != "acme" || at.Env != "prod" || at.Workspace != "ws-a" || at.At.IsZero() {
		t.Errorf("attempt: %+v", at)
	}

	// A restarted cloud on the same directory knows the attempt: its next change is no new one.
	second := sandboxtest.NewCloudAt(t, iss, dir)
	a2 := apply(second.URL, "run-1", d1, 4)
	must(a2.Update(ctx(), "network", net.ID, map[string]any{"name": "n", "cidr": "10.0.0.0/15"}))(t)
	if got := applies(t, second); len(got.Plans) != 1 || len(got.Plans[0].Attempts) != 1 {
		t.Fatalf("after a restart: %+v", got)
	}

	// Another plan is another entry; a refused change still counts as an attempt.
	b := apply(second.URL, "run-2", d2, 9)
	if _, err := b.Create(ctx(), "network", map[string]any{"name": "BAD NAME", "cidr": "10.9.0.0/16"}); err == nil {
		t.Fatal("an invalid network was created")
	}
	// The same plan applied again, by a second attempt: the ledger says twice.
	again := apply(second.URL, "run-1", d1, 5)
	if err := again.Delete(ctx(), "subnet", subnet.ID); err != nil {
		t.Fatal(err)
	}
	got = applies(t, second)
	if len(got.Plans) != 2 {
		t.Fatalf("plans: %+v", got)
	}
	twice := got.Twice()
	if len(twice) != 1 || twice[0].PlanDigest != d1 || len(twice[0].Attempts) != 2 || twice[0].Attempts[1].Lease != 5 {
		t.Fatalf("twice: %+v", twice)
	}

	// A static write key changes things outside any plan: not counted.
	key := must(keysOf(t, second.URL, second.AdminToken).create("acme", "prod", "write", "legacy"))(t)
	must(newClient(t, second.URL, key.Secret).Create(ctx(), "network", map[string]any{"name": "k", "cidr": "10.5.0.0/16"}))(t)
	if got := applies(t, second); len(got.Plans) != 2 {
		t.Fatalf("a static key's change was counted: %+v", got)
	}

	// The admin endpoint needs the admin token; a workload token is not one.
	for _, tok := range []string{"", "wrong", iss.Token(t, "acme", "prod", "ws-a", "write")} {
		req, _ := http.NewRequest(http.MethodGet, second.URL+"/admin/v1/applies", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %.10q: status %d", tok, resp.StatusCode)
		}
	}
}

// TestReadAppliesSurvivesACutLine: a line cut short by a crash at the end of the ledger is
// skipped; damage anywhere else is an error, never a silently shorter ledger.
func TestReadAppliesSurvivesACutLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	line := `{"plan_digest":"sha256:` + strings.Repeat("c3", 32) + `","run":"run-1","lease":1,"org":"o","env":"e","workspace":"w","at":"2026-12-02T10:00:00Z"}`
	write := func(body string) {
		if err := os.WriteFile(filepath.Join(dir, "applies.jsonl"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(line + "\n" + line + "\n" + line[:40])
	a, err := cloud.ReadApplies(dir)
	if err != nil || len(a.Plans) != 1 || len(a.Plans[0].Attempts) != 1 {
		t.Fatalf("a duplicated line and a cut last line: %+v, %v", a, err)
	}
	write(line[:40] + "\n" + line + "\n")
	if _, err := cloud.ReadApplies(dir); err == nil {
		t.Fatal("a damaged line in the middle was skipped")
	}
	if a, err := cloud.ReadApplies(t.TempDir()); err != nil || len(a.Plans) != 0 {
		t.Fatalf("no ledger yet: %+v, %v", a, err)
	}
}

// applies reads the ledger through the admin endpoint, and checks it is what the file says.
func applies(t *testing.T, c *sandboxtest.Cloud) cloud.Applies {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.URL+"/admin/v1/applies", nil)
	req.Header.Set("Authorization", "Bearer "+c.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out cloud.Applies
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /admin/v1/applies: %d %v", resp.StatusCode, err)
	}
	file, err := cloud.ReadApplies(c.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := must(json.Marshal(out))(t), must(json.Marshal(file))(t); string(a) != string(b) {
		t.Errorf("the endpoint says %s, the file %s", a, b)
	}
	return out
}
