package environment_test

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/audit"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/keyring"
)

// TestStaticReadCredential: an environment holds a write and a read credential side by
// side, each opened only by its own call, sealed at rest, set and cleared on its own and
// audited with its own actions.
func TestStaticReadCredential(t *testing.T) {
	t.Parallel()
	f := credSetup(t)
	env, err := f.svc.Create(f.asA, environment.Input{Name: "staging", Tier: "staging"})
	require.NoError(t, err)
	const write, read = "sbxk-WRITECANARY-0123456789", "sbxk-READCANARY-0123456789"

	require.NoError(t, f.creds.SetStaticReadCredential(f.asA, env.ID, read))
	_, ok, err := f.creds.StaticCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.False(t, ok, "a read credential is no write credential: applies use workload identity")
	st, err := f.creds.StaticCredentialStatus(f.asA, env.ID)
	require.NoError(t, err)
	require.True(t, st.Any())
	require.Nil(t, st.WriteSetAt)
	require.NotNil(t, st.ReadSetAt)

	require.NoError(t, f.creds.SetStaticCredential(f.asA, env.ID, write))
	got, ok, err := f.creds.StaticReadCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, read, got)
	got, ok, err = f.creds.StaticCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, write, got)
	set, err := f.creds.StaticCredentialsOf(f.asA)
	require.NoError(t, err)
	require.NotNil(t, set[env.ID].WriteSetAt)
	require.NotNil(t, set[env.ID].ReadSetAt)

	var row string
	require.NoError(t, f.db.Raw("SELECT environments::text FROM environments WHERE id = ?", env.ID).Scan(&row).Error)
	require.NotContains(t, row, "CANARY")
	require.NotContains(t, row, hex.EncodeToString([]byte("CANARY")), "bytea columns print as hex")

	// The read credential cannot go while the write credential stays (what the write key
	// makes, only a key can read); both can go in one edit, or the write one alone.
	v, ok := errs.AsValidation(f.creds.ClearStaticReadCredential(f.asA, env.ID))
	require.True(t, ok)
	require.Contains(t, v.Fields, "cloud_read_credential")
	_, ok, err = f.creds.StaticReadCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok, "the read credential stays")
	require.NoError(t, f.creds.ClearStaticCredential(f.asA, env.ID))
	_, ok, err = f.creds.StaticReadCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok, "clearing the write credential leaves the read one")
	require.NoError(t, f.creds.ClearStaticReadCredential(f.asA, env.ID))
	_, ok, err = f.creds.StaticReadCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, f.creds.ClearStaticReadCredential(f.asA, env.ID), "clearing nothing changes nothing")

	var events []audit.Event
	require.NoError(t, f.db.Where("target_id = ? AND action LIKE 'environment.static_%'", env.ID).Order("seq").Find(&events).Error)
	var actions []string
	for _, e := range events {
		actions = append(actions, e.Action)
		require.NotContains(t, string(e.Data), "CANARY")
	}
	require.Equal(t, []string{"environment.static_read_credential_set", "environment.static_credential_set",
		"environment.static_credential_cleared", "environment.static_read_credential_cleared"}, actions)
	for _, a := range actions {
		require.True(t, audit.KnownAction(a), a)
	}
}

