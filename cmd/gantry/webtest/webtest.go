// Package webtest starts the whole web application for tests, as `gantry dev` does
// but in-process: a fresh migrated database with the demo data, the development
// OpenID Provider and Gantry, each on its own loopback port. Clients sign in through
// the real OIDC flow.
package webtest

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/bench"
	catalogfiles "gantry/catalog"
	"gantry/cmd/gantry/assemble"
	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/demo"
	"gantry/models/keyring"
	"gantry/models/notify"
	"gantry/runner"
	"gantry/runner/mock"
	"gantry/telemetry"
	"gantry/web"
	"gantry/web/devidp"
	"gantry/web/devmail"
)

// ClientID and ClientSecret are the test relying party's registration.
const (
	ClientID     = "gantry-test"
	ClientSecret = "test-secret-not-used-elsewhere"
)

// Newcomer is a user the provider knows who belongs to no organization.
const (
	NewcomerEmail    = "newcomer@example.test"
	NewcomerPassword = "newcomer-pass"
)

// Options change what Start builds.
type Options struct {
	// Runner executes runs; default the MockTofuRunner.
	Runner runner.Runner
	// CatalogFS replaces the shipped catalog.
	CatalogFS fs.FS
	// DSN reuses an existing database (see RestartWith) instead of a fresh one.
	DSN string
	// DatabaseURL is a database of the test's own instead of a fresh one from the
	// shared test server (say, on a private cluster the test restarts): Start migrates
	// it and seeds the demo data, as a fresh one has. DSN, when set, wins.
	DatabaseURL string
	// Listener, when set, is where Gantry serves (so its URL can be known before Start,
	// e.g. by a cloud that must trust Gantry's workload issuer).
	Listener net.Listener
	// Mail starts a local SMTP catcher (App.Mail) that notification mail goes to, and
	// serves its /dev/mail page.
	Mail bool
	// Hooks replaces the tests' webhook settings (which let hooks call loopback and
	// retry after 100 ms).
	Hooks *notify.HookOptions
	// Keys are the key-encryption keys (nil: a fresh key; RestartWith passes the
	// earlier one's, as replicas share theirs).
	Keys *keyring.Keyring
	// CloudEndpoint is the sandbox cloud a live runner's jobs use: drift checks read
	// its change history ("": none).
	CloudEndpoint string
	// Log, when set, receives the portal's log as the gantry command writes it (JSON, with
	// the ids a request's or a job's context carries); by default the log is discarded.
	Log        io.Writer
	RateLimits *web.RateLimits // the portal's rate limits and their clock; nil: none (limits.go)
	// TrustedProxies are the portal's (web.Config.TrustedProxies; nil: none, as gantry
	// serve without --trusted-proxies). A test that names client addresses in
	// X-Forwarded-For trusts its own loopback peer: 127.0.0.0/8.
	TrustedProxies []string
	// OmitAuthTime makes the development provider leave auth_time out of its ID tokens,
	// as a provider that does not send it.
	OmitAuthTime bool
	// ClaimsOnlyFromUserInfo makes the development provider serve e-mail, name and
	// groups only from its UserInfo endpoint.
	ClaimsOnlyFromUserInfo bool
	// Provider, when set, is the OpenID Provider Gantry signs in with instead of the
	// development one (which still runs, for the demo users' seeding).
	Provider *Provider
	// VerifiedDomains and GroupsClaim are the portal's (web.Config).
	VerifiedDomains []string
	GroupsClaim     string
	// WorkloadTokenLifetime shortens the workload tokens' life (zero: 15 minutes).
	WorkloadTokenLifetime time.Duration
	// ApplyHooks hear of (and may hold) each attempt of an apply job.
	ApplyHooks runner.ApplyHooks
	// IssuerTLS serves the workload issuer over TLS (web.ListenIssuerTLS), its URL the
	// issuer's, for a target that trusts only https issuers (nil: the issuer is URL +
	// /workload).
	IssuerTLS *web.IssuerTLS
	// ModuleClient fetches the allowlisted modules templates call (nil: https with the
	// system's roots): a loopback TLS registry's client.
	ModuleClient *http.Client
}

