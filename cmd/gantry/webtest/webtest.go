// Package webtest starts the whole web application for tests, as `gantry dev` does
// but in-process: a fresh migrated database with the demo data, the development
// OpenID Provider and Gantry, each on its own loopback port. Clients sign in through
// the real OIDC flow.
package webtest

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
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
	// IDP is the development provider people sign in at (SetGroups changes what it asserts).
	IDP *devidp.Provider
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
	app.IDP = idp
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
