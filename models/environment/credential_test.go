package environment_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db/dbtest"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/keyring"
	"gantry/models/org"
)

type credFixture struct {
	db         *gorm.DB
	svc        *environment.Service
	creds      *environment.Credentials
	keys       *keyring.Keyring
	spec       string // the keyring's specification
	asA, asB   context.Context
	orgA, orgB string
}

func credSetup(t *testing.T) credFixture {
	t.Helper()
	gdb := dbtest.New(t)
	log := audit.New(gdb)
	orgs := org.NewService(gdb, log)
	ctx := context.Background()
	a, err := orgs.EnsureOrganization(ctx, "a", "A")
	require.NoError(t, err)
	b, err := orgs.EnsureOrganization(ctx, "b", "B")
	require.NoError(t, err)
	spec := keyring.NewKeySpec("k1")
	keys, err := keyring.Parse(spec)
	require.NoError(t, err)
	return credFixture{
		db: gdb, svc: environment.NewService(gdb, log, nil), creds: environment.NewCredentials(gdb, log, keys), keys: keys, spec: spec,
		asA:  authz.WithSubject(ctx, authz.Subject{UserID: "usr-a", Name: "A admin", OrganizationID: a.ID, Role: authz.RoleAdmin}),
		asB:  authz.WithSubject(ctx, authz.Subject{UserID: "usr-b", Name: "B admin", OrganizationID: b.ID, Role: authz.RoleAdmin}),
		orgA: a.ID, orgB: b.ID,
	}
}

// auditedCredentialEvents returns the actions and data of the credential events of env.
func auditedCredentialEvents(t *testing.T, gdb *gorm.DB, envID string) (actions []string, data string) {
	t.Helper()
	var events []audit.Event
	require.NoError(t, gdb.Where("target_id = ? AND action LIKE 'environment.static_credential_%'", envID).Order("seq").Find(&events).Error)
	for _, e := range events {
		actions = append(actions, e.Action)
		data += string(e.Data)
	}
	return actions, data
}

