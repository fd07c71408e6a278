package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gantry/sandbox/client"
)

// replace writes token into a temporary file beside path and renames it over path, as
// Gantry's runner refreshes a job's token.
func replace(t *testing.T, path, token string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestTokenFileFollowsRewrites: a client whose token comes from a file presents the
// file's current token: a replacement (rename) is used from the next request on, also
// when it has the same size and modification time as the token before it; an unchanged
// file is not read again.
func TestTokenFileFollowsRewrites(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"objects":[]}`))
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "token")
	replace(t, path, "token-one")
	c, err := client.NewWithSource(srv.URL, client.TokenFile(path))
	if err != nil {
		t.Fatal(err)
	}
	list := func() {
		t.Helper()
		if _, err := c.List(context.Background(), "bucket"); err != nil {
			t.Fatal(err)
		}
	}
	list()
	// The same size and modification time as the first: only the file differs.
	stamp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(path, stamp, stamp); err != nil {
		t.Fatal(err)
	}
	list()
	replace(t, path, "token-two")
	if err := os.Chtimes(path, stamp, stamp); err != nil {
		t.Fatal(err)
	}
	list()
	list()

	// An unchanged file is not read again: rewritten in place with the same size and
	// time (which a refreshing runner never does), the token read before stays in use.
	if err := os.WriteFile(path, []byte("token-xxx\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, stamp, stamp); err != nil {
		t.Fatal(err)
	}
	list()
	mu.Lock()
	got := strings.Join(seen, " ")
	mu.Unlock()
	if want := "token-one token-one token-two token-two token-two"; got != want {
		t.Fatalf("tokens presented: %q, want %q", got, want)
	}
}

// TestTokenFileErrors: an empty, oversized or missing file is an error that names
// neither the token nor anything but the file.
func TestTokenFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, []byte(strings.Repeat("x", client.MaxTokenFile+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := client.ReadTokenFile(empty); !errors.Is(err, client.ErrTokenFileEmpty) {
		t.Errorf("empty: %v", err)
	}
	if _, err := client.ReadTokenFile(big); !errors.Is(err, client.ErrTokenFileTooLarge) {
		t.Errorf("too large: %v", err)
	}
	if _, err := client.TokenFile(filepath.Join(dir, "missing"))(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	// A request whose token cannot be read is not sent.
	c, err := client.NewWithSource("http://127.0.0.1:1", client.TokenFile(empty), client.WithRetries(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(context.Background(), "bucket"); !errors.Is(err, client.ErrTokenFileEmpty) {
		t.Errorf("list with an empty token file: %v", err)
	}
}
