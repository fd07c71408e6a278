package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/db"
	"gantry/models/db/dbtest"
)

func TestMain(m *testing.M) {
	// The crash test runs this test binary as the portal: with GANTRY_TEST_MAIN set it
	// is `gantry` with the arguments in GANTRY_TEST_ARGS.
	if os.Getenv("GANTRY_TEST_MAIN") == "1" {
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv("GANTRY_TEST_ARGS")), &args); err != nil {
			panic(err)
		}
		if len(args) > 0 && args[0] == "dev" && fastBuild() {
			// Beyond the layout rule's sight (it reads the test's source, not what its
			// child does): the test that got here must leave test:fast.
			fmt.Fprintln(os.Stderr, "gantry dev builds and runs live OpenTofu, which test:fast leaves out: "+
				"begin the file of the test that starts it with //go:build !fast (see layout_test.go)")
			os.Exit(2)
		}
		os.Exit(run(args, os.Stdout, os.Stderr))
	}
	os.Exit(dbtest.Main(m))
}

// fastBuild reports whether this test binary was built with -tags fast (test:fast).
func fastBuild() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), "fast") {
			return true
		}
	}
	return false
}

func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"--help"}, &out, &errOut))
	for _, cmd := range []string{"serve", "dev", "migrate", "org"} {
		require.Contains(t, out.String(), "  "+cmd+" ")
	}
	out.Reset()
	require.Equal(t, 0, run([]string{"help", "serve"}, &out, &errOut))
	for _, flag := range []string{"-database-url", "GANTRY_DATABASE_URL", "-oidc-issuer", "-oidc-client-secret", "-session-idle"} {
		require.Contains(t, out.String(), flag)
	}
	require.Equal(t, 2, run([]string{"frobnicate"}, &out, &errOut))
	require.Contains(t, errOut.String(), `unknown command "frobnicate"`)
}

func TestServeNamesMissingSettings(t *testing.T) {
	t.Setenv("GANTRY_DATABASE_URL", "")
	var out, errOut bytes.Buffer
	require.Equal(t, 1, run([]string{"serve"}, &out, &errOut))
	require.Contains(t, errOut.String(), "--oidc-issuer")
	require.Contains(t, errOut.String(), "--database-url")
}

// TestServeNeverBuilds: a production host has no Go toolchain, so serve refuses, before
// touching anything, a binary that is missing and a live runner without its binaries,
// saying how to get them; it builds nothing.
func TestServeNeverBuilds(t *testing.T) {
	base := []string{"serve", "--database-url", "postgres://nobody@127.0.0.1:1/none", "--base-url", "http://x", "--oidc-issuer", "http://idp", "--oidc-client-id", "c"}
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tofu", filepath.Join(dir, "tofu")}, "--tofu " + filepath.Join(dir, "tofu") + ": stat"},
		{[]string{"--runner", "tofu/process"}, "--runner tofu/process: --tofu is not set"},
		{[]string{"--runner", "tofu/oci", "--tofu", os.Args[0], "--sandbox-provider", os.Args[0]}, "--runner tofu/oci: --fwd is not set"},
		{[]string{"--sandbox-provider", dir}, "is not an executable file"},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, 1, run(append(slices.Clone(base), tc.args...), &out, &errOut), tc.args)
		require.Contains(t, errOut.String(), tc.want)
		if !strings.Contains(tc.want, "executable") {
			require.Contains(t, errOut.String(), "gantry serve never builds")
			require.Contains(t, errOut.String(), "go tool task tofu:build build")
		}
		require.NotContains(t, errOut.String(), "connect", "refused before reaching the database")
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing was built")
}

func TestMigrateAndInvite(t *testing.T) {
	dsn := dbtest.NewURL(t)
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"migrate", "--database-url", dsn}, &out, &errOut), errOut.String())
	require.Equal(t, 0, run([]string{"org", "invite", "--database-url", dsn, "--org", "initech", "--name", "Initech",
		"--email", "Boss@Initech.example", "--role", "owner"}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "Invited boss@initech.example as owner of Initech")
	require.Equal(t, 1, run([]string{"org", "invite", "--database-url", dsn, "--org", "initech", "--email", "x@y.z", "--role", "king"}, &out, &errOut))
	require.Contains(t, errOut.String(), `unknown role "king"`)

	gdb, err := db.Open(context.Background(), dsn)
	require.NoError(t, err)
	var role string
	require.NoError(t, gdb.Raw(`SELECT i.role FROM invitations i JOIN organizations o ON o.id = i.organization_id
		WHERE o.slug = 'initech' AND i.email = 'boss@initech.example'`).Scan(&role).Error)
	require.Equal(t, "owner", role)
	sqlDB, _ := gdb.DB()
	sqlDB.Close()
}
