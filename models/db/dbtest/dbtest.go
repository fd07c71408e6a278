// Package dbtest gives each test its own fresh, fully migrated PostgreSQL
// database. Databases are cloned from a template that is migrated once per
// server and migration set, so a test pays for a CREATE DATABASE, not for
// running every migration.
//
// Use it from a package's TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }
//
// With TEST_DATABASE_URL set (a postgres:// URL whose user may CREATE
// DATABASE), tests use that server and templates stay there between runs,
// one per distinct migration set. Otherwise the first New starts a
// throwaway pgcluster for the test binary, and Main removes it at the end.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"gantry/migrations"
	"gantry/models/db"
	"gantry/models/db/pgcluster"
)

// templateLockKey is the pg_advisory_lock key serialising template builds
// across test binaries that share a server. Any constant works as long as
// nothing else on the server uses it.
const templateLockKey int64 = 0x67616e7472790001

// setupTimeout bounds starting a cluster and building the template.
const setupTimeout = 5 * time.Minute

// server is what every New needs; built once per test binary, on first use,
// so that packages whose selected tests never touch the database do not pay
// for starting PostgreSQL.
type server struct {
	base     *url.URL // server URL; the path is swapped per database
	admin    *sql.DB  // pool on the postgres database, for CREATE/DROP DATABASE
	template string
}

var (
	mainRunning bool // set by Main; New without it would leak a cluster

	setupOnce sync.Once
	srv       *server
	setupErr  error

	// Only set when we started our own cluster.
	cluster    *pgcluster.Cluster
	clusterDir string
)

// Main runs the tests and then releases what New set up: the admin pool and,
// if one was started, the throwaway cluster and its directory. Call it as
// os.Exit(dbtest.Main(m)) from TestMain.
func Main(m *testing.M) int {
	mainRunning = true
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// New returns a *gorm.DB on a brand-new database cloned from the migrated
// template. The pool is closed and the database dropped in t.Cleanup. Safe
// for concurrent use by parallel tests.
func New(t testing.TB) *gorm.DB {
	t.Helper()
	dsn := NewURL(t)
	gdb, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		t.Fatalf("dbtest: opening gorm: %v", err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		t.Fatalf("dbtest: opening gorm: %v", err)
	}
	// Cleanups run last-in first-out, so this closes the pool before the
	// DROP DATABASE that NewURL registered.
	t.Cleanup(func() { sqlDB.Close() })
	return gdb
}

// NewURL is New for tests that want a raw DSN (postgres:// URL) instead of
// a *gorm.DB. The database is dropped in t.Cleanup, forcibly disconnecting
// anything still connected.
func NewURL(t testing.TB) string {
	t.Helper()
	if !mainRunning {
		t.Fatal("dbtest: call os.Exit(dbtest.Main(m)) from TestMain before using dbtest.New")
	}
	s, err := getServer()
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	name, err := randomName()
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := createFromTemplate(ctx, s.admin, name, s.template); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: dropping database %s: %v", name, err)
		}
	})
	return withDB(s.base, name)
}

