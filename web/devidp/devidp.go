// Package devidp is an embedded development OpenID Provider built on
// github.com/zitadel/oidc/v3/pkg/op. It lets `gantry dev` and tests run the
// full authorization code flow (with PKCE) without an external IdP.
//
// Everything lives in memory and is lost on restart: the RSA signing key,
// the token encryption key, auth requests and access tokens. It is meant for
// 127.0.0.1 over plain http and must never face the internet: demo passwords
// are shown on its login page by design.
package devidp

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is a demo account that can sign in on the login page.
type User struct {
	Subject  string // stable id, e.g. "alice-owner"
	Email    string
	Name     string
	Password string // dev only; shown on the login page
	Note     string // free text shown on the login page, e.g. "Acme Corp — owner"
	// Groups go into the ID token's groups claim (with the profile scope), as an
	// enterprise provider sends them.
	Groups []string
}

// Client is a registered relying party.
type Client struct {
	ID string
	// Secret makes the client confidential (client_secret_basic and
	// client_secret_post both work). Empty means a public client that
	// authenticates with PKCE alone.
	Secret                 string
	RedirectURIs           []string
	PostLogoutRedirectURIs []string
}

// Config configures a Provider.
type Config struct {
	// Issuer is the absolute URL the provider is served at, e.g.
	// http://127.0.0.1:5556, without a trailing slash. A path is allowed
	// (the handler strips it), but the handler must then receive the
	// unstripped request path.
	Issuer  string
	Clients []Client
	Users   []User
	Logger  *slog.Logger // may be nil
	// OmitAuthTime leaves auth_time out of the ID tokens, as a provider that does not
	// send it: for tests of a relying party that must not take such a sign-in as fresh.
	// By default every ID token says when its user signed in on the login page.
	OmitAuthTime bool
	// ClaimsOnlyFromUserInfo serves e-mail, name and groups only from the UserInfo
	// endpoint, never in the ID token, as OIDC Core §5.4 allows when an access token is
	// issued (and as many providers do).
	ClaimsOnlyFromUserInfo bool
}

const (
	authRequestTTL = 10 * time.Minute
	accessTokenTTL = time.Hour
	idTokenTTL     = time.Hour

	pathLogin     = "/login"
	pathLoggedOut = "/logged-out"
	pathCSS       = "/devidp.css"
)

// Provider is the development OpenID Provider. It is an http.Handler serving
// discovery (/.well-known/openid-configuration), JWKS (/keys), /authorize,
// /oauth/token, /userinfo, /end_session and the login page (/login).
type Provider struct {
	issuer  string
	store   *storage
	op      *op.Provider
	log     *slog.Logger
	handler http.Handler
}

// SetGroups replaces the groups the provider asserts for the user with subject from the
// next sign-in on, as a directory change would (tests of group rules). An empty list
// sends no groups claim.
func (p *Provider) SetGroups(subject string, groups []string) error {
	if _, ok := p.store.user(subject); !ok {
		return errors.New("no such user: " + subject)
	}
	p.store.groupsMu.Lock()
	defer p.store.groupsMu.Unlock()
	if p.store.groups == nil {
		p.store.groups = map[string][]string{}
	}
	p.store.groups[subject] = slices.Clone(groups)
	return nil
}

