package devidp

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

var (
	_ op.Storage                   = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest = (*storage)(nil)
)

// Errors of the login form; the handler maps them to status codes.
var (
	errUnknownRequest = errors.New("this sign-in request is unknown or has expired; start again from the application")
	errBadCredentials = errors.New("wrong username or password")
)

// storage implements op.Storage in memory. One mutex guards all maps: this
// provider serves one developer or one test, so contention does not matter.
type storage struct {
	log *slog.Logger
	key signingKey
	// Fixed after New, so read without the lock.
	clients      map[string]*client
	users        []User // config order, for the login page
	omitAuthTime bool   // Config.OmitAuthTime

	groupsMu sync.Mutex          // guards groups
	groups   map[string][]string // subject -> groups set by SetGroups, over the user's

	mu       sync.Mutex       // guards the fields below
	now      func() time.Time // swapped by tests to expire requests
	requests map[string]*authRequest
	codes    map[string]string // auth code -> auth request id
	tokens   map[string]*accessToken
}

func newStorage(cfg Config, log *slog.Logger, key signingKey, loginURL string) *storage {
	s := &storage{
		log:          log,
		key:          key,
		clients:      map[string]*client{},
		users:        slices.Clone(cfg.Users),
		omitAuthTime: cfg.OmitAuthTime,
		now:          time.Now,
		requests:     map[string]*authRequest{},
		codes:        map[string]string{},
		tokens:       map[string]*accessToken{},
	}
	for _, c := range cfg.Clients {
		s.clients[c.ID] = &client{cfg: c, loginURL: loginURL, onlyUserInfo: cfg.ClaimsOnlyFromUserInfo}
	}
	return s
}

// groupsOf is u's groups: as SetGroups last set them, else as configured.
func (s *storage) groupsOf(u User) []string {
	s.groupsMu.Lock()
	defer s.groupsMu.Unlock()
	if g, ok := s.groups[u.Subject]; ok {
		return g
	}
	return u.Groups
}

// user finds a user by subject or (case-insensitively) by email.
func (s *storage) user(name string) (User, bool) {
	for _, u := range s.users {
		if u.Subject == name || strings.EqualFold(u.Email, name) {
			return u, true
		}
	}
	return User{}, false
}

// request returns a live auth request; callers hold s.mu.
func (s *storage) request(id string) (*authRequest, bool) {
	r, ok := s.requests[id]
	if !ok || s.now().After(r.created.Add(authRequestTTL)) {
		return nil, false
	}
	return r, true
}

// gc drops expired auth requests, codes and tokens; callers hold s.mu.
// It runs on every insert, which keeps memory bounded without a goroutine.
func (s *storage) gc() {
	now := s.now()
	for id, r := range s.requests {
		if now.After(r.created.Add(authRequestTTL)) {
			delete(s.requests, id)
		}
	}
	for code, id := range s.codes {
		if _, ok := s.requests[id]; !ok {
			delete(s.codes, code)
		}
	}
	for id, t := range s.tokens {
		if now.After(t.expires) {
			delete(s.tokens, id)
		}
	}
}

// checkLogin validates the login form and completes the auth request. It
// returns the signed-in subject.
func (s *storage) checkLogin(id, username, password string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.request(id)
	if !ok {
		return "", errUnknownRequest
	}
	u, ok := s.user(strings.TrimSpace(username))
	if !ok || subtle.ConstantTimeCompare([]byte(u.Password), []byte(password)) != 1 {
		return "", errBadCredentials
	}
	// When the user signed in: the ID token's auth_time (unless the config leaves it out).
	r.subject, r.done = u.Subject, true
	if !s.omitAuthTime {
		r.authTime = s.now()
	}
	return u.Subject, nil
}

// knownRequest reports whether the login page should show a form for id.
func (s *storage) knownRequest(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.request(id)
	return ok
}

func (s *storage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	// There is no SSO session, so prompt=none can never succeed.
	if slices.Contains(req.Prompt, oidc.PromptNone) {
		return nil, oidc.ErrLoginRequired()
	}
	// The op makes PKCE optional for confidential clients; we require S256
	// for every client so dev exercises the same path as production.
	// Returning an oidc.Error here makes the op redirect it to the (already
	// validated) redirect_uri as error=invalid_request.
	if req.CodeChallenge == "" || req.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE with code_challenge_method=S256 is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gc()
	r := &authRequest{
		id:           rand.Text(),
		created:      s.now(),
		clientID:     req.ClientID,
		redirectURI:  req.RedirectURI,
		state:        req.State,
		nonce:        req.Nonce,
		scopes:       slices.Clone(req.Scopes),
		responseType: req.ResponseType,
		responseMode: req.ResponseMode,
		challenge:    &oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: req.CodeChallengeMethod},
	}
	s.requests[r.id] = r
	s.log.Debug("devidp auth request created", "client_id", r.clientID)
	return r.snapshot(), nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.request(id)
	if !ok {
		return nil, errUnknownRequest
	}
	return r.snapshot(), nil
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("code invalid or already used")
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

