package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/labstack/echo/v4"
	"golang.org/x/oauth2"

	"gantry/handlers/render"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/org"
	"gantry/models/signin"
	"gantry/views"
	"gantry/views/paths"
)

type orgMembership = org.MembershipView

// loginFlowLifetime bounds how long a started sign-in may take at the provider.
const loginFlowLifetime = 10 * time.Minute

// authenticator is the OpenID Connect relying party: go-oidc for discovery and ID
// token verification, oauth2 for the authorization code flow with PKCE.
type authenticator struct {
	issuer   string
	oauth    oauth2.Config
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	// claims are the rules for reading a sign-in's claims (models/signin).
	claims signin.Rules
}

func newAuthenticator(ctx context.Context, cfg Config) (*authenticator, error) {
	// A bounded client: an unreachable provider is a clear error at start, not a hang.
	ctx = oidc.ClientContext(ctx, &http.Client{Timeout: 15 * time.Second})
	provider, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovering OpenID Provider %s: %w", cfg.Issuer, err)
	}
	return &authenticator{
		issuer: cfg.Issuer,
		oauth: oauth2.Config{
			ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL,
			Endpoint: provider.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile", "email"},
		},
		provider: provider,
		verifier: provider.Verifier(&oidc.Config{ClientID: cfg.ClientID}),
		claims:   signin.Rules{GroupsClaim: cfg.GroupsClaim, TrustedDomains: map[string][]string{cfg.Issuer: cfg.VerifiedDomains}},
	}, nil
}

func randomString() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// safeReturn keeps a redirect (after sign-in, or back from an error page) on this
// site: a path of this origin, else the dashboard. Browsers drop tab, CR and LF from a
// URL and read a backslash as a slash, so "/\t/evil.example" or "/\\evil.example" would
// leave the site; a path is kept only if no decoding of it holds a control character or
// backslash, or starts with "//" (a host).
func safeReturn(to string) string {
	if !strings.HasPrefix(to, "/") {
		return paths.Home()
	}
	u, err := url.Parse(to) // refuses ASCII control characters
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return paths.Home()
	}
	// The browser decodes at most once; a proxy or a later redirect may again. Check each
	// decoding until nothing changes, and give up on anything encoded deeper.
	for s, i := to, 0; i < 4; i++ {
		if strings.HasPrefix(s, "//") || strings.ContainsRune(s, '\\') || !cleanText(s, allowNone) {
			return paths.Home()
		}
		decoded, err := url.PathUnescape(s)
		if err != nil {
			return paths.Home()
		}
		if decoded == s {
			return to
		}
		s = decoded
	}
	return paths.Home()
}

// login starts the authorization code flow: fresh state, nonce and PKCE verifier,
// sealed into the browser's sign-in cookie (loginflow.go: nothing is written), then off
// to the provider.
func (s *Server) login(c echo.Context) error {
	rs := sessionOf(c)
	reauth := c.QueryParam("reauth") == "1"
	if rs.found && rs.sess.SignedIn() && !reauth {
		return c.Redirect(http.StatusFound, safeReturn(c.QueryParam("return_to")))
	}
	flow := loginFlow{
		State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(),
		ReturnTo: safeReturn(c.QueryParam("return_to")), StartedAt: time.Now().UTC(), Reauth: reauth,
	}
	if err := s.putLoginFlow(c, flow); err != nil {
		return err
	}
	opts := []oauth2.AuthCodeOption{oidc.Nonce(flow.Nonce), oauth2.S256ChallengeOption(flow.Verifier)}
	if reauth {
		// A fresh authentication, not a provider's single sign-on session.
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "login"), oauth2.SetAuthURLParam("max_age", "0"))
	}
	return c.Redirect(http.StatusFound, s.auth.oauth.AuthCodeURL(flow.State, opts...))
}

// signInFailed is the 400 every refused callback answers with (and counts as a failed
// sign-in: failures.go).
func signInFailed(reason string) error {
	return echo.NewHTTPError(http.StatusBadRequest, "Sign-in failed: "+reason+" Start again from the sign-in link.")
}

// noAuthTime refuses a re-authentication whose ID token does not say when the provider
// authenticated the person: without that proof no sign-in counts as fresh.
var noAuthTime = echo.NewHTTPError(http.StatusBadRequest, "Sign-in failed: the identity provider did not say when it "+
	"authenticated you (its ID token has no auth_time), so Gantry cannot count this sign-in as fresh for a decision "+
	"that destroys or loses data. Signing in again will not help: ask your Gantry administrator to have the provider "+
	"send auth_time (docs/kubernetes.md, OpenID Provider).")

