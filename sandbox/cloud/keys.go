package cloud

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"gantry/sandbox/api"
)

// Static API keys are the standing credential every real cloud also offers: a long-lived bearer
// secret bound to one environment of one organization, with scope "read" or "write". A key acts
// for every workspace of its environment: it sees and changes every workspace's objects there,
// and what it creates lives in the environment-wide namespace (org, env, "*"), which workload
// tokens (bound to one workspace) never see. That breadth, and the fact that a key does not
// expire, is why Gantry reports an environment that uses one as a standing-credential finding.
//
// Keys are created and deleted through the admin API. The cloud shows a key once, when it is
// created, and keeps only its SHA-256 digest, one file per key: <DataDir>/keys/<id>.json.

// AnyWorkspace is the workspace of objects created with a static API key: such a key acts
// for every workspace of its environment, so what it creates belongs to none of them.
const AnyWorkspace = "*"

// KeyRequest is the body of POST /admin/v1/keys: a static API key for one environment.
// (These wire types live here, not in sandbox/api, so that the provider, which never
// handles keys specially, is not rebuilt: its lock hash is pinned in the catalog.)
type KeyRequest struct {
	Organization string `json:"organization"`
	Environment  string `json:"environment"`
	Scope        string `json:"scope"` // "read" or "write"
	Reason       string `json:"reason,omitempty"`
}

