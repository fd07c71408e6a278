//go:build !fast

// Live: needs the pinned SeaweedFS (tools/seaweedfs, built into the user cache the first time: about ten CPU-minutes) and PostgreSQL.

package seaweed_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/db/dbtest"
	"gantry/models/identity"
	"gantry/models/keyring"
	"gantry/runner/targets/seaweed"
	"gantry/runner/tofu"
)

// testLog is a writer into the test's log, for the build's progress.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// lockedBuffer is the server's log, written by its process's output copiers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func weedBinary(t *testing.T) string {
	t.Helper()
	root, err := tofu.RepoRoot(".")
	require.NoError(t, err)
	path, err := seaweed.EnsureBinary(t.Context(), root, testLog{t})
	require.NoError(t, err)
	return path
}

// gantryIssuer is Gantry's real workload issuer (keys in a real database, sealed by a real
// keyring) served over TLS as a cloud fetches it: discovery and key set at the issuer URL.
type gantryIssuer struct {
	*identity.Issuer
	URL   string
	CAPEM []byte           // the TLS server's certificate, its own CA
	Past  *identity.Issuer // the same issuer an hour ago: its tokens have expired
}

func newGantryIssuer(t *testing.T) gantryIssuer {
	t.Helper()
	gdb := dbtest.New(t)
	keys, err := keyring.Parse(keyring.NewKeySpec("kek-seaweed"))
	require.NoError(t, err)
	var iss atomic.Pointer[identity.Issuer] // set once the URL is known; read by the handlers
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(iss.Load().Discovery())
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		b, err := iss.Load().JWKS(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	iss.Store(identity.NewIssuer(gdb, keys, srv.URL, identity.Options{}))
	past := identity.NewIssuer(gdb, keys, srv.URL, identity.Options{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
	return gantryIssuer{Issuer: iss.Load(), URL: srv.URL, Past: past,
		CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
}

// claimsFor are the claims of a phase of a run in workspace ws, for the store's audience; an
// apply names a plan and what its approval covered.
func claimsFor(ws string, phase identity.Phase, approved ...string) identity.Claims {
	c := identity.Claims{OrganizationID: "org-s3", EnvironmentID: "env-s3", WorkspaceID: ws, RunID: "run-1",
		Phase: phase, Audience: seaweed.Audience}
	if phase == identity.PhaseApply {
		c.PlanDigest, c.Lease, c.Approved = "sha256:"+strings.Repeat("ab", 32), 1, approved
	}
	return c
}

func mint(t *testing.T, iss *identity.Issuer, c identity.Claims) string {
	t.Helper()
	token, _, err := iss.Mint(t.Context(), c)
	require.NoError(t, err)
	return token
}

func randomID(t *testing.T) string {
	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// The S3 acceptance with Gantry's real issuer: a phase's apply token, handed to the
// standard AWS SDK credential chain by environment alone, is exchanged for temporary
// credentials that create a bucket of its workspace and write and read an object in it, but
// delete a bucket only when the approval covered a delete; another
// workspace's token, an expired one, one for another audience and a read token are refused the
// write role; a read token's read role reads but does not create. No token reaches the store's
// log or files.
func TestSTSExchangesGantryWorkloadTokens(t *testing.T) {
	weed := weedBinary(t)
	iss := newGantryIssuer(t)
	ws, other := "ws-"+randomID(t), "ws-"+randomID(t)
	write, read := seaweed.GantryRoles(ws, "gantry", map[string]string{"gantry_ws": ws})
	otherWrite, _ := seaweed.GantryRoles(other, "gantry", map[string]string{"gantry_ws": other})
	var log lockedBuffer
	started := time.Now()
	srv, err := seaweed.Start(t.Context(), seaweed.Options{Binary: weed, Log: &log, Dir: t.TempDir(),
		Providers: []seaweed.Provider{{Name: "gantry", Issuer: iss.URL, Audiences: []string{seaweed.Audience}, CAPEM: iss.CAPEM}},
		Roles:     []seaweed.Role{write, read, otherWrite}})
	require.NoError(t, err, "server log:\n%s", log.String())
	t.Logf("SeaweedFS ready in %s at %s", time.Since(started).Round(time.Millisecond), srv.URL)
	t.Cleanup(func() { require.NoError(t, srv.Stop()) })

	bucket, empty := "gantry-"+ws+"-data", "gantry-"+ws+"-empty"
	apply := mint(t, iss.Issuer, claimsFor(ws, identity.PhaseApply, identity.ChangeCreate))
	ops := []string{"create:" + bucket, "put:" + bucket + "/hello.txt", "head:" + bucket + "/hello.txt",
		"create:" + empty, "delete-bucket:" + empty, "create:gantry-" + other + "-data"}
	steps := probe(t, phaseEnv(t, srv, srv.RoleARNs[write.Name], apply), ops...)
	require.Equal(t, "creds=ok create:"+bucket+"=ok put:"+bucket+"/hello.txt=ok head:"+bucket+"/hello.txt=ok "+
		"create:"+empty+"=ok delete-bucket:"+empty+"=AccessDenied create:gantry-"+other+"-data=AccessDenied",
		results(steps, ops...), "%v", steps)
	require.Equal(t, "WebIdentityCredentials", steps["creds"].Source)

	// The target enforces the review: only an apply whose approval covered a delete deletes a
	// bucket (an apply without changes approves nothing).
	for _, c := range []struct{ approved, want string }{
		{"", "AccessDenied"}, {"create update replace", "AccessDenied"}, {"delete", "ok"},
	} {
		token := mint(t, iss.Issuer, claimsFor(ws, identity.PhaseApply, strings.Fields(c.approved)...))
		steps := probe(t, phaseEnv(t, srv, srv.RoleARNs[write.Name], token), "delete-bucket:"+empty)
		require.Equal(t, "creds=ok delete-bucket:"+empty+"="+c.want, results(steps, "delete-bucket:"+empty), "approved %q: %v", c.approved, steps)
	}

	refused := map[string]struct{ role, token, want string }{
		// The write role trusts its workspace's tokens only (oidc:gantry_ws).
		"another workspace's apply token": {write.Name, mint(t, iss.Issuer, claimsFor(other, identity.PhaseApply, identity.ChangeCreate)), "AccessDenied"},
		"an expired apply token":          {write.Name, mint(t, iss.Past, claimsFor(ws, identity.PhaseApply, identity.ChangeCreate)), "ExpiredTokenException"},
		"an apply token for another audience": {write.Name, mint(t, iss.Issuer, func() identity.Claims {
			c := claimsFor(ws, identity.PhaseApply, identity.ChangeCreate)
			c.Audience = "kube.gantry"
			return c
		}()), "InvalidParameterValue"},
		"a plan token on the write role":  {write.Name, mint(t, iss.Issuer, claimsFor(ws, identity.PhasePlan)), "AccessDenied"},
		"an apply token on the read role": {read.Name, apply, "AccessDenied"},
	}
	for name, c := range refused {
		steps := probe(t, phaseEnv(t, srv, srv.RoleARNs[c.role], c.token), "create:"+bucket+"-x")
		require.Equal(t, "creds="+c.want, results(steps), "%s: %v", name, steps)
	}

	// A plan token on the read role reads the workspace's object, and changes nothing.
	plan := mint(t, iss.Issuer, claimsFor(ws, identity.PhasePlan))
	ops = []string{"head:" + bucket + "/hello.txt", "put:" + bucket + "/plan.txt", "create:" + bucket + "-plan",
		"delete-object:" + bucket + "/hello.txt"}
	steps = probe(t, phaseEnv(t, srv, srv.RoleARNs[read.Name], plan), ops...)
	require.Equal(t, "creds=ok head:"+bucket+"/hello.txt=ok put:"+bucket+"/plan.txt=AccessDenied create:"+bucket+"-plan=AccessDenied "+
		"delete-object:"+bucket+"/hello.txt=AccessDenied", results(steps, ops...), "%v", steps)

	// The canary: no token in the store's log or in any file it wrote.
	tokens := []string{apply, plan}
	for _, c := range refused {
		tokens = append(tokens, c.token)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", srv.PID))
	require.NoError(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM") || strings.HasPrefix(line, "VmRSS") {
			t.Log("SeaweedFS " + strings.Join(strings.Fields(line), " ")) // a measurement, for CI's log
		}
	}
	stopping := time.Now()
	require.NoError(t, srv.Stop())
	t.Logf("SeaweedFS stopped in %s", time.Since(stopping).Round(time.Millisecond))
	for _, tok := range tokens {
		sig := tok[strings.LastIndex(tok, ".")+1:]
		require.NotContains(t, log.String(), sig)
		require.NoError(t, filepath.WalkDir(srv.Dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Type()&fs.ModeSocket != 0 {
				return err
			}
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.False(t, bytes.Contains(b, []byte(sig)), "a token's signature in %s", path)
			return nil
		}))
	}
}

// A second EnsureBinary finds the binary of the first in the user cache, stamped with the
// pinned commit, and builds nothing (EnsurePinned writes "building ..." before any build).
func TestEnsureBinaryIsCached(t *testing.T) {
	first := weedBinary(t)
	root, err := tofu.RepoRoot(".")
	require.NoError(t, err)
	var log bytes.Buffer
	started := time.Now()
	second, err := seaweed.EnsureBinary(t.Context(), root, &log)
	require.NoError(t, err)
	t.Logf("cached EnsureBinary: %s", time.Since(started).Round(time.Millisecond)) // a measurement
	require.Equal(t, first, second)
	require.Empty(t, log.String())
	dir, err := seaweed.CacheDir(root)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "weed"), second)
	version, err := seaweed.PinnedVersion(root)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(version, "-"+seaweed.BinaryVersion(t.Context(), second)), version)
}
