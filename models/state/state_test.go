package state_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/artifact"
	"gantry/models/db/dbtest"
	"gantry/models/errs"
	"gantry/models/keyring"
	"gantry/models/state"
	"gantry/models/state/statetest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// TestStateCredentials: a credential authenticates with its own password only, stores
// nothing but the password's hash, and stops working once expired or revoked.
func TestStateCredentials(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	ctx := context.Background()

	user, pass, err := f.Service.IssueCredentials(ctx, f.OrgID, f.WorkspaceID, f.RunID, state.PhaseApply, time.Hour)
	require.NoError(t, err)
	require.Len(t, pass, 43, "32 random bytes, base64url without padding")

	cred, err := f.Service.Authenticate(ctx, user, pass)
	require.NoError(t, err)
	require.Equal(t, state.Credential{ID: user, OrganizationID: f.OrgID, WorkspaceID: f.WorkspaceID, RunID: f.RunID,
		Phase: state.PhaseApply, ExpiresAt: cred.ExpiresAt}, cred)
	require.WithinDuration(t, time.Now().Add(time.Hour), cred.ExpiresAt, time.Minute)

	var stored struct{ SecretHash []byte }
	require.NoError(t, f.DB.Raw("SELECT secret_hash FROM state_credentials WHERE id = ?", user).Scan(&stored).Error)
	require.Len(t, stored.SecretHash, 32)
	require.False(t, bytes.Contains(stored.SecretHash, []byte(pass)))

	_, err = f.Service.Authenticate(ctx, user, pass+"x")
	require.ErrorIs(t, err, state.ErrBadCredentials)
	require.ErrorIs(t, err, errs.ErrUnauthenticated)
	_, err = f.Service.Authenticate(ctx, "stc-nosuchcredential", pass)
	require.ErrorIs(t, err, state.ErrBadCredentials)
	_, err = f.Service.Authenticate(ctx, user, "")
	require.ErrorIs(t, err, state.ErrBadCredentials)
	// A user PostgreSQL cannot compare (NUL, invalid UTF-8) is a bad request, not a 500.
	for _, bad := range []string{"stc-\x00", "stc-\xff"} {
		_, err = f.Service.Authenticate(ctx, bad, pass)
		require.ErrorIs(t, err, errs.ErrBadRequest, "%q", bad)
	}

	// Expired, by the database's clock.
	expUser, expPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhasePlan)
	require.NoError(t, f.DB.Exec("UPDATE state_credentials SET expires_at = now() - interval '1 second' WHERE id = ?", expUser).Error)
	_, err = f.Service.Authenticate(ctx, expUser, expPass)
	require.ErrorIs(t, err, state.ErrBadCredentials)
	require.ErrorContains(t, err, "expired")

	// Revoke ends every live credential of the run, and only that run's.
	otherUser, otherPass := f.Issue(t, f.SiblingID, f.SiblingRun, state.PhaseApply)
	n, err := f.Service.Revoke(ctx, f.RunID)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = f.Service.Authenticate(ctx, user, pass)
	require.ErrorIs(t, err, state.ErrBadCredentials)
	require.ErrorContains(t, err, "revoked")
	_, err = f.Service.Authenticate(ctx, otherUser, otherPass)
	require.NoError(t, err)
	n, err = f.Service.Revoke(ctx, f.RunID)
	require.NoError(t, err)
	require.Zero(t, n, "revoking again is a no-op")

	// A run of another workspace, an unknown phase and a non-positive ttl are refused.
	_, _, err = f.Service.IssueCredentials(ctx, f.OrgID, f.WorkspaceID, f.SiblingRun, state.PhaseApply, time.Hour)
	require.ErrorIs(t, err, errs.ErrNotFound)
	_, _, err = f.Service.IssueCredentials(ctx, f.ForeignOrg, f.WorkspaceID, f.RunID, state.PhaseApply, time.Hour)
	require.ErrorIs(t, err, errs.ErrNotFound)
	_, _, err = f.Service.IssueCredentials(ctx, f.OrgID, f.WorkspaceID, f.RunID, "destroy", time.Hour)
	require.Error(t, err)
	_, _, err = f.Service.IssueCredentials(ctx, f.OrgID, f.WorkspaceID, f.RunID, state.PhaseApply, 0)
	require.Error(t, err)

	var actions []string
	require.NoError(t, f.DB.Raw("SELECT action FROM audit_events WHERE organization_id = ? ORDER BY seq", f.OrgID).Scan(&actions).Error)
	require.Equal(t, []string{"state.credentials_issued", "state.credentials_issued", "state.credentials_issued", "state.credentials_revoked"}, actions)
	_, err = f.Audit.Verify(ctx, f.OrgID)
	require.NoError(t, err)
}

