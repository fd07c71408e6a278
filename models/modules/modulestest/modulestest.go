// Package modulestest serves a module registry over TLS on loopback for tests: the
// registry protocol's discovery and download answers and the archives themselves,
// counting every request, and a client that reaches it under any host name (the
// catalog's sources name registry.acme.example) and trusts only its certificate.
package modulestest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Registry is a module registry on a loopback TLS server.
type Registry struct {
	srv *httptest.Server

	mu       sync.Mutex
	archives map[string][]byte // by "namespace/name/system/version"
	hits     map[string]int    // by request path
	// JSONLocation answers the download request with a JSON body (200) instead of
	// the X-Terraform-Get header (204).
	JSONLocation bool
}

// NewRegistry starts a registry serving archives (by "namespace/name/system/version")
// until t ends. The download answer points at /archives/<namespace>-<name>-<system>-
// <version>.tar.gz?archive=tar.gz, relative to itself; the same path serves the
// archive as an https source.
func NewRegistry(t testing.TB, archives map[string][]byte) *Registry {
	t.Helper()
	r := &Registry{archives: map[string][]byte{}, hits: map[string]int{}}
	for k, v := range archives {
		r.archives[k] = v
	}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// Serve replaces what the registry serves for a module version (a changed archive).
func (r *Registry) Serve(module string, archive []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.archives[module] = archive
}

// Hits is how many requests path had.
func (r *Registry) Hits(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[path]
}

// Requests is how many requests the registry had in all.
func (r *Registry) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.hits {
		n += h
	}
	return n
}

// Client reaches the registry whatever host a URL names.
func (r *Registry) Client() *http.Client { return ClientFor(r.srv) }

// ArchivePath is where the registry serves a module version's archive.
func ArchivePath(module string) string {
	return "/archives/" + strings.ReplaceAll(module, "/", "-") + ".tar.gz"
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.hits[req.URL.Path]++
	jsonLocation := r.JSONLocation
	r.mu.Unlock()
	switch {
	case req.URL.Path == "/.well-known/terraform.json":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"modules.v1": "/v1/modules/", "providers.v1": "/v1/providers/"}`)
	case strings.HasPrefix(req.URL.Path, "/v1/modules/") && strings.HasSuffix(req.URL.Path, "/download"):
		module := strings.TrimSuffix(strings.TrimPrefix(req.URL.Path, "/v1/modules/"), "/download")
		if _, ok := r.archive(module); !ok {
			http.NotFound(w, req)
			return
		}
		// Relative to the download URL, as registries behind a proxy answer.
		location := "../../../../../.." + ArchivePath(module) + "?archive=tar.gz"
		if jsonLocation {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"location": %q}`, location)
			return
		}
		w.Header().Set("X-Terraform-Get", location)
		w.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(req.URL.Path, "/archives/"):
		r.mu.Lock()
		defer r.mu.Unlock()
		for module, data := range r.archives {
			if ArchivePath(module) == req.URL.Path {
				w.Header().Set("Content-Type", "application/gzip")
				_, _ = w.Write(data)
				return
			}
		}
		http.NotFound(w, req)
	default:
		http.NotFound(w, req)
	}
}

func (r *Registry) archive(module string) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, ok := r.archives[module]
	return data, ok
}

// ClientFor is a client that sends every request to srv, whatever host its URL names,
// and trusts srv's certificate (issued to example.com) and nothing else.
func ClientFor(srv *httptest.Server) *http.Client {
	tr := srv.Client().Transport.(*http.Transport).Clone()
	addr := srv.Listener.Addr().String()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	tr.TLSClientConfig.ServerName = "example.com"
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}
