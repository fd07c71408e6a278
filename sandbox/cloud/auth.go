package cloud

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"gantry/sandbox/api"
)

// Scopes a workload identity token can carry.
const (
	ScopeRead  = "read"  // plan and verify: GET only
	ScopeWrite = "write" // apply, break-glass: may change the workspace's objects and the org's policies
)

// PhaseBreakglass is the phase of a person's token for an approved break-glass window: it
// writes, and names the window (gantry_window) instead of a run.
const PhaseBreakglass = "breakglass"

// Identity is a verified caller: the private claims of a Gantry job token, or a static API key
// (KeyID set; Workspace is AnyWorkspace, no run or phase).
type Identity struct {
	Subject   string
	Org       string // gantry_org
	Env       string // gantry_env
	Workspace string // gantry_ws
	Run       string // gantry_run
	Window    string // gantry_window: the break-glass window of a breakglass token
	Phase     string // gantry_phase: plan, apply, verify, breakglass
	// PlanDigest (gantry_plan) and Lease (gantry_lease): the plan an apply token applies and
	// its attempt at it, which the applies ledger counts. Only apply tokens carry them.
	PlanDigest string
	Lease      int64
	Scope      string // "read" or "write"
	Expiry     time.Time
	KeyID      string // the static API key's id; "" for a workload token
}

// Static reports whether the identity is a static API key rather than a workload token.
func (id Identity) Static() bool { return id.KeyID != "" }

// Namespace is the workspace namespace the identity acts in.
func (id Identity) Namespace() api.Namespace {
	return api.Namespace{Org: id.Org, Env: id.Env, Workspace: id.Workspace}
}

// claims are the token's private claims.
type claims struct {
	Org       string `json:"gantry_org"`
	Env       string `json:"gantry_env"`
	Workspace string `json:"gantry_ws"`
	Run       string `json:"gantry_run"`
	Window    string `json:"gantry_window"`
	Phase     string `json:"gantry_phase"`
	Scope     string `json:"scope"`
	Plan      string `json:"gantry_plan"`
	Lease     int64  `json:"gantry_lease"`
	ID        string `json:"jti"` // what an ended token is remembered by
}

// errIssuerUnavailable: the issuer's discovery document or keys could not be fetched.
var errIssuerUnavailable = errors.New("the identity issuer cannot be reached yet")

// authError is a rejected token; its message never contains the token.
type authError struct{ msg string }

func (e *authError) Error() string { return e.msg }

// discoveryRetry is the least time between two discovery attempts while the issuer is down.
const discoveryRetry = 250 * time.Millisecond

// verifierFor returns the token verifier and the issuer's introspection endpoint ("":
// none), discovering the issuer first if that has not worked yet.
func (s *Server) verifierFor() (*oidc.IDTokenVerifier, string, error) {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	if s.verifier != nil {
		return s.verifier, s.introspection, nil
	}
	if !s.lastAttempt.IsZero() && time.Since(s.lastAttempt) < discoveryRetry {
		return nil, "", fmt.Errorf("%w: %v", errIssuerUnavailable, s.lastErr)
	}
	if err := s.discoverLocked(); err != nil {
		return nil, "", fmt.Errorf("%w: %v", errIssuerUnavailable, err)
	}
	return s.verifier, s.introspection, nil
}

// discoverLocked fetches the issuer's discovery document; s.authMu must be held.
func (s *Server) discoverLocked() error {
	s.lastAttempt = time.Now()
	ctx, cancel := context.WithTimeout(s.bg, 5*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, s.cfg.Issuer)
	if err != nil {
		s.lastErr = err
		s.log.Warn("sandbox cloud: identity issuer discovery failed; retrying on the next request", "issuer", s.cfg.Issuer, "error", err)
		return err
	}
	cfg := &oidc.Config{ClientID: s.cfg.Audience}
	var disc struct {
		Algs          []string `json:"id_token_signing_alg_values_supported"`
		Introspection string   `json:"introspection_endpoint"`
	}
	if err := p.Claims(&disc); err != nil {
		s.lastErr = err
		return fmt.Errorf("reading the issuer's discovery document: %w", err)
	}
	if len(disc.Algs) == 0 {
		// The issuer does not advertise its algorithms; accept the common asymmetric ones rather
		// than go-oidc's RS256-only default.
		cfg.SupportedSigningAlgs = []string{oidc.RS256, oidc.ES256, oidc.ES384, oidc.PS256, oidc.EdDSA}
	}
	// An endpoint that is not the issuer's own is refused outright, never ignored: the
	// issuer meant its tokens to be asked about, and a cloud that skipped asking would
	// accept what it withdrew.
	endpoint, err := introspectionEndpoint(s.cfg.Issuer, disc.Introspection)
	if err != nil {
		s.lastErr = err
		s.log.Warn("sandbox cloud: identity issuer refused", "issuer", s.cfg.Issuer, "error", err)
		return err
	}
	s.introspection = endpoint
	// Verifier fetches the JWKS with a background context (keeping the HTTP client from s.bg) and
	// refetches it when a token names an unknown key, so the issuer can rotate keys.
	s.verifier = p.Verifier(cfg)
	s.lastErr = nil
	s.log.Info("sandbox cloud: trusting identity issuer", "issuer", s.cfg.Issuer, "audience", s.cfg.Audience,
		"introspection", cmp.Or(endpoint, "none offered"))
	return nil
}

