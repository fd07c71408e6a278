package client_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gantry/sandbox/client"
	"gantry/sandbox/sandboxtest"
)

func TestEndpoints(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "ftp://x", "127.0.0.1:8790", "http://", "http://u:p@host", "http://host/?q=1", "unix://host/sock", "unix://"} {
		if _, err := client.New(bad, "tok"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := client.New("http://127.0.0.1:1", ""); err == nil {
		t.Error("empty token accepted")
	}
	c, err := client.New("http://127.0.0.1:1/", "sbx-SECRET")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{c.String(), fmt.Sprintf("%v %+v %#v %s", c, c, c, c)} {
		if strings.Contains(s, "sbx-SECRET") {
			t.Errorf("formatting shows the token: %s", s)
		}
	}
}

func TestUnixSocket(t *testing.T) {
	t.Parallel()
	iss := sandboxtest.NewIssuer(t)
	cloud := sandboxtest.NewCloud(t, iss)
	sock := filepath.Join(t.TempDir(), "cloud.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: cloud.Server}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := client.New("unix://"+sock, iss.Token(t, "acme", "prod", "ws", "write"))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := c.Create(context.Background(), "bucket", map[string]any{"name": "over-a-socket"})
	if err != nil || obj.Attributes["url"] != "https://over-a-socket.bucket.sandbox.internal" {
		t.Fatalf("%+v %v", obj, err)
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if n < 3 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"net-0000000a","kind":"network","namespace":{"org":"o"},"attributes":{"id":"net-0000000a","name":"n","cidr":"10.0.0.0/16"}}`)
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL, "tok", client.WithRetries(5, time.Millisecond))
	obj, err := c.Get(context.Background(), "network", "net-0000000a")
	if err != nil || calls.Load() != 3 || obj.Attributes["region"] != nil {
		t.Fatalf("calls %d, %+v, %v", calls.Load(), obj, err)
	}
	// A POST that may have reached the cloud is not repeated.
	calls.Store(0)
	_, err = c.Create(context.Background(), "network", map[string]any{"name": "n"})
	if client.StatusOf(err) != http.StatusBadGateway || calls.Load() != 1 {
		t.Fatalf("POST: calls %d, %v", calls.Load(), err)
	}
}