// TestReadCredentialIsNeverTheWriteCredential: the write key cannot be stored as the read
// credential (nor the read key as the write one), whichever is set first, through the
// setters, Check and Apply alike; the refusal never quotes the key.
func TestReadCredentialIsNeverTheWriteCredential(t *testing.T) {
	t.Parallel()
	f := credSetup(t)
	env, err := f.svc.Create(f.asA, environment.Input{Name: "prod", Tier: "production"})
	require.NoError(t, err)
	const key = "sbxk-SAMEKEY-0123456789abcdef"
	refusedOn := func(field string, err error) {
		t.Helper()
		v, ok := errs.AsValidation(err)
		require.True(t, ok, "%v", err)
		require.Contains(t, v.Fields, field)
		require.Contains(t, v.Fields[field], "plans and verifications would hold the write key")
		require.NotContains(t, err.Error(), key)
	}
	refused := func(err error) { t.Helper(); refusedOn("cloud_read_credential", err) }

	// Both in one edit: refused before anything is stored.
	both := environment.CredentialChanges{Write: environment.CredentialChange{Secret: key}, Read: environment.CredentialChange{Secret: key}}
	refused(both.Validate())
	refused(f.creds.Check(f.asA, env.ID, both))
	refused(f.creds.Apply(f.asA, env.ID, both))
	st, err := f.creds.StaticCredentialStatus(f.asA, env.ID)
	require.NoError(t, err)
	require.False(t, st.Any(), "nothing was stored")

	// The write key stored (with another read key): the same key as the read credential is
	// refused.
	const otherRead = "sbxk-OTHER-READ-0123456789"
	require.NoError(t, f.creds.SetStaticReadCredential(f.asA, env.ID, otherRead))
	require.NoError(t, f.creds.SetStaticCredential(f.asA, env.ID, key))
	refused(f.creds.SetStaticReadCredential(f.asA, env.ID, key))
	readOnly := environment.CredentialChanges{Read: environment.CredentialChange{Secret: key}}
	refused(f.creds.Check(f.asA, env.ID, readOnly))
	refused(f.creds.Apply(f.asA, env.ID, readOnly))
	got, ok, err := f.creds.StaticReadCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, otherRead, got, "the read credential is unchanged")

	// The read key stored first: the same key as the write credential is refused.
	require.NoError(t, f.creds.Apply(f.asA, env.ID, environment.CredentialChanges{Write: environment.CredentialChange{Remove: true}, Read: environment.CredentialChange{Remove: true}}))
	require.NoError(t, f.creds.SetStaticReadCredential(f.asA, env.ID, key))
	refusedOn("cloud_credential", f.creds.SetStaticCredential(f.asA, env.ID, key))
	refusedOn("cloud_credential", f.creds.Check(f.asA, env.ID, environment.CredentialChanges{Write: environment.CredentialChange{Secret: key}}))
	refusedOn("cloud_credential", f.creds.Apply(f.asA, env.ID, environment.CredentialChanges{Write: environment.CredentialChange{Secret: key}}))

	// Replacing the read key with a new one and setting the old one as the write key in
	// one edit is judged against what stays: allowed, both stored, in one transaction.
	const newRead = "sbxk-NEW-READ-0123456789"
	swap := environment.CredentialChanges{Write: environment.CredentialChange{Secret: key}, Read: environment.CredentialChange{Secret: newRead}}
	require.NoError(t, f.creds.Check(f.asA, env.ID, swap))
	require.NoError(t, f.creds.Apply(f.asA, env.ID, swap))
	got, ok, err = f.creds.StaticCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, key, got)
	got, ok, err = f.creds.StaticReadCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, newRead, got)
	// Removing the read key while setting the write key leaves a write key alone: refused
	// on the read field, nothing changed.
	alone := environment.CredentialChanges{Write: environment.CredentialChange{Secret: "sbxk-YET-ANOTHER-write"}, Read: environment.CredentialChange{Remove: true}}
	refusedAlone := func(err error) {
		t.Helper()
		v, ok := errs.AsValidation(err)
		require.True(t, ok, "%v", err)
		require.Contains(t, v.Fields["cloud_read_credential"], "plans and verifications need this read credential")
	}
	refusedAlone(f.creds.Check(f.asA, env.ID, alone))
	refusedAlone(f.creds.Apply(f.asA, env.ID, alone))
	got, _, err = f.creds.StaticCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.Equal(t, key, got, "nothing changed")

	// Field messages name each field.
	v, ok := errs.AsValidation(environment.CredentialChanges{Read: environment.CredentialChange{Secret: "has space", Remove: true}}.Validate())
	require.True(t, ok)
	require.Contains(t, v.Fields, "cloud_read_credential")
	require.NotContains(t, v.Fields, "cloud_credential")
	v, ok = errs.AsValidation(f.creds.SetStaticReadCredential(f.asA, env.ID, "sbxk-has space"))
	require.True(t, ok)
	require.Contains(t, v.Fields, "cloud_read_credential")
}

// TestReadCredentialSealedApart: the read credential's ciphertext is bound to its kind (the
// write credential's columns copied onto it do not open), the schema refuses half of one,
// and key rotation re-wraps both.
func TestReadCredentialSealedApart(t *testing.T) {
	t.Parallel()
	f := credSetup(t)
	env, err := f.svc.Create(f.asA, environment.Input{Name: "prod", Tier: "production"})
	require.NoError(t, err)
	require.NoError(t, f.creds.SetStaticReadCredential(f.asA, env.ID, "sbxk-first-read-key"))
	require.NoError(t, f.creds.SetStaticCredential(f.asA, env.ID, "sbxk-the-write-key"))
	require.NoError(t, f.db.Exec(`UPDATE environments SET read_cred_key_id = cred_key_id, read_cred_wrapped_key = cred_wrapped_key,
		read_cred_nonce = cred_nonce, read_cred_ciphertext = cred_ciphertext, read_cred_set_at = cred_set_at WHERE id = ?`, env.ID).Error)
	_, _, err = f.creds.StaticReadCredential(context.Background(), f.orgA, env.ID)
	require.Error(t, err, "the write key copied into the read columns does not open as the read key")
	require.NotContains(t, err.Error(), "sbxk-the-write-key")
	require.Error(t, f.db.Exec("UPDATE environments SET read_cred_nonce = NULL WHERE id = ?", env.ID).Error)

	require.NoError(t, f.creds.SetStaticReadCredential(f.asA, env.ID, "sbxk-the-read-key"))
	newSpec := keyring.NewKeySpec("k2")
	both, err := keyring.Parse(newSpec + "," + f.spec)
	require.NoError(t, err)
	n, err := environment.RewrapCredentials(context.Background(), f.db, both)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the write and the read credential")
	onlyNew, err := keyring.Parse(newSpec)
	require.NoError(t, err)
	rotated := environment.NewCredentials(f.db, audit.New(f.db), onlyNew)
	got, ok, err := rotated.StaticReadCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "sbxk-the-read-key", got)
	got, ok, err = rotated.StaticCredential(context.Background(), f.orgA, env.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "sbxk-the-write-key", got)
}