// Key describes a static API key. It never holds the key itself: the cloud keeps only its
// SHA-256 digest, and returns the key once, in CreatedKey.
type Key struct {
	ID           string    `json:"id"`
	Organization string    `json:"organization"`
	Environment  string    `json:"environment"`
	Scope        string    `json:"scope"`
	Reason       string    `json:"reason,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
}

// CreatedKey is the answer to POST /admin/v1/keys: the only time the key is shown.
type CreatedKey struct {
	Key
	Secret string `json:"key"`
}

// KeyList is the body of GET /admin/v1/keys.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// KeyPrefix starts every static API key, so the cloud tells keys from workload tokens (JWTs)
// without asking the issuer.
const KeyPrefix = "sbxk-"

// storedKey is a key's file: its description and the digest of the secret, never the secret.
type storedKey struct {
	Key
	SHA256 string `json:"sha256"`
}

var keyIDPattern = regexp.MustCompile(`^key-[0-9a-f]{16}$`)

// keyStore keeps the keys, one file each, read from disk on every use (so a key deleted through
// one server is refused by every server on the same directory at once).
type keyStore struct{ dir string }

func newKeyStore(dataDir string) (*keyStore, error) {
	dir := filepath.Join(dataDir, "keys")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox cloud: creating the key directory: %w", err)
	}
	return &keyStore{dir: dir}, nil
}

func (ks *keyStore) path(id string) string { return filepath.Join(ks.dir, id+".json") }

func (ks *keyStore) list() ([]storedKey, error) {
	entries, err := os.ReadDir(ks.dir)
	if err != nil {
		return nil, fmt.Errorf("listing keys: %w", err)
	}
	var out []storedKey
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !keyIDPattern.MatchString(id) {
			continue
		}
		body, err := os.ReadFile(ks.path(id))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("reading key %s: %w", id, err)
		}
		var k storedKey
		if err := json.Unmarshal(body, &k); err != nil || k.ID != id {
			return nil, fmt.Errorf("the file of key %s is damaged", id)
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// find returns the key whose digest matches secret's. Every stored digest is compared, in
// constant time, so the answer's timing does not depend on which key (if any) matched.
func (ks *keyStore) find(secret string) (storedKey, bool, error) {
	keys, err := ks.list()
	if err != nil {
		return storedKey{}, false, err
	}
	sum := sha256.Sum256([]byte(secret))
	var found storedKey
	ok := false
	for _, k := range keys {
		want, err := hex.DecodeString(k.SHA256)
		if err != nil || len(want) != sha256.Size {
			continue
		}
		if subtle.ConstantTimeCompare(sum[:], want) == 1 {
			found, ok = k, true
		}
	}
	return found, ok, nil
}

// save writes a key file atomically, the way objects are written.
func (ks *keyStore) save(k storedKey) error {
	body, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(ks.dir, k.ID+".json", append(body, '\n')); err != nil {
		return fmt.Errorf("saving key %s: %w", k.ID, err)
	}
	return nil
}

func (ks *keyStore) remove(id string) error {
	if !keyIDPattern.MatchString(id) {
		return errNotFound
	}
	err := os.Remove(ks.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return errNotFound
	}
	if err != nil {
		return fmt.Errorf("deleting key %s: %w", id, err)
	}
	return syncDir(ks.dir)
}

// authenticateKey turns a static API key into an identity for its environment.
func (s *Server) authenticateKey(raw string) (Identity, error) {
	k, ok, err := s.keys.find(raw)
	if err != nil {
		return Identity{}, err
	}
	if !ok {
		return Identity{}, &authError{"unknown or deleted static API key"}
	}
	return Identity{Subject: "key:" + k.ID, KeyID: k.ID, Org: k.Organization, Env: k.Environment,
		Workspace: AnyWorkspace, Scope: k.Scope}, nil
}

// adminKeys wraps the key endpoints: the admin token, like every other admin endpoint.
func (s *Server) adminKeys(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.adminDigest == nil {
			writeError(w, &httpError{status: http.StatusNotFound, code: api.CodeAdminDisabled, msg: "the admin API is disabled: the sandbox cloud was started without an admin token"})
			return
		}
		if !s.isAdmin(r) {
			s.log.Warn("sandbox cloud: rejected an admin call", "method", r.Method, "path", r.URL.Path)
			writeError(w, &httpError{status: http.StatusUnauthorized, code: api.CodeUnauthenticated, msg: "the admin API needs Authorization: Bearer <admin token>"})
			return
		}
		if err := h(w, r); err != nil {
			var he *httpError
			if !errors.As(err, &he) {
				s.log.Error("sandbox cloud: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
			}
			writeError(w, err)
		}
	}
}

func badRequest(format string, args ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, code: api.CodeBadRequest, msg: fmt.Sprintf(format, args...)}
}

// adminCreateKey creates a key and returns it, the only time it is ever shown.
func (s *Server) adminCreateKey(w http.ResponseWriter, r *http.Request) error {
	var body KeyRequest
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	for _, f := range []struct{ name, val string }{{"organization", body.Organization}, {"environment", body.Environment}} {
		switch {
		case strings.TrimSpace(f.val) == "":
			return badRequest("%q is required: the key acts in one environment of one organization", f.name)
		case len(f.val) > 200:
			return badRequest("%q is too long", f.name)
		case f.val == AnyWorkspace || strings.ContainsAny(f.val, "/ \t\r\n"):
			return badRequest("%q may not contain %q, spaces or slashes", f.name, AnyWorkspace)
		}
	}
	if body.Scope != ScopeRead && body.Scope != ScopeWrite {
		return badRequest("\"scope\" must be %q or %q", ScopeRead, ScopeWrite)
	}
	if len(body.Reason) > 500 {
		return badRequest("\"reason\" is too long")
	}
	secret := KeyPrefix + randomKey()
	sum := sha256.Sum256([]byte(secret))
	k := storedKey{Key: Key{ID: "key-" + randomHex(8), Organization: body.Organization, Environment: body.Environment,
		Scope: body.Scope, Reason: body.Reason, CreatedAt: time.Now().UTC()}, SHA256: hex.EncodeToString(sum[:])}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.keys.save(k); err != nil {
		return err
	}
	s.log.Warn("sandbox cloud: static API key created (a standing credential)", "key", k.ID, "namespace", k.Organization+"/"+k.Environment, "scope", k.Scope, "reason", k.Reason)
	writeJSON(w, http.StatusCreated, CreatedKey{Key: k.Key, Secret: secret})
	return nil
}

// adminListKeys lists the keys, never their secrets nor digests.
func (s *Server) adminListKeys(w http.ResponseWriter, _ *http.Request) error {
	keys, err := s.keys.list()
	if err != nil {
		return err
	}
	out := KeyList{Keys: make([]Key, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, k.Key)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// adminDeleteKey deletes a key: every later call with it is 401.
func (s *Server) adminDeleteKey(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.keys.remove(id); errors.Is(err, errNotFound) {
		return &httpError{status: http.StatusNotFound, code: api.CodeNotFound, msg: fmt.Sprintf("key %s not found", id)}
	} else if err != nil {
		return err
	}
	s.log.Warn("sandbox cloud: static API key deleted", "key", id, "reason", r.URL.Query().Get("reason"))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// randomKey is 32 random bytes, base64url without padding.
func randomKey() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
