// Package pgcluster runs a private PostgreSQL cluster for development and
// tests: its own data directory, a port on 127.0.0.1 only, and trust
// authentication for a superuser named gantry. It is not for production data.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Superuser is the role initdb creates; URL connects as it.
const Superuser = "gantry"

const (
	// portFile remembers the port a cluster last ran on, so a dev cluster
	// keeps its address across restarts. Postgres ignores unknown files in
	// its data directory.
	portFile = "gantry.port"
	// logFile receives the server's output (pg_ctl -l).
	logFile = "server.log"
	// readyTimeout bounds how long Start waits for the server to accept
	// connections after pg_ctl reports it started.
	readyTimeout = 15 * time.Second
	// maxSocketDir keeps <dir>/.s.PGSQL.<port> within the 107-byte limit of
	// a unix socket path.
	maxSocketDir = 107 - len("/.s.PGSQL.65535")
)

// Options configure Start.
type Options struct {
	// Dir is the data directory (PGDATA), e.g. ".data/postgres"; created if
	// missing. When running as root, every parent of Dir must be searchable
	// by the postgres user: use MkdirTemp for throwaway clusters.
	Dir string
	// Port to listen on at 127.0.0.1. 0 reuses the port this Dir last ran on
	// if it is still free, else picks a free one.
	Port int
	// Logger receives progress messages; nil discards them.
	Logger *slog.Logger
	// Fast turns off fsync, synchronous_commit and full_page_writes. A crash
	// can then lose or corrupt data: only for throwaway test clusters.
	Fast bool
}

// Cluster is a running PostgreSQL server owned by this process (or found
// already running in Dir and reused).
type Cluster struct {
	dir  string // absolute data directory
	bin  string // directory holding initdb and pg_ctl
	own  *owner // nil unless running as root
	log  *slog.Logger
	port int
	fast bool
	mu   sync.Mutex
	done bool // Stop has succeeded
}

// Start initialises Dir if it holds no cluster yet (no PG_VERSION) and starts
// the server. If a server is already running on Dir, Start reuses it.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("starting postgres: Options.Dir is empty")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	own, err := currentOwner()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{dir: dir, bin: bin, own: own, log: log, fast: opts.Fast}

	if err := c.prepareDir(ctx); err != nil {
		return nil, err
	}
	if port, ok := runningPort(dir); ok {
		// Reusing beats restarting: a dev server killed without Stop leaves
		// postgres running, and the next run should simply pick it up.
		if opts.Port != 0 && opts.Port != port {
			log.Warn("postgres already running on another port; reusing it", "dir", dir, "port", port, "wanted", opts.Port)
		}
		log.Info("reusing running postgres", "dir", dir, "port", port)
		c.port = port
		if err := c.waitReady(ctx); err != nil {
			return nil, fmt.Errorf("reusing postgres already running in %s (is %s stale?): %w",
				dir, filepath.Join(dir, "postmaster.pid"), err)
		}
		return c, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	if err := c.start(ctx, opts.Port); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("starting postgres: %w\n%s", err, c.logTail(0))
	}
	return c, nil
}

// prepareDir creates the data directory with mode 0700 (postgres refuses a
// group- or world-readable one) and, as root, hands it to the postgres user.
func (c *Cluster) prepareDir(ctx context.Context) error {
	// Collect the missing directories first so we chown exactly the ones we
	// create, never a pre-existing parent such as /tmp.
	var missing []string
	for d := c.dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("preparing data directory: %w", err)
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("preparing data directory: %w", err)
	}
	if err := os.Chmod(c.dir, 0o700); err != nil {
		return fmt.Errorf("preparing data directory: %w", err)
	}
	if c.own == nil {
		return nil
	}
	for _, d := range append(missing, c.dir) {
		if err := c.own.chown(d); err != nil {
			return fmt.Errorf("preparing data directory: %w", err)
		}
	}
	// Owning Dir is not enough: the postgres user must also be able to walk
	// down to it, which a 0700 parent (/root, an os.MkdirTemp dir) prevents.
	check := c.command(ctx, "/bin/sh", "-c", `test -x "$1" && test -w "$1"`, "sh", c.dir)
	check.Dir = "/"
	if out, err := check.CombinedOutput(); err != nil {
		detail := err.Error()
		if s := strings.TrimSpace(string(out)); s != "" {
			detail += ": " + s
		}
		return fmt.Errorf("preparing data directory: running as root, so postgres runs as the %q user, "+
			"which cannot reach %s (%s): every parent directory must be searchable by it (chmod o+x), "+
			"so pick a path outside 0700 directories such as /root, or use pgcluster.MkdirTemp",
			c.own.name, c.dir, detail)
	}
	return nil
}