// createFromTemplate clones the template. CREATE DATABASE ... TEMPLATE fails
// while any session is connected to the template; ours never are, but a
// session that just closed may linger for a moment, so retry briefly.
func createFromTemplate(ctx context.Context, admin *sql.DB, name, template string) error {
	stmt := "CREATE DATABASE " + ident(name) + " TEMPLATE " + ident(template)
	for attempt := 1; ; attempt++ {
		_, err := admin.ExecContext(ctx, stmt)
		if err == nil {
			return nil
		}
		if attempt >= 10 || !isObjectInUse(err) {
			return fmt.Errorf("creating test database %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("creating test database %s: %w", name, err)
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
}

func getServer() (*server, error) {
	setupOnce.Do(func() { srv, setupErr = setup() })
	return srv, setupErr
}

func setup() (*server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	raw := os.Getenv("TEST_DATABASE_URL")
	if raw == "" {
		dir, err := pgcluster.MkdirTemp("gantry-dbtest-")
		if err != nil {
			return nil, fmt.Errorf("starting throwaway postgres: %w", err)
		}
		clusterDir = dir
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "data"), Fast: true})
		if err != nil {
			return nil, fmt.Errorf("starting throwaway postgres (or set TEST_DATABASE_URL): %w", err)
		}
		cluster = c
		raw = c.URL("postgres")
	}
	base, err := url.Parse(raw)
	if err != nil || (base.Scheme != "postgres" && base.Scheme != "postgresql") || base.Host == "" {
		return nil, errors.New("TEST_DATABASE_URL must be a postgres://user@host:port/db URL")
	}
	template, err := templateName()
	if err != nil {
		return nil, err
	}
	// Advisory locks are per database, so every binary must take the lock
	// in the same one: postgres, which every server has.
	if err := ensureTemplate(ctx, base, template); err != nil {
		return nil, fmt.Errorf("preparing template database %s: %w", template, err)
	}
	admin, err := sql.Open("pgx", withDB(base, "postgres"))
	if err != nil {
		return nil, fmt.Errorf("opening admin connection: %w", err)
	}
	return &server{base: base, admin: admin, template: template}, nil
}

// ensureTemplate makes sure the migrated template exists, building it if not.
// The lock lets parallel test binaries on one server build it once; the
// others wait and then find it.
func ensureTemplate(ctx context.Context, base *url.URL, template string) error {
	// A dedicated connection, not a pooled one: closing it ends the session,
	// which is what releases the session-level lock (no explicit unlock that
	// an error path could skip).
	conn, err := pgx.Connect(ctx, withDB(base, "postgres"))
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return fmt.Errorf("locking: %w", err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", template).Scan(&exists); err != nil {
		return fmt.Errorf("looking up template: %w", err)
	}
	if exists {
		return nil
	}
	// Build under another name and rename at the end, so that a binary
	// killed mid-migration never leaves a half-migrated template behind.
	building := template + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(building)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping leftover %s: %w", building, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(building)); err != nil {
		return fmt.Errorf("creating %s: %w", building, err)
	}
	if err := migrate(ctx, withDB(base, building)); err != nil {
		return err
	}
	// RENAME refuses while anyone is connected; migrate closed its pool, but
	// the server may take a moment to end those sessions.
	rename := "ALTER DATABASE " + ident(building) + " RENAME TO " + ident(template)
	for attempt := 1; ; attempt++ {
		_, err = conn.Exec(ctx, rename)
		if err == nil || attempt >= 20 || !isObjectInUse(err) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("renaming %s: %w", building, err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(template)+" IS_TEMPLATE true"); err != nil {
		return fmt.Errorf("marking template: %w", err)
	}
	return nil
}

func migrate(ctx context.Context, dsn string) error {
	sqlDB, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("opening template for migration: %w", err)
	}
	defer sqlDB.Close()
	if err := db.Migrate(ctx, sqlDB); err != nil {
		return fmt.Errorf("migrating template: %w", err)
	}
	return sqlDB.Close()
}

// templateName names the template after the migrations it was built from,
// so a new or changed migration yields a new template instead of a stale one.
func templateName() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		// Framing with name and length: a rename, or bytes moving from one
		// file to the next, changes the hash too.
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hashing migrations: %w", err)
	}
	return "gantry_tmpl_" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

func teardown() error {
	var errs []error
	if srv != nil {
		errs = append(errs, srv.admin.Close())
	}
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping throwaway postgres: %w", err))
		}
	}
	if clusterDir != "" {
		if err := os.RemoveAll(clusterDir); err != nil {
			errs = append(errs, fmt.Errorf("removing throwaway postgres: %w", err))
		}
	}
	return errors.Join(errs...)
}

func randomName() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("naming test database: %w", err)
	}
	return "test_" + hex.EncodeToString(b), nil
}

// withDB returns base pointing at database name instead.
func withDB(base *url.URL, name string) string {
	u := *base
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// isObjectInUse matches "database ... is being accessed by other users".
func isObjectInUse(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55006"
}