// New validates cfg, generates fresh keys and returns the provider.
func New(cfg Config) (*Provider, error) {
	issuerURL, err := parseIssuer(cfg.Issuer)
	if err != nil {
		return nil, err
	}
	if err := validate(cfg); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	// A fresh key per process is fine: relying parties fetch the JWKS on
	// demand, and a restart invalidates every session anyway.
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("devidp: generate signing key: %w", err)
	}
	// The op encrypts opaque access tokens and auth codes with this key.
	var cryptoKey [32]byte
	if _, err := rand.Read(cryptoKey[:]); err != nil {
		return nil, fmt.Errorf("devidp: generate crypto key: %w", err)
	}

	store := newStorage(cfg, log, signingKey{
		id:  "devidp-" + strings.ToLower(rand.Text()[:8]),
		alg: jose.RS256,
		key: rsaKey,
	}, cfg.Issuer+pathLogin+"?authRequestID=")

	var opts []op.Option
	if issuerURL.Scheme == "http" {
		// v3 refuses a non-https issuer unless explicitly allowed.
		opts = append(opts, op.WithAllowInsecure())
	}
	provider, err := op.NewProvider(&op.Config{
		CryptoKey:   cryptoKey,
		CryptoKeyId: "devidp",
		// Used when end_session gets no (valid) post_logout_redirect_uri.
		DefaultLogoutRedirectURI: cfg.Issuer + pathLoggedOut,
		CodeMethodS256:           true,
		// Accept client_secret_post in addition to client_secret_basic.
		AuthMethodPost:  true,
		SupportedScopes: []string{oidc.ScopeOpenID, oidc.ScopeProfile, oidc.ScopeEmail},
	}, store, op.StaticIssuer(cfg.Issuer), opts...)
	if err != nil {
		return nil, fmt.Errorf("devidp: create provider: %w", err)
	}

	p := &Provider{issuer: cfg.Issuer, store: store, op: provider, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+pathLogin, p.loginPage)
	mux.HandleFunc("POST "+pathLogin, p.loginSubmit)
	mux.HandleFunc("GET "+pathLoggedOut, p.loggedOutPage)
	mux.HandleFunc("GET "+pathCSS, serveCSS)
	mux.Handle("/", provider) // everything else is the OIDC protocol
	p.handler = mux
	if prefix := issuerURL.Path; prefix != "" {
		// The op routes relative to the issuer, so strip its path.
		p.handler = http.StripPrefix(prefix, mux)
	}
	log.Info("dev OpenID provider ready", "issuer", cfg.Issuer, "clients", len(cfg.Clients), "users", len(cfg.Users))
	return p, nil
}

// ServeHTTP implements http.Handler.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	p.handler.ServeHTTP(rec, r)
	// Path only: queries and bodies carry codes, tokens and passwords.
	p.log.Debug("devidp request", "method", r.Method, "path", r.URL.Path,
		"status", rec.status, "duration", time.Since(start))
}

// statusRecorder captures the status code for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func parseIssuer(issuer string) (*url.URL, error) {
	u, err := url.Parse(issuer)
	switch {
	case err != nil:
		return nil, fmt.Errorf("devidp: invalid issuer %q: %w", issuer, err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return nil, fmt.Errorf("devidp: issuer %q must be an absolute http(s) URL", issuer)
	case strings.HasSuffix(issuer, "/"):
		// Relying parties compare the issuer byte for byte.
		return nil, fmt.Errorf("devidp: issuer %q must not end with a slash", issuer)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("devidp: issuer %q must not have a query or fragment", issuer)
	}
	return u, nil
}

func validate(cfg Config) error {
	var errs []error
	if len(cfg.Clients) == 0 {
		errs = append(errs, errors.New("at least one client is required"))
	}
	if len(cfg.Users) == 0 {
		errs = append(errs, errors.New("at least one user is required"))
	}
	ids := map[string]bool{}
	for i, c := range cfg.Clients {
		switch {
		case c.ID == "":
			errs = append(errs, fmt.Errorf("client %d: empty ID", i))
		case ids[c.ID]:
			errs = append(errs, fmt.Errorf("client %q: duplicate ID", c.ID))
		case len(c.RedirectURIs) == 0:
			errs = append(errs, fmt.Errorf("client %q: no redirect URIs", c.ID))
		}
		ids[c.ID] = true
	}
	// Subjects and emails share one namespace: both are accepted as the
	// username on the login page, so they must identify one user.
	names := map[string]bool{}
	for i, u := range cfg.Users {
		if u.Subject == "" || u.Email == "" || u.Password == "" {
			errs = append(errs, fmt.Errorf("user %d: Subject, Email and Password are required", i))
			continue
		}
		keys := []string{u.Subject}
		if e := strings.ToLower(u.Email); e != u.Subject {
			keys = append(keys, e)
		}
		for _, n := range keys {
			if names[n] {
				errs = append(errs, fmt.Errorf("user %q: %q is not unique", u.Subject, n))
			}
			names[n] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("devidp: invalid config: %w", err)
	}
	return nil
}
