package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
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
		os.Exit(run(args, os.Stdout, os.Stderr))
	}
	os.Exit(dbtest.Main(m))
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
