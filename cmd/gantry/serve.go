package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"gantry/models/db"
	"gantry/web"
)

func runServe(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	var (
		w                                       webFlags
		sf                                      systemFlags
		dsn, issuer, clientID, secret, redirect string
		migrate                                 bool
	)
	f := newFlags("serve", "Run the portal against any PostgreSQL database and any OpenID Provider.", stdout)
	w.register(f, ":8080", ":9464", "")
	f.str(&dsn, "database-url", "GANTRY_DATABASE_URL", "", "PostgreSQL URL, e.g. postgres://gantry@db/gantry")
	f.str(&issuer, "oidc-issuer", "GANTRY_OIDC_ISSUER", "", "OpenID Provider issuer URL")
	f.str(&clientID, "oidc-client-id", "GANTRY_OIDC_CLIENT_ID", "", "OAuth client id registered at the provider")
	f.str(&secret, "oidc-client-secret", "GANTRY_OIDC_CLIENT_SECRET", "", "OAuth client secret (prefer the environment variable)")
	f.str(&redirect, "oidc-redirect-url", "GANTRY_OIDC_REDIRECT_URL", "", "callback URL registered at the provider (default: base URL + /auth/callback)")
	sf.register(f)
	f.BoolVar(&migrate, "migrate", envOr("GANTRY_MIGRATE", "true") == "true", "apply pending migrations at start ($GANTRY_MIGRATE)")
	if err := f.parse(args); err != nil {
		return err
	}
	var missing []string
	for name, v := range map[string]string{"--database-url": dsn, "--base-url": w.baseURL, "--oidc-issuer": issuer, "--oidc-client-id": clientID} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing required settings %v (see gantry help serve)", missing)
	}
	if err := sf.check(); err != nil {
		return err
	}
	domains, err := w.oidcDomains()
	if err != nil {
		return err
	}
	if err := sf.checkPrebuilt(); err != nil {
		return err
	}
	if migrate {
		if err := migrateDatabase(ctx, dsn); err != nil {
			return err
		}
	}
	gdb, err := db.Open(ctx, dsn)
	if err != nil {
		return err
	}
	sys, _, err := buildSystem(ctx, gdb, dsn, w.baseURL, sf, logger) // serve never builds: nothing to prepare
	if err != nil {
		return err
	}
	w.printClaims(stdout, issuer, domains)
	srv, err := sys.Web(ctx, web.Config{
		BaseURL: w.baseURL, Issuer: issuer, ClientID: clientID, ClientSecret: secret, RedirectURL: redirect,
		SessionIdle: w.sessionIdle, SessionLifetime: w.sessionLifetime, TrustedProxies: w.proxies(), Logger: logger,
		GroupsClaim: w.groupsClaim, VerifiedDomains: domains,
	})
	if err != nil {
		sys.Close()
		return err
	}
	ln, err := net.Listen("tcp", w.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", w.addr, err)
	}
	metricsLn, err := listenMetrics(w.metricsAddr)
	if err != nil {
		ln.Close()
		return err
	}
	metricsAt := "none"
	if metricsLn != nil {
		metricsAt = metricsLn.Addr().String()
	}
	logger.Info("gantry serving", "addr", ln.Addr().String(), "base_url", w.baseURL, "runner", sf.runnerName, "metrics_addr", metricsAt)
	return servePortal(ctx, ln, metricsLn, srv, sys, sf)
}

// serveUntilDone serves h on ln until ctx ends, then drains in-flight requests.
func serveUntilDone(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}