// TestStaticCredentialLifecycle: set, read back only by the runner's call, replaced, cleared;
// sealed at rest and audited without the secret.
func TestStaticCredentialLifecycle(t *testing.T) {
	t.Parallel()
	f := credSetup(t)
	env, err := f.svc.Create(f.asA, environment.Input{Name: "staging", Tier: "staging"})
	require.NoError(t, err)
	other, err := f.svc.Create(f.asA, environment.Input{Name: "dev", Tier: "development"})
	require.NoError(t, err)

	_, ok, err := f.creds.StaticCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.False(t, ok, "a new environment uses workload identity")
	st, err := f.creds.StaticCredentialStatus(f.asA, env.ID)
	require.NoError(t, err)
	require.False(t, st.Any())

	const secret = "sbxk-CANARY-first-0123456789abcdef"
	// A write credential needs a read credential: refused alone, nothing stored.
	var v *errs.Validation
	require.ErrorAs(t, f.creds.SetStaticCredential(f.asA, env.ID, secret), &v)
	require.Contains(t, v.Fields, "cloud_credential")
	require.NotContains(t, v.Error(), "CANARY")
	st, err = f.creds.StaticCredentialStatus(f.asA, env.ID)
	require.NoError(t, err)
	require.False(t, st.Any(), "nothing was stored")
	require.NoError(t, f.creds.SetStaticReadCredential(f.asA, env.ID, "sbxk-CANARY-read"))
	require.NoError(t, f.creds.SetStaticCredential(f.asA, env.ID, secret))
	got, ok, err := f.creds.StaticCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, secret, got)
	st, err = f.creds.StaticCredentialStatus(f.asA, env.ID)
	require.NoError(t, err)
	require.NotNil(t, st.WriteSetAt)
	require.False(t, st.WriteSetAt.IsZero())
	require.NotNil(t, st.ReadSetAt)
	read, ok, err := f.creds.StaticReadCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "sbxk-CANARY-read", read, "the read credential is its own")
	// The read credential cannot go while the write credential stays.
	require.ErrorAs(t, f.creds.ClearStaticReadCredential(f.asA, env.ID), &v)
	require.Contains(t, v.Fields, "cloud_read_credential")
	_, ok, err = f.creds.StaticReadCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok, "the read credential stays")
	set, err := f.creds.StaticCredentialsOf(f.asA)
	require.NoError(t, err)
	require.Contains(t, set, env.ID)
	require.NotContains(t, set, other.ID)

	// Sealed at rest: no column of the row holds the secret or a recognisable part of it.
	var row string
	require.NoError(t, f.db.Raw("SELECT environments::text FROM environments WHERE id = ?", env.ID).Scan(&row).Error)
	require.NotContains(t, row, "CANARY")
	require.NotContains(t, row, hex.EncodeToString([]byte("CANARY")), "bytea columns print as hex")

	// Editing the environment keeps the credential.
	_, err = f.svc.Update(f.asA, env.ID, environment.Input{Name: "staging-eu", Tier: "staging", Executor: "mock"})
	require.NoError(t, err)
	got, ok, err = f.creds.StaticCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, secret, got)

	// Replace, then clear; clearing again changes nothing.
	require.NoError(t, f.creds.SetStaticCredential(f.asA, env.ID, "sbxk-CANARY-second"))
	got, _, err = f.creds.StaticCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.Equal(t, "sbxk-CANARY-second", got)
	require.NoError(t, f.creds.ClearStaticCredential(f.asA, env.ID))
	_, ok, err = f.creds.StaticCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, f.creds.ClearStaticCredential(f.asA, env.ID))

	actions, data := auditedCredentialEvents(t, f.db, env.ID)
	require.Equal(t, []string{"environment.static_credential_set", "environment.static_credential_set", "environment.static_credential_cleared"}, actions)
	require.NotContains(t, data, "CANARY")
	require.Contains(t, data, `"replaced": true`)
	n, err := audit.New(f.db).Verify(context.Background(), f.orgA)
	require.NoError(t, err)
	require.Positive(t, n)
}

// TestStaticCredentialScopeAndPermissions: another organization sees nothing, only admins
// manage credentials, and the ciphertext is bound to its environment.
func TestStaticCredentialScopeAndPermissions(t *testing.T) {
	t.Parallel()
	f := credSetup(t)
	env, err := f.svc.Create(f.asA, environment.Input{Name: "prod", Tier: "production"})
	require.NoError(t, err)
	other, err := f.svc.Create(f.asA, environment.Input{Name: "dev", Tier: "development"})
	require.NoError(t, err)
	require.NoError(t, f.creds.SetStaticReadCredential(f.asA, env.ID, "sbxk-a-read"))
	require.NoError(t, f.creds.SetStaticCredential(f.asA, env.ID, "sbxk-a-secret"))

	require.ErrorIs(t, f.creds.SetStaticCredential(f.asB, env.ID, "sbxk-b"), errs.ErrNotFound)
	require.ErrorIs(t, f.creds.ClearStaticCredential(f.asB, env.ID), errs.ErrNotFound)
	_, err = f.creds.StaticCredentialStatus(f.asB, env.ID)
	require.ErrorIs(t, err, errs.ErrNotFound)
	_, _, err = f.creds.StaticCredential(context.Background(), f.orgB, env.ID)
	require.ErrorIs(t, err, errs.ErrNotFound)
	set, err := f.creds.StaticCredentialsOf(f.asB)
	require.NoError(t, err)
	require.Empty(t, set)

	subject, _ := authz.SubjectFrom(f.asA)
	for _, role := range []authz.Role{authz.RoleViewer, authz.RoleOperator, authz.RoleAuditor} {
		subject.Role = role
		ctx := authz.WithSubject(context.Background(), subject)
		require.ErrorIs(t, f.creds.SetStaticCredential(ctx, env.ID, "sbxk-x"), errs.ErrForbidden, role)
		require.ErrorIs(t, f.creds.ClearStaticCredential(ctx, env.ID), errs.ErrForbidden, role)
		_, err := f.creds.StaticCredentialStatus(ctx, env.ID)
		require.ErrorIs(t, err, errs.ErrForbidden, role)
		require.ErrorIs(t, f.creds.SetStaticReadCredential(ctx, env.ID, "sbxk-x"), errs.ErrForbidden, role)
		require.ErrorIs(t, f.creds.ClearStaticReadCredential(ctx, env.ID), errs.ErrForbidden, role)
		require.ErrorIs(t, f.creds.Check(ctx, env.ID, environment.CredentialChanges{Read: environment.CredentialChange{Secret: "sbxk-x"}}), errs.ErrForbidden, role)
	}
	require.ErrorIs(t, f.creds.SetStaticCredential(context.Background(), env.ID, "sbxk-x"), errs.ErrUnauthenticated)

	// A sealed credential copied onto another environment's row does not open there.
	require.NoError(t, f.db.Exec(`UPDATE environments o SET cred_key_id = e.cred_key_id, cred_wrapped_key = e.cred_wrapped_key,
		cred_nonce = e.cred_nonce, cred_ciphertext = e.cred_ciphertext, cred_set_at = e.cred_set_at
		FROM environments e WHERE e.id = ? AND o.id = ?`, env.ID, other.ID).Error)
	_, _, err = f.creds.StaticCredential(context.Background(), f.orgA, other.ID)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "sbxk-a-secret")

	// Half a credential is refused by the schema.
	require.Error(t, f.db.Exec("UPDATE environments SET cred_ciphertext = NULL WHERE id = ?", env.ID).Error)
}