// DeleteAuthRequest runs once tokens are issued; dropping the code with the
// request makes codes single-use.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	var clientID string
	if r, ok := req.(interface{ GetClientID() string }); ok {
		clientID = r.GetClientID()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gc()
	t := &accessToken{
		id:       rand.Text(),
		clientID: clientID,
		subject:  req.GetSubject(),
		audience: slices.Clone(req.GetAudience()),
		scopes:   slices.Clone(req.GetScopes()),
		expires:  s.now().Add(accessTokenTTL),
	}
	s.tokens[t.id] = t
	s.log.Info("devidp tokens issued", "client_id", clientID, "sub", t.subject)
	return t.id, t.expires, nil
}

// Refresh tokens are out of scope: clients only get the code grant, so the
// op never asks for them.
func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, oidc.ErrUnsupportedGrantType().WithDescription("refresh tokens are not supported")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

// TerminateSession revokes the user's access tokens for the client. There is
// no browser session to end: every authorization asks for the password.
func (s *storage) TerminateSession(_ context.Context, userID, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, t := range s.tokens {
		if t.subject == userID && t.clientID == clientID {
			delete(s.tokens, id)
		}
	}
	s.log.Info("devidp signed out", "client_id", clientID, "sub", userID)
	return nil
}

func (s *storage) RevokeToken(_ context.Context, tokenID, _, clientID string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tokens[tokenID]; ok {
		if t.clientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("token was not issued to this client")
		}
		delete(s.tokens, tokenID)
	}
	return nil // unknown tokens count as revoked (RFC 7009)
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return s.key, nil }

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{s.key.alg}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{s.key}}, nil
}

// GetClientByClientID returns a plain error for unknown clients: the op then
// refuses the request without redirecting (server_error would mean a 500).
func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if c, ok := s.clients[id]; ok {
		return c, nil
	}
	return nil, errors.New("client not found")
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	c, ok := s.clients[id]
	if !ok || c.cfg.Secret == "" || subtle.ConstantTimeCompare([]byte(c.cfg.Secret), []byte(secret)) != 1 {
		return errors.New("invalid client credentials")
	}
	return nil
}

// SetUserinfoFromScopes is deprecated in op; SetUserinfoFromRequest does the work.
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

// SetUserinfoFromRequest fills the ID token claims.
func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	return s.setUserinfo(info, req.GetSubject(), scopes)
}

// SetUserinfoFromToken serves the userinfo endpoint.
func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, _, _ string) error {
	t, ok := s.token(tokenID)
	if !ok {
		return errors.New("access token invalid or expired")
	}
	return s.setUserinfo(info, t.subject, t.scopes)
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, tokenID, _, clientID string) error {
	t, ok := s.token(tokenID)
	if !ok || !slices.Contains(t.audience, clientID) {
		return errors.New("token inactive or not for this client")
	}
	info := new(oidc.UserInfo)
	if err := s.setUserinfo(info, t.subject, t.scopes); err != nil {
		return err
	}
	resp.SetUserInfo(info)
	resp.Scope, resp.ClientID, resp.Expiration = t.scopes, t.clientID, oidc.FromTime(t.expires)
	return nil
}

func (s *storage) token(id string) (accessToken, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[id]
	if !ok || s.now().After(t.expires) {
		return accessToken{}, false
	}
	return *t, true
}

func (s *storage) setUserinfo(info *oidc.UserInfo, subject string, scopes []string) error {
	i := slices.IndexFunc(s.users, func(u User) bool { return u.Subject == subject })
	if i < 0 {
		return errors.New("user not found")
	}
	u := s.users[i]
	info.Subject = u.Subject
	for _, scope := range scopes {
		switch scope {
		case oidc.ScopeEmail:
			// Dev users are trusted fixtures, so their email counts as verified.
			info.Email, info.EmailVerified = u.Email, true
		case oidc.ScopeProfile:
			info.Name, info.PreferredUsername = u.Name, u.Email
			if groups := s.groupsOf(u); len(groups) > 0 {
				info.AppendClaims("groups", groups)
			}
		}
	}
	return nil
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

// The JWT profile grant is not offered: no client has registered keys.
func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("jwt profile is not supported")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("jwt profile is not supported")
}

func (s *storage) Health(context.Context) error { return nil }

type accessToken struct {
	id, clientID, subject string
	audience, scopes      []string
	expires               time.Time
}