// authenticate verifies the request's bearer token: a static API key (KeyPrefix) or a
// workload identity token.
func (s *Server) authenticate(r *http.Request) (Identity, error) {
	raw, ok := bearer(r)
	if !ok {
		return Identity{}, &authError{"missing bearer token: send Authorization: Bearer <workload identity token>"}
	}
	if strings.HasPrefix(raw, KeyPrefix) {
		return s.authenticateKey(raw)
	}
	v, introspection, err := s.verifierFor()
	if err != nil {
		return Identity{}, err
	}
	tok, err := v.Verify(r.Context(), raw)
	if err != nil {
		if strings.Contains(err.Error(), "failed to verify signature: fetching keys") {
			return Identity{}, fmt.Errorf("%w: %s", errIssuerUnavailable, redact(err.Error(), raw))
		}
		return Identity{}, &authError{"invalid token: " + redact(err.Error(), raw)}
	}
	var c claims
	if err := tok.Claims(&c); err != nil {
		return Identity{}, &authError{"invalid token claims: " + redact(err.Error(), raw)}
	}
	if err := checkClaims(c); err != nil {
		return Identity{}, err
	}
	// Last, once the token is known to be well formed and signed: is its grant still held?
	if introspection != "" {
		if err := s.checkLive(r.Context(), introspection, raw, c.ID); err != nil {
			return Identity{}, err
		}
	}
	return Identity{
		Subject: tok.Subject, Org: c.Org, Env: c.Env, Workspace: c.Workspace,
		Run: c.Run, Window: c.Window, Phase: c.Phase, PlanDigest: c.Plan, Lease: c.Lease, Scope: c.Scope, Expiry: tok.Expiry,
	}, nil
}

// checkClaims refuses a token whose Gantry claims are missing or do not fit together.
func checkClaims(c claims) error {
	for _, req := range []struct{ name, val string }{{"gantry_org", c.Org}, {"gantry_env", c.Env}, {"gantry_ws", c.Workspace}} {
		if req.val == "" {
			return &authError{fmt.Sprintf("invalid token: the %s claim is missing; the sandbox cloud only accepts Gantry workload identity tokens", req.name)}
		}
		if len(req.val) > 200 {
			return &authError{fmt.Sprintf("invalid token: the %s claim is too long", req.name)}
		}
		if req.val == AnyWorkspace {
			// The environment-wide namespace of static API keys is not a workspace.
			return &authError{fmt.Sprintf("invalid token: the %s claim may not be %q", req.name, AnyWorkspace)}
		}
	}
	if c.Scope != ScopeRead && c.Scope != ScopeWrite {
		return &authError{fmt.Sprintf("invalid token: the scope claim must be %q or %q", ScopeRead, ScopeWrite)}
	}
	// Gantry only grants write to apply jobs and break-glass windows; a write token of another
	// phase was not minted by it. A break-glass token names its window, which every change it
	// makes records.
	if c.Scope == ScopeWrite && c.Phase != "apply" && c.Phase != PhaseBreakglass {
		return &authError{fmt.Sprintf("invalid token: scope %q is only granted to the apply and breakglass phases, not %q", ScopeWrite, c.Phase)}
	}
	if (c.Phase == PhaseBreakglass) != (c.Window != "") || len(c.Window) > 200 {
		return &authError{"invalid token: a breakglass token, and only one, names its window in gantry_window"}
	}
	// An apply token names the plan it applies and its attempt, so every apply is counted
	// per plan digest; nothing else names a plan.
	if c.Phase == "apply" {
		if !planDigestRe.MatchString(c.Plan) || c.Lease <= 0 || c.Run == "" || len(c.Run) > 200 {
			return &authError{"invalid token: an apply token names its run, the plan it applies (gantry_plan, sha256:<hex>) and its attempt (gantry_lease)"}
		}
	} else if c.Plan != "" || c.Lease != 0 {
		return &authError{"invalid token: only an apply token names a plan (gantry_plan) and an attempt (gantry_lease)"}
	}
	return nil
}

// bearer returns the request's bearer token.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// redact removes the token and its parts from a message, in case a library quotes them.
func redact(msg, token string) string {
	if token == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, token, "[token]")
	for _, part := range strings.Split(token, ".") {
		if len(part) >= 8 {
			msg = strings.ReplaceAll(msg, part, "[token]")
		}
	}
	return msg
}

// isAdmin compares the request's bearer token with the admin token in constant time (over
// digests, so the comparison does not reveal the token's length either).
func (s *Server) isAdmin(r *http.Request) bool {
	raw, ok := bearer(r)
	if !ok || s.adminDigest == nil {
		return false
	}
	sum := sha256.Sum256([]byte(raw))
	return subtle.ConstantTimeCompare(sum[:], s.adminDigest) == 1
}
