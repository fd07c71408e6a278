package cloudhistory_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gantry/runner/cloudhistory"
	"gantry/sandbox/client"
	"gantry/sandbox/cloud"
	"gantry/sandbox/sandboxtest"
)

// TestSandboxCloudServesTheProtocol: the client reads, from a real sandbox cloud, who
// changed a resource (a run's apply, then a break-glass window, then a delete), with a
// read token of the resource's workspace; another workspace's token and another cloud's
// resource type get ErrNoHistory.
func TestSandboxCloudServesTheProtocol(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	iss := sandboxtest.NewIssuer(t)
	sc := sandboxtest.NewCloud(t, iss)
	as := func(token string) *client.Client {
		c, err := client.New(sc.URL, token, client.WithRetries(1, 0))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	apply := as(iss.Token(t, "acme", "prod", "ws-a", "write"))
	bucket, err := apply.Create(ctx, "bucket", map[string]any{"name": "logs", "region": "eu-west"})
	if err != nil {
		t.Fatal(err)
	}
	glass := as(iss.Mint(t, sandboxtest.Claims{Org: "acme", Env: "prod", Workspace: "ws-a", Window: "bgw-7",
		Phase: cloud.PhaseBreakglass, Scope: "write"}))
	if err := glass.Delete(ctx, "bucket", bucket.ID); err != nil {
		t.Fatal(err)
	}

	c := cloudhistory.Client{Endpoint: sc.URL + "/"}
	read := iss.Token(t, "acme", "prod", "ws-a", "read")
	got, err := c.Changes(ctx, read, "sandbox_bucket", bucket.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("changes %+v, want the create and the delete", got)
	}
	if ch := got[0]; ch.By != "run" || ch.Action != "create" || ch.Run != "run-1" || ch.Phase != "apply" || ch.At.IsZero() {
		t.Errorf("the run's create: %+v", ch)
	}
	if ch := got[1]; ch.By != "breakglass" || ch.Action != "delete" || ch.Window != "bgw-7" || ch.Subject == "" {
		t.Errorf("the window's delete: %+v", ch)
	}

	for name, ask := range map[string]struct{ token, typ, id string }{
		"another workspace":  {iss.Token(t, "acme", "prod", "ws-b", "read"), "sandbox_bucket", bucket.ID},
		"another cloud type": {read, "aws_s3_bucket", bucket.ID},
		"an unknown id":      {read, "sandbox_bucket", "bkt-00000000"},
	} {
		if _, err := c.Changes(ctx, ask.token, ask.typ, ask.id); !errors.Is(err, cloudhistory.ErrNoHistory) {
			t.Errorf("%s: %v, want ErrNoHistory", name, err)
		}
	}
}

// TestClientSpeaksTheProtocol pins the request (path with escaped type and id, bearer
// token, GET) and the handling of answers a cloud may give: errors say the status and
// the cloud's message with the token taken out, and no answer is trusted blindly.
func TestClientSpeaksTheProtocol(t *testing.T) {
	t.Parallel()
	const token = "header.payloadpayload.signaturesignature"
	var answer func(w http.ResponseWriter)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.EscapedPath() != "/base/v1/changes/odd%2Ftype/id%20with%20space" ||
			r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unexpected request "+r.Method+" "+r.URL.EscapedPath(), http.StatusTeapot)
			return
		}
		answer(w)
	}))
	t.Cleanup(srv.Close)
	c := cloudhistory.Client{Endpoint: srv.URL + "/base"}
	ask := func() error {
		_, err := c.Changes(context.Background(), token, "odd/type", "id with space")
		return err
	}

	answer = func(w http.ResponseWriter) {
		_, _ = w.Write([]byte(`{"id":"x","generation":3,"changes":[{"by":"admin","action":"update","reason":"INC-1","at":"2026-12-06T01:02:03Z","extra":1}]}`))
	}
	got, err := c.Changes(context.Background(), token, "odd/type", "id with space")
	if err != nil || len(got) != 1 || got[0].By != "admin" || got[0].Reason != "INC-1" || got[0].At.Year() != 2026 {
		t.Fatalf("a good answer: %+v, %v", got, err)
	}

	answer = func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":{"message":"token ` + token + ` (signaturesignature) may not read this"}}`))
	}
	err = ask()
	if err == nil || !strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "signaturesignature") ||
		strings.Contains(err.Error(), "payloadpayload") {
		t.Errorf("a refusal: %v (want the status and no part of the token)", err)
	}

	for name, body := range map[string]string{
		"not JSON":     "<html>proxy error</html>",
		"wrong shape":  `{"changes":"none"}`,
		"over a MiB":   `{"changes":[],"pad":"` + strings.Repeat("x", 1<<20) + `"}`,
		"truncated":    `{"changes":[{"by":"run"`,
		"a NUL inside": "{\"changes\":[{\"by\":\"run\x00\"}]}",
	} {
		answer = func(w http.ResponseWriter) { _, _ = w.Write([]byte(body)) }
		if err := ask(); err == nil {
			t.Errorf("%s: read as a history", name)
		}
	}

	answer = func(w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound) }
	if err := ask(); !errors.Is(err, cloudhistory.ErrNoHistory) {
		t.Errorf("404: %v, want ErrNoHistory", err)
	}

	for _, endpoint := range []string{"", "ftp://cloud.example", "not a url", "http://"} {
		bad := cloudhistory.Client{Endpoint: endpoint}
		if _, err := bad.Changes(context.Background(), token, "sandbox_bucket", "bkt-1"); err == nil {
			t.Errorf("endpoint %q was used", endpoint)
		}
	}
	if _, err := c.Changes(context.Background(), token, "", "x"); err == nil {
		t.Error("a request without a type was sent")
	}
}
