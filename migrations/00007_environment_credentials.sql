-- Why: an environment may hold a static cloud credential (reported as a standing-credential finding), sealed with the keyring's envelope encryption.

-- +goose Up
-- The secret is sealed like artifacts: a per-environment AES-256-GCM data key wrapped by the
-- keyring's key-encryption key cred_key_id; the ciphertext is bound to the environment (AAD).
-- All five columns are set together or all are NULL (no credential: workload identity).
ALTER TABLE environments
    ADD COLUMN cred_key_id      text,
    ADD COLUMN cred_wrapped_key bytea,
    ADD COLUMN cred_nonce       bytea,
    ADD COLUMN cred_ciphertext  bytea,
    ADD COLUMN cred_set_at      timestamptz,
    ADD CONSTRAINT environments_cred_complete CHECK (
        (cred_key_id IS NULL AND cred_wrapped_key IS NULL AND cred_nonce IS NULL AND cred_ciphertext IS NULL AND cred_set_at IS NULL)
        OR (cred_key_id IS NOT NULL AND cred_wrapped_key IS NOT NULL AND cred_nonce IS NOT NULL AND cred_ciphertext IS NOT NULL AND cred_set_at IS NOT NULL));

-- +goose Down
SELECT 1;