// TestStateWriteRules exercises the write rules at the service: lineage, serial,
// idempotent repeats, read-only phases and a lock nobody holds.
func TestStateWriteRules(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	ctx := context.Background()
	user, pass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	cred, err := f.Service.Authenticate(ctx, user, pass)
	require.NoError(t, err)
	const lineage = "0d7a7d6c-56c4-4c54-9d0e-6a4a8f0e0b11"

	_, err = f.Service.Read(ctx, cred, f.WorkspaceID)
	require.ErrorIs(t, err, state.ErrNoState)

	require.NoError(t, f.Service.Write(ctx, cred, f.WorkspaceID, "", statetest.StateJSON(1, lineage, "one")))
	require.NoError(t, f.Service.Write(ctx, cred, f.WorkspaceID, "", statetest.StateJSON(1, lineage, "one")), "a repeated write is idempotent")
	require.ErrorIs(t, f.Service.Write(ctx, cred, f.WorkspaceID, "", statetest.StateJSON(1, lineage, "other")), state.ErrSerialRegressed)
	require.NoError(t, f.Service.Write(ctx, cred, f.WorkspaceID, "", statetest.StateJSON(3, lineage, "three")))
	require.ErrorIs(t, f.Service.Write(ctx, cred, f.WorkspaceID, "", statetest.StateJSON(2, lineage, "two")), state.ErrSerialRegressed)
	require.ErrorIs(t, f.Service.Write(ctx, cred, f.WorkspaceID, "", statetest.StateJSON(4, "another-lineage", "four")), state.ErrLineageChanged)
	require.ErrorIs(t, f.Service.Write(ctx, cred, f.WorkspaceID, "lock-gone", statetest.StateJSON(4, lineage, "four")), state.ErrLockNotHeld)
	for _, bad := range []string{`not json`, `{"version":4,"lineage":"x"}`, `{"version":4,"serial":0,"lineage":"x"}`, `{"version":4,"serial":5}`, `{"serial":5,"lineage":"x"}`} {
		require.ErrorIs(t, f.Service.Write(ctx, cred, f.WorkspaceID, "", []byte(bad)), state.ErrMalformed, bad)
	}

	got, err := f.Service.Read(ctx, cred, f.WorkspaceID)
	require.NoError(t, err)
	require.Equal(t, statetest.StateJSON(3, lineage, "three"), got)
	var serials []int
	require.NoError(t, f.DB.Raw("SELECT serial FROM state_versions WHERE workspace_id = ? ORDER BY serial", f.WorkspaceID).Scan(&serials).Error)
	require.Equal(t, []int{1, 3}, serials)
	// Each stored version, and only those, was told to the run lifecycle inside the
	// write's transaction (so waiting runs go STALE with it); a repeat is not a write.
	reported := f.Written.All()
	require.Len(t, reported, 2)
	for i, serial := range []int{1, 3} {
		require.Equal(t, serial, reported[i].Written.Serial)
		require.Equal(t, lineage, reported[i].Written.Lineage)
		require.Equal(t, f.RunID, reported[i].ByRunID)
		require.Equal(t, f.WorkspaceID, reported[i].WorkspaceID)
		require.True(t, reported[i].InTx, "reported inside the write's transaction")
		require.NotEmpty(t, reported[i].Written.Digest)
	}

	planUser, planPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhasePlan)
	plan, err := f.Service.Authenticate(ctx, planUser, planPass)
	require.NoError(t, err)
	require.ErrorIs(t, f.Service.Write(ctx, plan, f.WorkspaceID, "", statetest.StateJSON(4, lineage, "four")), state.ErrReadOnly)
	require.ErrorIs(t, f.Service.Write(ctx, cred, f.SiblingID, "", statetest.StateJSON(1, lineage, "x")), state.ErrOtherWorkspace)
	require.ErrorIs(t, f.Service.Write(ctx, cred, f.ForeignID, "", statetest.StateJSON(1, lineage, "x")), errs.ErrNotFound)
}

