//go:build !nodev

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"gantry/models/db"
	"gantry/models/db/pgcluster"
	"gantry/models/demo"
	"gantry/models/keyring"
	"gantry/models/notify"
	"gantry/sandbox/cloud"
	"gantry/views/paths"
	"gantry/web"
	"gantry/web/devidp"
	"gantry/web/devmail"
)

const devClientID = "gantry-dev"

func runDev(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	var (
		w                webFlags
		dataDir, idpAddr string
		sandboxAddr      string
		pgPort           int
		reset, setupOnly bool
		sf               systemFlags
	)
	f := newFlags("dev", "Run Gantry with everything embedded: a private PostgreSQL cluster, a development\nOpenID Provider with demo users in two organizations, and demo data.", stdout)
	w.register(f, "127.0.0.1:8080", "127.0.0.1:9464", "")
	f.str(&dataDir, "data-dir", "GANTRY_DATA_DIR", ".data", "directory for the private PostgreSQL cluster; reused on the next start")
	f.str(&idpAddr, "idp-addr", "GANTRY_DEV_IDP_ADDR", "127.0.0.1:5556", "address of the development OpenID Provider")
	f.str(&sandboxAddr, "sandbox-addr", "GANTRY_DEV_SANDBOX_ADDR", "127.0.0.1:8790", "address of the embedded sandbox cloud")
	f.IntVar(&pgPort, "pg-port", 0, "port of the private PostgreSQL cluster (default: the last one used, else a free one)")
	sf.register(f)
	f.str(&sf.binDir, "bin-dir", "GANTRY_BIN_DIR", "", "where the OpenTofu built from the source tree is kept between starts (default: the source tree's bin/)")
	f.BoolVar(&reset, "reset", false, "delete the private cluster's data first, so demo data starts fresh")
	f.BoolVar(&setupOnly, "setup-only", false, "prepare the cluster, migrations and demo data, then exit")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := sf.check(); err != nil {
		return err
	}
	domains, err := w.oidcDomains()
	if err != nil {
		return err
	}
	pgDir := filepath.Join(dataDir, "postgres")
	if reset {
		if err := resetCluster(ctx, pgDir, logger); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Deleted %s.\n", pgDir)
	}

	appLn, err := net.Listen("tcp", w.addr)
	if err != nil {
		return fmt.Errorf("listening on %s (is another gantry dev running?): %w", w.addr, err)
	}
	defer appLn.Close()
	if w.baseURL == "" {
		w.baseURL = "http://" + appLn.Addr().String()
	}
	sandboxLn, err := net.Listen("tcp", sandboxAddr)
	if err != nil {
		return fmt.Errorf("listening on %s for the sandbox cloud: %w", sandboxAddr, err)
	}
	defer sandboxLn.Close()
	idpLn, err := net.Listen("tcp", idpAddr)
	if err != nil {
		return fmt.Errorf("listening on %s for the development OpenID Provider: %w", idpAddr, err)
	}
	defer idpLn.Close()
	issuer := "http://" + idpLn.Addr().String()

	fmt.Fprintf(stdout, "Starting the private PostgreSQL cluster in %s ...\n", pgDir)
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{Dir: pgDir, Port: pgPort, Logger: logger})
	if err != nil {
		return err
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			logger.Error("stopping postgres", "error", err)
		}
	}()
	if err := cluster.EnsureDatabase(ctx, "gantry"); err != nil {
		return err
	}
	dsn := cluster.URL("gantry")
	if err := migrateDatabase(ctx, dsn); err != nil {
		return err
	}
	gdb, err := db.Open(ctx, dsn)
	if err != nil {
		return err
	}
	if _, err := demo.Seed(ctx, gdb, issuer); err != nil {
		return err
	}
	if setupOnly {
		fmt.Fprintf(stdout, "Database ready with demo data: %s\n", dsn)
		return nil
	}

	// The client secret lives only in this process: a new one every start.
	secret := randomHex(16)
	idp, err := devidp.New(devidp.Config{
		Issuer:  issuer,
		Clients: []devidp.Client{{ID: devClientID, Secret: secret, RedirectURIs: []string{w.baseURL + "/auth/callback"}}},
		Users:   devUsers(),
		Logger:  logger,
	})
	if err != nil {
		return err
	}
	// The provider must answer before Gantry starts: Gantry discovers it at start.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveUntilDone(gctx, idpLn, idp) })
	if sf.keys == "" {
		if sf.keys, err = devKeys(dataDir); err != nil {
			return err
		}
	}
	// The embedded sandbox cloud trusts Gantry's workload identity issuer; its
	// break-glass admin token is kept in .data for the manual change path.
	adminToken, err := devSecret(filepath.Join(dataDir, "sandbox-admin-token"))
	if err != nil {
		return err
	}
	if sf.cloudEndpoint == "" {
		sf.cloudEndpoint = "http://" + sandboxLn.Addr().String()
	}
	sf.defaultLive = true
	if sf.workDir == "" {
		sf.workDir = filepath.Join(dataDir, "work")
	}
	// Isolated jobs reach the state backend and the cloud through these sockets.
	sockets, err := filepath.Abs(filepath.Join(sf.workDir, "sockets"))
	if err != nil {
		return err
	}
	if sf.stateSocket == "" {
		sf.stateSocket = filepath.Join(sockets, "state.sock")
	}
	var cloudSock net.Listener
	if sf.cloudSocket == "" {
		sf.cloudSocket = filepath.Join(sockets, "cloud.sock")
		if cloudSock, err = listenSocket(sf.cloudSocket); err != nil {
			return err
		}
	}
	// Notification mail goes to a local catcher whose mail /dev/mail shows, and webhooks
	// may call this machine (a receiver on loopback), unless told otherwise.
	var catcher *devmail.Catcher
	if sf.smtp.Addr == "" {
		if catcher, err = devmail.Listen("127.0.0.1:0"); err != nil {
			return err
		}
		defer catcher.Close()
		sf.smtp = notify.SMTPConfig{Addr: catcher.Addr(), From: "Gantry dev <gantry@gantry-dev.localhost>", TLS: "none"}
	}
	if os.Getenv("GANTRY_WEBHOOK_ALLOW_PRIVATE") == "" {
		sf.hooks.AllowPrivateTargets = true
	}
	// The toolchain builds in the background (the first build of OpenTofu takes minutes):
	// the portal serves at once, and live runs wait for it.
	sf.build = sf.tofuPath == "" || sf.providerPath == ""
	sys, prepare, err := buildSystem(ctx, gdb, dsn, w.baseURL, sf, logger)
	if err != nil {
		return err
	}
	// The browser reaches gantry dev directly, so no proxy is trusted unless
	// --trusted-proxies names one: the client is the connection's peer.
	w.printClaims(stdout, issuer, domains)
	srv, err := sys.Web(ctx, web.Config{
		BaseURL: w.baseURL, Issuer: issuer, ClientID: devClientID, ClientSecret: secret,
		SessionIdle: w.sessionIdle, SessionLifetime: w.sessionLifetime, TrustedProxies: w.proxies(), Logger: logger, DevMail: catcher,
		GroupsClaim: w.groupsClaim, VerifiedDomains: domains,
	})
	if err != nil {
		sys.Close()
		return err
	}
	metricsLn, err := listenMetrics(w.metricsAddr)
	if err != nil {
		sys.Close()
		return err
	}
	g.Go(func() error { return servePortal(gctx, appLn, metricsLn, srv, sys, sf) })
	building := ""
	if prepare != nil {
		g.Go(func() error { prepare(gctx); return nil })
		building = "; OpenTofu is being prepared in the background (the first build takes minutes): live runs wait for it, /executors shows how far it has come"
	}
	// The sandbox cloud discovers Gantry's workload issuer when it starts, so it starts
	// once Gantry answers; until then its listeners hold incoming connections.
	g.Go(func() error {
		waitUntilServing(gctx, w.baseURL+"/healthz")
		cloudCtx, issuerURL := sf.issuer.forCloud(gctx, w.baseURL)
		cloudSrv, err := cloud.New(cloudCtx, cloud.Config{DataDir: filepath.Join(dataDir, "sandbox-cloud"), Issuer: issuerURL,
			AdminToken: adminToken, Logger: logger})
		if err != nil {
			return err
		}
		if cloudSock != nil {
			go func() { _ = serveUntilDone(gctx, cloudSock, cloudSrv) }()
		}
		return serveUntilDone(gctx, sandboxLn, cloudSrv)
	})
	fmt.Fprintf(stdout, "\nGantry is running at %s\n  development OpenID Provider: %s (its login page lists the demo users)\n  database: %s\n  default executor: %s (also offered: mock, SIMULATED, at once%s)\n  sandbox cloud: %s (break-glass admin token in %s)\n  example sign-in: admin@acme.test / admin-acme\n  mail: %s\nPress Ctrl-C to stop.\n\n",
		w.baseURL, issuer, dsn, sys.Default, building, sf.cloudEndpoint, filepath.Join(dataDir, "sandbox-admin-token"), mailNote(catcher, w.baseURL, sf.smtp.Addr))
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	fmt.Fprintln(stdout, "Stopped.")
	return nil
}