func (c *Cluster) initdb(ctx context.Context) error {
	c.log.Info("initialising postgres cluster", "dir", c.dir)
	args := []string{"-D", c.dir, "-A", "trust", "-U", Superuser, "--encoding=UTF8", "--locale=C"}
	if c.fast {
		// Skipping the final fsync saves a second or so per throwaway cluster.
		args = append(args, "--no-sync")
	}
	if out, err := c.command(ctx, filepath.Join(c.bin, "initdb"), args...).CombinedOutput(); err != nil {
		return fmt.Errorf("initialising postgres in %s: %w\n%s", c.dir, err, tail(out))
	}
	return nil
}

// start runs pg_ctl start on the chosen port. A port we picked ourselves can
// be taken by someone else between our check and postgres binding it, so in
// that case it retries with another port.
func (c *Cluster) start(ctx context.Context, wantPort int) error {
	port := wantPort
	if port == 0 {
		port = c.rememberedPort()
	}
	for attempt := 1; ; attempt++ {
		if port == 0 {
			p, err := freePort()
			if err != nil {
				return fmt.Errorf("starting postgres: %w", err)
			}
			port = p
		}
		logStart := c.logSize()
		err := c.pgCtlStart(ctx, port)
		if err == nil {
			break
		}
		serverLog := c.logTail(logStart)
		if wantPort == 0 && attempt < 3 && strings.Contains(serverLog, "could not bind") {
			c.log.Warn("port taken, retrying with another", "port", port)
			port = 0
			continue
		}
		return fmt.Errorf("starting postgres: %w\nserver log %s:\n%s", err, filepath.Join(c.dir, logFile), serverLog)
	}
	c.port = port
	// Remembering the port is a convenience; failing to is not fatal.
	if err := os.WriteFile(filepath.Join(c.dir, portFile), []byte(strconv.Itoa(port)+"\n"), 0o600); err != nil {
		c.log.Warn("could not remember postgres port", "err", err)
	}
	return nil
}

func (c *Cluster) pgCtlStart(ctx context.Context, port int) error {
	// The default socket directory (/var/run/postgresql) may not be writable
	// by the cluster user, so sockets go into the data directory; if that
	// path is too long for a socket, unix sockets are off (TCP still works).
	sockDir := c.dir
	if len(sockDir) > maxSocketDir {
		sockDir = ""
	}
	// pg_ctl hands -o to /bin/sh, hence the quoting.
	serverOpts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", port, shellQuote(sockDir))
	if c.fast {
		serverOpts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	c.log.Info("starting postgres", "dir", c.dir, "port", port)
	cmd := c.command(ctx, filepath.Join(c.bin, "pg_ctl"),
		"-w", "-t", "60", "-D", c.dir, "-o", serverOpts, "-l", filepath.Join(c.dir, logFile), "start")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl start: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitReady connects until the server answers: pg_ctl -w only watches
// postmaster.pid, and a reused server may still be starting.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		err := ping(ctx, c.URL("postgres"))
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for postgres on port %d: %w", c.port, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func ping(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// URL returns a connection URL for database dbname as the superuser.
func (c *Cluster) URL(dbname string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", Superuser, c.port, url.PathEscape(dbname))
}

// Port returns the TCP port the server listens on.
func (c *Cluster) Port() int { return c.port }

// EnsureDatabase creates database name unless it exists.
func (c *Cluster) EnsureDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("ensuring database %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("ensuring database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	// duplicate_database: a concurrent caller created it after our check.
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") {
		return fmt.Errorf("ensuring database %s: %w", name, err)
	}
	return nil
}

// command prepares a child process running as the cluster's owner. It runs
// in the data directory because the caller's working directory may not be
// accessible to the postgres user, which makes initdb and pg_ctl complain.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.dir
	cmd.SysProcAttr = c.own.sysProcAttr()
	return cmd
}