// TestStateRotateKeys: rotation re-wraps every artifact's data key under the new key
// and leaves the ciphertext alone; afterwards the old key is not needed.
func TestStateRotateKeys(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	ctx := context.Background()
	user, pass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	cred, err := f.Service.Authenticate(ctx, user, pass)
	require.NoError(t, err)
	require.NoError(t, f.Service.Write(ctx, cred, f.WorkspaceID, "", statetest.StateJSON(1, "lin", "rotate-me")))
	for i := range 5 {
		_, err := f.Artifacts.Put(ctx, f.ForeignOrg, f.ForeignID, artifact.PlanLog, []byte{byte(i)})
		require.NoError(t, err)
	}

	type row struct {
		ID, OrganizationID, KeyID string
		WrappedKey, Ciphertext    []byte
	}
	read := func() map[string]row {
		var rows []row
		require.NoError(t, f.DB.Raw("SELECT id, organization_id, key_id, wrapped_key, ciphertext FROM artifacts").Scan(&rows).Error)
		out := map[string]row{}
		for _, r := range rows {
			out[r.ID] = r
		}
		return out
	}
	before := read()
	require.Len(t, before, 3+5, "two config bundles, one state, five logs")
	for _, r := range before {
		require.Equal(t, "k1", r.KeyID)
	}

	k2 := keyring.NewKeySpec("k2")
	both, err := keyring.Parse(k2 + "," + f.KeySpec)
	require.NoError(t, err)
	n, err := state.RotateKeys(ctx, f.DB, both)
	require.NoError(t, err)
	require.Equal(t, len(before), n)

	after := read()
	onlyK2, err := keyring.Parse(k2)
	require.NoError(t, err)
	for id, r := range after {
		require.Equal(t, "k2", r.KeyID, id)
		require.Equal(t, before[id].Ciphertext, r.Ciphertext, "rotation never touches the ciphertext")
		require.NotEqual(t, before[id].WrappedKey, r.WrappedKey)
		_, _, err := artifact.NewStore(f.DB, onlyK2).Get(ctx, r.OrganizationID, id)
		require.NoError(t, err, "opens with the new key alone")
	}
	data, err := f.Service.Read(ctx, cred, f.WorkspaceID)
	require.Error(t, err, "the fixture's service still holds only k1")
	require.Nil(t, data)
	rotated := state.NewService(state.NewStore(f.DB, artifact.NewStore(f.DB, onlyK2), f.Audit), f.Written)
	data, err = rotated.Read(ctx, cred, f.WorkspaceID)
	require.NoError(t, err)
	require.Contains(t, string(data), "rotate-me")

	n, err = state.RotateKeys(ctx, f.DB, both)
	require.NoError(t, err)
	require.Zero(t, n, "a second rotation has nothing to do")

	// A key missing from the keyring stops rotation with ErrUnknownKey.
	k3, err := keyring.Parse(keyring.NewKeySpec("k3"))
	require.NoError(t, err)
	_, err = state.RotateKeys(ctx, f.DB, k3)
	require.ErrorIs(t, err, keyring.ErrUnknownKey)

	var audited int
	require.NoError(t, f.DB.Raw("SELECT count(*) FROM audit_events WHERE action = 'keys.rewrapped'").Scan(&audited).Error)
	require.Equal(t, 2, audited, "one event per organization")
}

// TestRevokeCredentialLeavesTheNextPhaseAlone: a finished phase's credential ends; the
// credential the run's next phase already holds keeps working.
func TestRevokeCredentialLeavesTheNextPhaseAlone(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	ctx := context.Background()
	applyUser, applyPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	verifyUser, verifyPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseVerify)
	require.NoError(t, f.Service.RevokeCredential(ctx, applyUser))
	_, err := f.Service.Authenticate(ctx, applyUser, applyPass)
	require.Error(t, err)
	_, err = f.Service.Authenticate(ctx, verifyUser, verifyPass)
	require.NoError(t, err)
}

// TestHoldsLock: the orchestrator can tell whether a run's job holds the lock.
func TestHoldsLock(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	ctx := context.Background()
	held, err := f.Service.HoldsLock(ctx, f.WorkspaceID, f.RunID)
	require.NoError(t, err)
	require.False(t, held)
	user, pass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseVerify)
	cred, err := f.Service.Authenticate(ctx, user, pass)
	require.NoError(t, err)
	err = f.Service.Lock(ctx, cred, f.WorkspaceID, []byte(`{"ID":"lock-1","Operation":"OperationTypePlan"}`))
	require.NoError(t, err)
	held, err = f.Service.HoldsLock(ctx, f.WorkspaceID, f.RunID)
	require.NoError(t, err)
	require.True(t, held)
	held, err = f.Service.HoldsLock(ctx, f.WorkspaceID, "run-other")
	require.NoError(t, err)
	require.False(t, held)
}