func TestStaticCredentialValidation(t *testing.T) {
	t.Parallel()
	f := credSetup(t)
	env, err := f.svc.Create(f.asA, environment.Input{Name: "prod", Tier: "production"})
	require.NoError(t, err)
	for name, secret := range map[string]string{
		"empty":    "",
		"space":    "sbxk-has space",
		"newline":  "sbxk-line\nbreak",
		"unicode":  "sbxk-ünïcode",
		"too long": "sbxk-" + strings.Repeat("x", environment.MaxCredentialLength),
	} {
		err := f.creds.SetStaticCredential(f.asA, env.ID, secret)
		v, ok := errs.AsValidation(err)
		require.True(t, ok, "%s: %v", name, err)
		require.Contains(t, v.Fields, "cloud_credential", name)
		if secret != "" {
			require.NotContains(t, err.Error()+v.Fields["cloud_credential"], secret, name)
		}
	}
	_, ok, err := f.creds.StaticCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.False(t, ok, "nothing was stored")
}

// TestRewrapCredentials: key rotation re-wraps credentials so the old key can go.
func TestRewrapCredentials(t *testing.T) {
	t.Parallel()
	f := credSetup(t)
	env, err := f.svc.Create(f.asA, environment.Input{Name: "prod", Tier: "production"})
	require.NoError(t, err)
	require.NoError(t, f.creds.SetStaticReadCredential(f.asA, env.ID, "sbxk-rotate-me-too"))
	require.NoError(t, f.creds.SetStaticCredential(f.asA, env.ID, "sbxk-rotate-me"))

	// f.keys holds k1; a keyring with a new first key and the old one rotates.
	newSpec := keyring.NewKeySpec("k2")
	both, err := keyring.Parse(newSpec + "," + f.spec)
	require.NoError(t, err)
	n, err := environment.RewrapCredentials(context.Background(), f.db, both)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the write and the read credential")
	n, err = environment.RewrapCredentials(context.Background(), f.db, both)
	require.NoError(t, err)
	require.Zero(t, n)

	onlyNew, err := keyring.Parse(newSpec)
	require.NoError(t, err)
	got, ok, err := environment.NewCredentials(f.db, audit.New(f.db), onlyNew).StaticCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "sbxk-rotate-me", got)
}