// Provider is an OpenID Provider other than the development one, and Gantry's client there.
type Provider struct{ Issuer, ClientID, ClientSecret string }

// App is one running Gantry with its provider and database.
type App struct {
	URL    string // Gantry's base URL
	Issuer string // the development provider's issuer URL
	DSN    string
	DB     *gorm.DB
	Orgs   map[string]string // demo organization slug -> id
	Server *web.Server
	System *assemble.Portal
	// Mail is the SMTP catcher when Options.Mail asked for one.
	Mail *devmail.Catcher
	// Keys seal artifacts, states and live logs.
	Keys *keyring.Keyring
}

// Start runs a fresh application for t and stops it when t ends.
func Start(t testing.TB) *App { return StartWith(t, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *App {
	t.Helper()
	if opts.Runner == nil {
		opts.Runner = mock.New()
	}
	if opts.CatalogFS == nil {
		opts.CatalogFS = catalogfiles.FS
	}
	ctx := context.Background()
	app := &App{DSN: opts.DSN}
	var err error
	switch {
	case app.DSN != "":
	case opts.DatabaseURL != "":
		app.DSN = opts.DatabaseURL
		sqlDB, err := db.OpenSQL(app.DSN)
		require.NoError(t, err)
		err = db.Migrate(ctx, sqlDB)
		sqlDB.Close()
		require.NoError(t, err)
	default:
		app.DSN = dbtest.NewURL(t)
	}
	app.DB, err = db.Open(ctx, app.DSN)
	require.NoError(t, err)
	t.Cleanup(func() {
		if sqlDB, err := app.DB.DB(); err == nil {
			sqlDB.Close()
		}
	})

	idpLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	appLn := opts.Listener
	if appLn == nil {
		appLn, err = net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
	}
	app.Issuer = "http://" + idpLn.Addr().String()
	app.URL = "http://" + appLn.Addr().String()

	app.Orgs, err = demo.Seed(ctx, app.DB, app.Issuer)
	require.NoError(t, err)

	var users []devidp.User
	for _, u := range demo.Users() {
		users = append(users, devidp.User{Subject: u.Subject, Email: u.Email, Name: u.Name, Password: u.Password, Note: u.OrgSlug + " " + string(u.Role),
			Groups: u.Groups})
	}
	users = append(users, devidp.User{Subject: "newcomer", Email: NewcomerEmail, Name: "Nora Newcomer", Password: NewcomerPassword})
	idp, err := devidp.New(devidp.Config{
		Issuer:  app.Issuer,
		Clients: []devidp.Client{{ID: ClientID, Secret: ClientSecret, RedirectURIs: []string{app.URL + "/auth/callback"}}},
		Users:   users, OmitAuthTime: opts.OmitAuthTime, ClaimsOnlyFromUserInfo: opts.ClaimsOnlyFromUserInfo,
	})
	require.NoError(t, err)
	idpSrv := httptest.NewUnstartedServer(idp)
	idpSrv.Listener.Close()
	idpSrv.Listener = idpLn
	idpSrv.Start()
	t.Cleanup(idpSrv.Close)

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if opts.Log != nil {
		quiet = slog.New(telemetry.LogHandler(slog.NewJSONHandler(opts.Log, nil)))
	}
	keys := opts.Keys
	if keys == nil {
		keys, err = keyring.Parse(keyring.NewKeySpec("test-1"))
		require.NoError(t, err)
	}
	app.Keys = keys
	hooks := notify.HookOptions{AllowPrivateTargets: true, RetryBase: 100 * time.Millisecond, RetryMax: time.Second, Timeout: 5 * time.Second}
	if opts.Hooks != nil {
		hooks = *opts.Hooks
	}
	var mailer notify.Mailer
	if opts.Mail {
		app.Mail, err = devmail.Listen("127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = app.Mail.Close() })
		mailer, err = notify.NewSMTPMailer(notify.SMTPConfig{Addr: app.Mail.Addr(), From: "Gantry test <gantry@gantry-test.localhost>", TLS: "none"})
		require.NoError(t, err)
	}
	app.System, err = assemble.Build(ctx, assemble.Config{DB: app.DB, DSN: app.DSN, Keys: keys, CatalogFS: opts.CatalogFS,
		Runner: opts.Runner, BaseURL: app.URL, Logger: quiet, Mailer: mailer, Hooks: hooks, CloudEndpoint: opts.CloudEndpoint,
		WorkloadTokenLifetime: opts.WorkloadTokenLifetime, ApplyHooks: opts.ApplyHooks, WorkloadIssuerURL: issuerURL(opts), ModuleClient: opts.ModuleClient})
	require.NoError(t, err)
	cfg := web.Config{BaseURL: app.URL, Issuer: app.Issuer, ClientID: ClientID, ClientSecret: ClientSecret, Logger: quiet, DevMail: app.Mail,
		VerifiedDomains: opts.VerifiedDomains, GroupsClaim: opts.GroupsClaim}
	if p := opts.Provider; p != nil {
		cfg.Issuer, cfg.ClientID, cfg.ClientSecret = p.Issuer, p.ClientID, p.ClientSecret
	}
	app.Server, err = app.System.Web(ctx, rateLimits(opts, cfg))
	require.NoError(t, err)
	serveIssuerTLS(ctx, t, opts, app.Server)
	runCtx, stop := context.WithCancel(ctx)
	require.NoError(t, app.System.Queue.Start(runCtx))
	changesDone := make(chan struct{})
	go func() { app.Server.Changes.Run(runCtx); close(changesDone) }()
	t.Cleanup(func() {
		// Workers finish the job they run first; on a busy database that takes a while.
		stopCtx, cancel := bench.Context(context.Background(), 10*time.Second)
		defer cancel()
		_ = app.System.Queue.Stop(stopCtx)
		stop()
		<-changesDone
		app.System.Close()
	})
	appSrv := httptest.NewUnstartedServer(app.Server.Echo)
	appSrv.Listener.Close()
	appSrv.Listener = appLn
	appSrv.Start()
	t.Cleanup(appSrv.Close)
	return app
}

// RestartWith starts a second Gantry on the database of an earlier one, with its keys,
// as a restart or another replica would.
func RestartWith(t testing.TB, earlier *App, opts Options) *App {
	t.Helper()
	opts.DSN = earlier.DSN
	if opts.Keys == nil {
		opts.Keys = earlier.Keys
	}
	return StartWith(t, opts)
}

// Client is a browser-like HTTP client: it keeps cookies and does not follow
// redirects, so tests see every hop.
func (a *App) Client(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{
		Jar:           jar,
		Timeout:       15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Follow performs req and follows redirects until a non-redirect answer, or until
// stop says to stop at a redirect target (returned unfollowed).
func Follow(t testing.TB, c *http.Client, req *http.Request, stop func(*url.URL) bool) *http.Response {
	t.Helper()
	for hops := 0; hops < 15; hops++ {
		resp, err := c.Do(req)
		require.NoError(t, err)
		if resp.StatusCode < 300 || resp.StatusCode > 399 {
			return resp
		}
		loc, err := resp.Location()
		require.NoError(t, err)
		if stop != nil && stop(loc) {
			return resp
		}
		resp.Body.Close()
		req, err = http.NewRequest(http.MethodGet, loc.String(), nil)
		require.NoError(t, err)
	}
	t.Fatal("too many redirects")
	return nil
}

var hiddenID = regexp.MustCompile(`name="id" value="([^"]+)"`)
var formAction = regexp.MustCompile(`<form method="post" action="([^"]+)"`)

// StartLogin goes from Gantry's /login to the provider's login page and returns the
// page's form action and auth request id.
func (a *App) StartLogin(t testing.TB, c *http.Client) (action, authRequestID string) {
	t.Helper()
	return a.StartLoginAt(t, c, "/login")
}

// StartLoginAt is StartLogin from loginPath, a /login address with its query (such as
// return_to).
func (a *App) StartLoginAt(t testing.TB, c *http.Client, loginPath string) (action, authRequestID string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, a.URL+loginPath, nil)
	resp := Follow(t, c, req, nil)
	body := ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	m := hiddenID.FindStringSubmatch(body)
	require.NotNil(t, m, "login page has no auth request id: %s", body)
	f := formAction.FindStringSubmatch(body)
	require.NotNil(t, f, "login page has no form")
	action = strings.ReplaceAll(f[1], "&amp;", "&")
	if strings.HasPrefix(action, "/") {
		action = a.Issuer + action
	}
	return action, m[1]
}

// SubmitCredentials posts the provider's login form and returns the redirect back to
// Gantry's callback, unfollowed.
func (a *App) SubmitCredentials(t testing.TB, c *http.Client, action, authRequestID, username, password string) *url.URL {
	t.Helper()
	form := url.Values{"id": {authRequestID}, "username": {username}, "password": {password}}
	req, _ := http.NewRequest(http.MethodPost, action, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp := Follow(t, c, req, func(u *url.URL) bool { return strings.HasPrefix(u.String(), a.URL+"/auth/callback") })
	defer resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode, "provider did not redirect back to the callback")
	loc, err := resp.Location()
	require.NoError(t, err)
	return loc
}

// Login signs c in as the demo user with email, through the real OIDC flow.
func (a *App) Login(t testing.TB, c *http.Client, email string) {
	t.Helper()
	u, ok := demo.Find(email)
	require.True(t, ok, "no demo user %s", email)
	resp := a.LoginAs(t, c, u.Email, u.Password)
	body := ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `data-testid="current-user"`, "not signed in after the callback")
}

// LoginAs runs the OIDC flow with any credentials and returns the final answer.
func (a *App) LoginAs(t testing.TB, c *http.Client, username, password string) *http.Response {
	t.Helper()
	action, id := a.StartLogin(t, c)
	callback := a.SubmitCredentials(t, c, action, id, username, password)
	req, _ := http.NewRequest(http.MethodGet, callback.String(), nil)
	return Follow(t, c, req, nil)
}

// LoggedIn returns a new client signed in as email.
func (a *App) LoggedIn(t testing.TB, email string) *http.Client {
	t.Helper()
	c := a.Client(t)
	a.Login(t, c, email)
	return c
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]*)"`)

// CSRF fetches the home page with c and returns the session's CSRF token.
func (a *App) CSRF(t testing.TB, c *http.Client) string {
	t.Helper()
	resp := a.Get(t, c, "/")
	body := ReadBody(t, resp)
	m := csrfField.FindStringSubmatch(body)
	require.NotNil(t, m, "no CSRF field on the home page")
	return m[1]
}

// Get requests path with c.
func (a *App) Get(t testing.TB, c *http.Client, path string) *http.Response {
	t.Helper()
	resp, err := c.Get(a.URL + path)
	require.NoError(t, err)
	return resp
}

// PostForm posts form to path with c, with a fresh idempotency key as a browser sends it
// (every Gantry form carries one; a test leaves it out by setting the field to "").
func (a *App) PostForm(t testing.TB, c *http.Client, path string, form url.Values) *http.Response {
	t.Helper()
	resp, err := a.TryPostForm(c, path, form)
	require.NoError(t, err)
	return resp
}

// ReadBody reads and closes resp's body.
func ReadBody(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// OrgEnvironmentID returns the id of the environment named name in organization slug.
func (a *App) OrgEnvironmentID(t testing.TB, slug, name string) string {
	t.Helper()
	var id string
	err := a.DB.Raw("SELECT id FROM environments WHERE organization_id = ? AND name = ?", a.Orgs[slug], name).Scan(&id).Error
	require.NoError(t, err)
	require.NotEmpty(t, id, fmt.Sprintf("no environment %s in %s", name, slug))
	return id
}
