-- Why: Gantry is a workload identity issuer; its ES256 signing keys live here, private halves envelope-encrypted.

-- +goose Up
-- One row per signing key. The newest row with no retire_after signs new tokens; a
-- rotated key keeps its row (and its place in the published JWKS) until retire_after,
-- when every token it signed has expired. The private key is sealed like artifacts:
-- a per-row AES-256-GCM data key wrapped by the keyring's key-encryption key key_id.
CREATE TABLE workload_keys (
    kid          text PRIMARY KEY,
    public_jwk   jsonb NOT NULL,
    key_id       text NOT NULL,
    wrapped_key  bytea NOT NULL,
    nonce        bytea NOT NULL,
    ciphertext   bytea NOT NULL,
    created_at   timestamptz NOT NULL,
    retire_after timestamptz,
    -- A public JWK never carries a private member ("d" for EC keys).
    CHECK (NOT public_jwk ? 'd')
);
-- At most one key signs at a time: replicas racing to rotate cannot both win.
CREATE UNIQUE INDEX workload_keys_one_active_idx ON workload_keys ((true)) WHERE retire_after IS NULL;

-- +goose Down
SELECT 1;