// waitUntilServing polls url until it answers (at most ten seconds).
// mailNote says where gantry dev's notification mail goes.
func mailNote(catcher *devmail.Catcher, baseURL, addr string) string {
	if catcher != nil {
		return "caught by a local SMTP catcher on " + catcher.Addr() + "; read it at " + baseURL + paths.DevMail()
	}
	return "sent through " + addr
}

func waitUntilServing(ctx context.Context, url string) {
	for i := 0; i < 100 && ctx.Err() == nil; i++ {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// devSecret returns the random secret kept in path, creating it on first use.
func devSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	secret := randomHex(24)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return secret, nil
}

// devKeys returns the development key-encryption key kept in dataDir/dev-keys,
// creating it on first use. Development only: `gantry serve` takes its keys from the
// environment and never from a file.
func devKeys(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "dev-keys")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	spec := keyring.NewKeySpec("dev-1")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(spec+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing development keys: %w", err)
	}
	return spec, nil
}

// resetCluster stops the private cluster in dir if it is running and deletes it.
func resetCluster(ctx context.Context, dir string, logger *slog.Logger) error {
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err == nil {
		// Start reuses a running server, so this finds it whatever state it is in.
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Logger: logger})
		if err != nil {
			return fmt.Errorf("reaching the cluster to stop it: %w", err)
		}
		if err := cluster.Stop(); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("deleting %s: %w", dir, err)
	}
	return nil
}

// devUsers are the demo users as identities at the development provider.
func devUsers() []devidp.User {
	var out []devidp.User
	for _, u := range demo.Users() {
		org := u.OrgSlug
		for _, o := range demo.Orgs {
			if o.Slug == u.OrgSlug {
				org = o.Name
			}
		}
		out = append(out, devidp.User{Subject: u.Subject, Email: u.Email, Name: u.Name, Password: u.Password,
			Note: org + " · " + strings.ToLower(string(u.Role)), Groups: u.Groups})
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	return hex.EncodeToString(b)
}
