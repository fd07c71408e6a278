// Package cloud is the sandbox cloud: a small HTTP JSON API that Gantry ships for development and
// tests. It keeps live resources (networks, subnets, databases, buckets, instances and org
// policies) durably, one JSON file per object, and authenticates every call with a Gantry workload
// identity token, enforcing the token's scope as real clouds do with web identity federation:
//
//   - workspace-scoped objects live in the namespace (gantry_org, gantry_env, gantry_ws) of the
//     token that created them; a token sees and changes only its own namespace (anything else is
//     404, never 403);
//   - sandbox_org_policy objects live in the organization: any token of the org reads them, write
//     tokens of the org change them;
//   - scope "read" tokens (plan, verify) may only GET: any mutation is 403;
//   - missing, unsigned, expired or wrong-audience tokens are 401;
//   - when the issuer offers token introspection (Gantry's does), a token it no longer
//     vouches for (its break-glass window ended, its phase over or cancelled) is 401 from
//     that moment on: the issuer is asked at every call (introspect.go).
//
// Static API keys ("sbxk-..."), the standing credential real clouds offer too, are created
// through the admin API for one environment. A key acts for every workspace of its environment;
// its scope ("read" or "write") holds in every phase. See keys.go.
//
// A break-glass admin API (/admin/v1/...), authenticated with a static admin token, changes objects
// out of band for drift tests and the manual change path. See sandbox/README.md for the API.
package cloud

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"gantry/sandbox/api"
)

// Config configures a sandbox cloud.
type Config struct {
	// DataDir holds the objects (created with mode 0700 if missing).
	DataDir string
	// Issuer is the workload identity issuer's URL; its OIDC discovery document and JWKS are
	// fetched from there, and its introspection endpoint, when the document names one, is
	// asked about every workload token. To use a custom HTTP client for that, pass a context
	// made with oidc.ClientContext to New.
	Issuer string
	// Audience the tokens must carry; default "sandbox".
	Audience string
	// AdminToken authenticates the break-glass admin API; empty disables that API.
	AdminToken string
	// Logger; default slog.Default(). Tokens are never logged.
	Logger *slog.Logger
}

// Server is the sandbox cloud's HTTP handler.
type Server struct {
	cfg         Config
	log         *slog.Logger
	store       *store
	history     *historyStore
	keys        *keyStore
	applies     *appliesLedger
	mux         *http.ServeMux
	bg          context.Context
	adminDigest []byte

	mu sync.Mutex // serialises changes to the store

	authMu      sync.Mutex // guards the verifier fields
	verifier    *oidc.IDTokenVerifier
	lastAttempt time.Time
	lastErr     error
	// introspection is the issuer's introspection endpoint ("": it offers none), asked
	// at every workload call (introspect.go); ended are the tokens it said are over.
	introspection string
	ended         endedTokens
}

// maxBody bounds request bodies.
const maxBody = 1 << 20