// callback finishes the flow. The browser's sign-in cookie is taken (and cleared) first,
// so a callback can be tried once from a browser: then its state, the code exchange with
// the PKCE verifier, and the ID token's signature, audience, expiry and nonce must all
// hold.
func (s *Server) callback(c echo.Context) error {
	flow, ok := s.takeLoginFlow(c)
	if !ok {
		return signInFailed("this browser has no sign-in in progress (it may have expired).")
	}
	if time.Since(flow.StartedAt) > loginFlowLifetime {
		return signInFailed("the sign-in took too long.")
	}
	if e := c.QueryParam("error"); e != "" {
		return signInFailed(fmt.Sprintf("the identity provider answered %q (%s).", e, c.QueryParam("error_description")))
	}
	if subtle.ConstantTimeCompare([]byte(c.QueryParam("state")), []byte(flow.State)) != 1 {
		return signInFailed("the state returned by the identity provider does not match this browser's sign-in.")
	}
	idToken, asserted, err := s.exchange(c, flow)
	if err != nil {
		return err
	}
	// When the provider authenticated the person: the ID token's auth_time, or nothing
	// known (never now: a provider that ignores max_age would make every sign-in fresh).
	var authTime *time.Time
	var times struct {
		AuthTime json.Number `json:"auth_time"`
	}
	if idToken.Claims(&times) == nil {
		if secs, err := times.AuthTime.Int64(); err == nil && secs > 0 {
			at := time.Unix(secs, 0).UTC()
			authTime = &at
		}
	}
	if flow.Reauth {
		// A re-authentication must be proven fresh.
		if authTime == nil {
			return noAuthTime
		}
		if time.Since(*authTime) > loginFlowLifetime {
			return signInFailed("the identity provider did not authenticate you again.")
		}
	}
	login := org.Login{Issuer: idToken.Issuer, Subject: idToken.Subject, Email: asserted.Email, Name: asserted.Name,
		Groups: asserted.Groups, Asserted: &asserted}
	return s.finishSignIn(c, sessionOf(c), login, asserted.Verified, flow.ReturnTo, authTime)
}

// exchange trades the callback's code for tokens with the flow's PKCE verifier,
// verifies the ID token (signature, audience, expiry) and its nonce, and reads the
// person's claims (models/signin): from the ID token, and from the UserInfo endpoint
// when the ID token lacks one Gantry needs.
func (s *Server) exchange(c echo.Context, flow loginFlow) (*oidc.IDToken, signin.Asserted, error) {
	// A bounded client: a provider that stops answering fails this sign-in, not a worker.
	ctx := oidc.ClientContext(c.Request().Context(), &http.Client{Timeout: 15 * time.Second})
	token, err := s.auth.oauth.Exchange(ctx, c.QueryParam("code"), oauth2.VerifierOption(flow.Verifier))
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "oidc code exchange refused", "error", err)
		return nil, signin.Asserted{}, signInFailed("the identity provider refused the authorization code.")
	}
	rawIDToken, _ := token.Extra("id_token").(string)
	if rawIDToken == "" {
		return nil, signin.Asserted{}, signInFailed("the identity provider sent no ID token.")
	}
	idToken, err := s.auth.verifier.Verify(ctx, rawIDToken)
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "oidc id token refused", "error", err)
		return nil, signin.Asserted{}, signInFailed("the ID token could not be verified.")
	}
	if subtle.ConstantTimeCompare([]byte(idToken.Nonce), []byte(flow.Nonce)) != 1 {
		return nil, signin.Asserted{}, signInFailed("the ID token's nonce does not match this browser's sign-in.")
	}
	var id signin.Claims
	if err := idToken.Claims(&id); err != nil {
		return nil, signin.Asserted{}, signInFailed("the ID token's claims could not be read.")
	}
	userInfo, note := s.userInfo(ctx, token, id)
	asserted, err := s.auth.claims.Read(idToken.Issuer, idToken.Subject, id, userInfo, note, time.Now())
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "oidc userinfo refused", "error", err)
		return nil, signin.Asserted{}, signInFailed(err.Error() + ".")
	}
	return idToken, asserted, nil
}

