package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/artifact"
	"gantry/models/audit"
	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/identity"
	"gantry/models/keyring"
)

// TestKeysRotate: `gantry keys rotate` re-wraps artifacts, runs' sealed sensitive inputs
// and workload signing keys under the new key; afterwards the old key is no longer needed.
func TestKeysRotate(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.NewURL(t)
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"migrate", "--database-url", dsn}, &out, &errOut), errOut.String())
	gdb, err := db.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() {
		if s, err := gdb.DB(); err == nil {
			s.Close()
		}
	})
	require.NoError(t, gdb.Exec(`INSERT INTO organizations (id, slug, name) VALUES ('org-1', 'one', 'One');
		INSERT INTO environments (id, organization_id, name, tier, requires_approval) VALUES ('env-1', 'org-1', 'dev', 'development', false);
		INSERT INTO workspaces (id, organization_id, environment_id, name) VALUES ('ws-1', 'org-1', 'env-1', 'w')`).Error)

	oldSpec, newSpec := keyring.NewKeySpec("k1"), keyring.NewKeySpec("k2")
	old, err := keyring.Parse(oldSpec)
	require.NoError(t, err)
	art, err := artifact.NewStore(gdb, old).Put(ctx, "org-1", "ws-1", artifact.State, []byte(`{"serial":1}`))
	require.NoError(t, err)
	_, _, err = identity.NewIssuer(gdb, old, "https://gantry.test/workload", identity.Options{}).Mint(ctx,
		identity.Claims{OrganizationID: "org-1", EnvironmentID: "env-1", WorkspaceID: "ws-1", RunID: "run-1", Phase: identity.PhasePlan})
	require.NoError(t, err)
	signer, err := audit.NewKeys(gdb, old).Signer(ctx, "org-1")
	require.NoError(t, err)
	// A run's sealed sensitive inputs (bound to its organization and id, as the migration says).
	const varsAAD = "run_variables:org-1:run-s"
	vars, err := old.Seal([]byte(`{"note":"n"}`), []byte(varsAAD))
	require.NoError(t, err)
	require.NoError(t, gdb.Exec(`INSERT INTO runs (id, organization_id, workspace_id, environment_id, number, kind, state, template_name,
		template_version, module_digest, requested_by, requested_by_name, runner, simulated, config_artifact_id, config_digest,
		variables_key_id, variables_wrapped_key, variables_nonce, variables_ciphertext)
		VALUES ('run-s', 'org-1', 'ws-1', 'env-1', 1, 'apply', 'SUCCEEDED', 't', '1.0.0', 'd', 'usr-1', 'U', 'mock', true, ?, 'd', ?, ?, ?, ?)`,
		art.ID, vars.KeyID, vars.WrappedKey, vars.Nonce, vars.Ciphertext).Error)

	out.Reset()
	require.Equal(t, 0, run([]string{"keys", "rotate", "--database-url", dsn, "--keys", newSpec + "," + oldSpec, "--new-signing-keys"}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "re-wrapped 1 artifacts, 0 live log chunks, 1 runs' sensitive inputs, 1 workload keys, 0 environment credentials and 1 audit signing keys under key k2")
	require.Contains(t, out.String(), "replaced the audit signing key of 1 organizations")

	var stale int64
	require.NoError(t, gdb.Raw(`SELECT (SELECT count(*) FROM artifacts WHERE key_id <> 'k2') + (SELECT count(*) FROM workload_keys WHERE key_id <> 'k2')
		+ (SELECT count(*) FROM audit_signing_keys WHERE key_id <> 'k2') + (SELECT count(*) FROM runs WHERE variables_key_id <> 'k2')`).Scan(&stale).Error)
	require.Zero(t, stale)
	onlyNew, err := keyring.Parse(newSpec)
	require.NoError(t, err)
	var rewrapped keyring.Sealed
	require.NoError(t, gdb.Raw(`SELECT variables_key_id AS key_id, variables_wrapped_key AS wrapped_key, variables_nonce AS nonce,
		variables_ciphertext AS ciphertext FROM runs WHERE id = 'run-s'`).Scan(&rewrapped).Error)
	plain, err := onlyNew.Open(rewrapped, []byte(varsAAD))
	require.NoError(t, err, "the run's sealed inputs open with the new key alone")
	require.Equal(t, `{"note":"n"}`, string(plain))
	data, _, err := artifact.NewStore(gdb, onlyNew).Get(ctx, "org-1", art.ID)
	require.NoError(t, err)
	require.Equal(t, `{"serial":1}`, string(data))
	_, _, err = identity.NewIssuer(gdb, onlyNew, "https://gantry.test/workload", identity.Options{}).Mint(ctx,
		identity.Claims{OrganizationID: "org-1", EnvironmentID: "env-1", WorkspaceID: "ws-1", RunID: "run-2", Phase: identity.PhaseApply,
			PlanDigest: "sha256:" + strings.Repeat("0", 64), Lease: 1})
	require.NoError(t, err, "the signing key opens with the new key alone")
	current, err := audit.NewKeys(gdb, onlyNew).Signer(ctx, "org-1")
	require.NoError(t, err, "the new audit signing key opens with the new key alone")
	require.NotEqual(t, signer.KeyID(), current.KeyID(), "replaced")
	out.Reset()
	require.Equal(t, 0, run([]string{"keys", "list", "--database-url", dsn, "--org", "one"}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), signer.Fingerprint())
	require.Contains(t, out.String(), current.Fingerprint())
	require.Regexp(t, signer.KeyID()+`\s+\S+\s+\S+ \S+\s+retired `, out.String(), "the old key stays listed, retired")
	require.Equal(t, 1, run([]string{"keys", "list", "--database-url", dsn, "--org", "nobody"}, &out, &errOut))

	require.Equal(t, 1, run([]string{"keys", "rotate", "--database-url", dsn, "--keys", "k9:" + strings.Repeat("A", 43) + "="}, &out, &errOut))
}