// New opens (or creates) the data directory and starts discovering the issuer in the
// background: the issuer is often the process about to serve once New returns, so New
// must not wait for it. An issuer that is not reachable yet is not an error: discovery is
// retried on later requests, which get 503 until it works.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("sandbox cloud: Config.DataDir is required")
	}
	u, err := url.Parse(cfg.Issuer)
	if cfg.Issuer == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("sandbox cloud: Config.Issuer must be the issuer's http(s) URL, not %q", cfg.Issuer)
	}
	if cfg.Audience == "" {
		cfg.Audience = "sandbox"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	st, err := newStore(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	hs, err := newHistoryStore(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	ks, err := newKeyStore(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	al, err := newAppliesLedger(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, store: st, history: hs, keys: ks, applies: al, bg: context.WithoutCancel(ctx)}
	if cfg.AdminToken != "" {
		sum := sha256.Sum256([]byte(cfg.AdminToken))
		s.adminDigest = sum[:]
		s.cfg.AdminToken = "" // keep only the digest
	}
	s.routes()
	go func() {
		s.authMu.Lock()
		defer s.authMu.Unlock()
		if s.verifier == nil && s.lastAttempt.IsZero() {
			_ = s.discoverLocked() // logged; retried on demand
		}
	}()
	return s, nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /healthz", s.healthz)
	m.HandleFunc("GET /v1/{kind}", s.workload(s.listObjects))
	m.HandleFunc("POST /v1/{kind}", s.workload(s.createObject))
	m.HandleFunc("GET /v1/{kind}/{id}", s.workload(s.getObject))
	// Gantry's change history protocol (docs/change-history.md in Gantry): the object
	// is named by its OpenTofu resource type, sandbox_<kind>.
	m.HandleFunc("GET /v1/changes/{type}/{id}", byResourceType(s.workload(s.getHistory)))
	m.HandleFunc("PUT /v1/{kind}/{id}", s.workload(s.updateObject))
	m.HandleFunc("DELETE /v1/{kind}/{id}", s.workload(s.deleteObject))
	m.HandleFunc("POST /admin/v1/keys", s.adminKeys(s.adminCreateKey))
	m.HandleFunc("GET /admin/v1/keys", s.adminKeys(s.adminListKeys))
	m.HandleFunc("DELETE /admin/v1/keys/{id}", s.adminKeys(s.adminDeleteKey))
	m.HandleFunc("GET /admin/v1/applies", s.adminApplies)
	m.HandleFunc("GET /admin/v1/{kind}", s.admin(s.adminList))
	m.HandleFunc("GET /admin/v1/{kind}/{id}", s.admin(s.adminGet))
	m.HandleFunc("PUT /admin/v1/{kind}/{id}", s.admin(s.adminUpdate))
	m.HandleFunc("DELETE /admin/v1/{kind}/{id}", s.admin(s.adminDelete))
	m.HandleFunc("PUT /admin/v1/{kind}/{id}/data", s.admin(s.adminWriteData))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &httpError{status: http.StatusNotFound, code: api.CodeNotFound, msg: "no such endpoint: " + r.Method + " " + r.URL.Path})
	})
	s.mux = m
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	s.authMu.Lock()
	issuer := "ready"
	if s.verifier == nil {
		issuer = "unreachable"
	}
	s.authMu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "issuer": issuer})
}

// httpError is an API error response.
type httpError struct {
	status int
	code   string
	msg    string
	fields []api.FieldError
}

func (e *httpError) Error() string { return e.msg }

func notFound(k api.Kind, id string) *httpError {
	return &httpError{status: http.StatusNotFound, code: api.CodeNotFound, msg: fmt.Sprintf("%s %s not found", k.TypeName(), id)}
}

func conflict(format string, args ...any) *httpError {
	return &httpError{status: http.StatusConflict, code: api.CodeConflict, msg: fmt.Sprintf(format, args...)}
}

func invalid(err error) *httpError {
	var ve *api.ValidationError
	if errors.As(err, &ve) {
		return &httpError{status: http.StatusUnprocessableEntity, code: api.CodeInvalid, msg: ve.Error(), fields: ve.Fields}
	}
	return &httpError{status: http.StatusUnprocessableEntity, code: api.CodeInvalid, msg: err.Error()}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeError writes err as an API error; anything but an *httpError is a 500.
func writeError(w http.ResponseWriter, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{status: http.StatusInternalServerError, code: api.CodeInternal, msg: "internal error"}
	}
	if he.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandbox", error="invalid_token"`)
	}
	if he.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, he.status, api.ErrorBody{Error: api.ErrorDetail{Code: he.code, Message: he.msg, Fields: he.fields}})
}

// request is one authenticated API call.
type request struct {
	r    *http.Request
	kind api.Kind
	id   string   // "" for collection calls
	who  Identity // workload calls
}

type handler func(w http.ResponseWriter, req *request) error