// userInfo asks the provider's UserInfo endpoint with the sign-in's access token, at
// most once per sign-in and only when the ID token lacks a claim Gantry needs (OIDC
// Core §5.4 lets a provider serve profile claims only there). Nil claims and a note
// when it was not asked or could not be read: the sign-in goes on with the ID token's.
func (s *Server) userInfo(ctx context.Context, token *oauth2.Token, id signin.Claims) (signin.Claims, string) {
	if !s.auth.claims.NeedsUserInfo(id) {
		return nil, "not asked: the ID token had every claim Gantry reads"
	}
	if s.auth.provider.UserInfoEndpoint() == "" {
		return nil, "not asked: the provider has no UserInfo endpoint"
	}
	info, err := s.auth.provider.UserInfo(ctx, oauth2.StaticTokenSource(token))
	var claims signin.Claims
	if err == nil {
		err = info.Claims(&claims)
	}
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "oidc userinfo unreadable", "error", err)
		return nil, "asked, but its answer could not be read"
	}
	return claims, "asked: the ID token lacked a claim Gantry reads"
}

// finishSignIn records the user (with the groups snapshot), accepts invitations for a
// verified address, applies the group rules, starts a new session (ending the browser's old one, if any) with
// when the provider authenticated the person (nil: not known, never fresh) and audits the
// sign-in in the organization the user lands in.
func (s *Server) finishSignIn(c echo.Context, rs *requestSession, login org.Login, emailVerified bool, returnTo string, authTime *time.Time) error {
	ctx := c.Request().Context()
	issuer := login.Issuer
	// Sign-ins are rare enough to pay for sweeping abandoned sessions.
	if _, err := s.sessions.DeleteOver(ctx); err != nil {
		return err
	}
	user, err := s.orgs.UpsertLoginUser(ctx, login)
	if err != nil {
		return err
	}
	if emailVerified {
		if err := s.orgs.AcceptInvitations(ctx, user); err != nil {
			return err
		}
	}
	// Group rules at every sign-in, after invitations (a membership an invitation made
	// is never the rules'): this sign-in's groups admit, change or end what rules made.
	if err := s.groupRules.AtSignIn(ctx, user); err != nil {
		return err
	}
	memberships, err := s.orgs.MembershipsOf(ctx, user.ID)
	if err != nil {
		return err
	}
	// The sign-in may have changed the groups snapshot or added memberships: which
	// waiting runs this person may decide ("Waiting for you") moves with them.
	for _, m := range memberships {
		if err := s.eligibility.RefreshDecidersOf(ctx, m.OrganizationID, user.ID); err != nil {
			return err
		}
	}
	var orgID *string
	if len(memberships) > 0 {
		orgID = &memberships[0].OrganizationID
	}
	token, sess, err := s.sessions.SignIn(ctx, rs.sess, user.ID, orgID)
	if err != nil {
		return err
	}
	if authTime != nil {
		sess.Data.AuthTime = authTime
		if err := s.sessions.SaveData(ctx, sess); err != nil {
			return err
		}
	}
	rs.sess = sess
	s.setSessionCookie(c, token)
	if orgID != nil {
		actor := authz.Subject{UserID: user.ID, Name: user.DisplayName(), OrganizationID: *orgID, Role: memberships[0].Role}
		if err := s.audit.RecordAs(ctx, actor, audit.Entry{Action: "user.signed_in", TargetType: "user", TargetID: user.ID,
			Data: map[string]any{"issuer": issuer}}); err != nil {
			return err
		}
	}
	return c.Redirect(http.StatusSeeOther, safeReturn(returnTo))
}

// logout ends the session here. (The provider's own session, if any, is the
// provider's business; Gantry never trusts it without a new code exchange.)
func (s *Server) logout(c echo.Context) error {
	ctx := c.Request().Context()
	rs := sessionOf(c)
	if rs.found {
		if rs.sess.SignedIn() && rs.sess.OrganizationID != nil {
			user, err := s.orgs.User(ctx, *rs.sess.UserID)
			if err == nil {
				actor := authz.Subject{UserID: user.ID, Name: user.DisplayName(), OrganizationID: *rs.sess.OrganizationID}
				if err := s.audit.RecordAs(ctx, actor, audit.Entry{Action: "user.signed_out", TargetType: "user", TargetID: user.ID}); err != nil {
					return err
				}
			}
		}
		if err := s.sessions.Delete(ctx, rs.sess); err != nil {
			return err
		}
	}
	s.clearSessionCookie(c)
	return render.Redirect(c, paths.SignedOut())
}

func (s *Server) signedOut(c echo.Context) error {
	return render.Page(c, http.StatusOK, views.SignedOut())
}