// workload wraps a workload-identity endpoint: authenticate, resolve the kind, enforce the scope
// for mutations, then run h and map its error.
func (s *Server) workload(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, err := s.authenticate(r)
		if err != nil {
			var ae *authError
			switch {
			case errors.As(err, &ae):
				s.log.Warn("sandbox cloud: rejected a credential", "method", r.Method, "path", r.URL.Path, "reason", ae.msg)
				writeError(w, &httpError{status: http.StatusUnauthorized, code: api.CodeUnauthenticated, msg: ae.msg})
			case errors.Is(err, errIssuerUnavailable):
				writeError(w, &httpError{status: http.StatusServiceUnavailable, code: api.CodeIssuerUnavailable, msg: err.Error()})
			default:
				s.log.Error("sandbox cloud: authentication failed", "error", err)
				writeError(w, err)
			}
			return
		}
		k, ok := api.Lookup(r.PathValue("kind"))
		if !ok {
			writeError(w, &httpError{status: http.StatusNotFound, code: api.CodeNotFound, msg: fmt.Sprintf("unknown kind %q; the sandbox cloud has %s", r.PathValue("kind"), kindNames())})
			return
		}
		if r.Method != http.MethodGet && who.Scope != ScopeWrite {
			writeError(w, &httpError{status: http.StatusForbidden, code: api.CodeForbidden,
				msg: forbiddenMessage(who, r.Method, k)})
			return
		}
		if r.Method != http.MethodGet && who.Phase == "apply" && !who.Static() {
			// Counted before the change is made: an attempt is an apply whether or not
			// the change then succeeds.
			if err := s.applies.record(who, time.Now().UTC()); err != nil {
				s.log.Error("sandbox cloud: recording an apply", "error", err)
				writeError(w, err)
				return
			}
		}
		s.serve(w, h, &request{r: r, kind: k, id: r.PathValue("id"), who: who})
	}
}

// admin wraps a break-glass endpoint: the static admin token, then the kind.
func (s *Server) admin(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.adminAllowed(w, r) {
			return
		}
		k, ok := api.Lookup(r.PathValue("kind"))
		if !ok {
			writeError(w, &httpError{status: http.StatusNotFound, code: api.CodeNotFound, msg: fmt.Sprintf("unknown kind %q; the sandbox cloud has %s", r.PathValue("kind"), kindNames())})
			return
		}
		s.serve(w, h, &request{r: r, kind: k, id: r.PathValue("id")})
	}
}

// adminAllowed answers an admin call that may not proceed (the admin API is off, or the
// admin token is missing or wrong) and reports whether it may.
func (s *Server) adminAllowed(w http.ResponseWriter, r *http.Request) bool {
	if s.adminDigest == nil {
		writeError(w, &httpError{status: http.StatusNotFound, code: api.CodeAdminDisabled, msg: "the admin API is disabled: the sandbox cloud was started without an admin token"})
		return false
	}
	if !s.isAdmin(r) {
		s.log.Warn("sandbox cloud: rejected an admin call", "method", r.Method, "path", r.URL.Path)
		writeError(w, &httpError{status: http.StatusUnauthorized, code: api.CodeUnauthenticated, msg: "the admin API needs Authorization: Bearer <admin token>"})
		return false
	}
	return true
}

func (s *Server) serve(w http.ResponseWriter, h handler, req *request) {
	if err := h(w, req); err != nil {
		var he *httpError
		if !errors.As(err, &he) {
			s.log.Error("sandbox cloud: request failed", "method", req.r.Method, "path", req.r.URL.Path, "error", err)
		}
		writeError(w, err)
	}
}

// decodeBody decodes a JSON request body into v, numbers as json.Number.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody+1))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &httpError{status: http.StatusBadRequest, code: api.CodeBadRequest, msg: "the request body is not valid JSON for this endpoint: " + err.Error()}
	}
	if dec.More() {
		return &httpError{status: http.StatusBadRequest, code: api.CodeBadRequest, msg: "the request body holds more than one JSON value"}
	}
	return nil
}

// forbiddenMessage explains a refused mutation by a read-only credential.
func forbiddenMessage(who Identity, method string, k api.Kind) string {
	if who.Static() {
		return fmt.Sprintf("this static API key is read-only (key %s, scope %q): it may read but not %s %s objects", who.KeyID, who.Scope, verb(method), k.TypeName())
	}
	return fmt.Sprintf("this token is read-only (scope %q, phase %q): it may read but not %s %s objects; only apply tokens (scope %q) change resources", who.Scope, who.Phase, verb(method), k.TypeName(), ScopeWrite)
}

func verb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(method)
}

func kindNames() string {
	var names []string
	for _, k := range api.Kinds() {
		names = append(names, k.Name)
	}
	return strings.Join(names, ", ")
}
