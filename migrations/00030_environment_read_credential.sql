-- Why: an environment may hold a static read credential for plans and verifications besides its write credential for applies, so a write key never reaches a read phase.

-- +goose Up
-- Sealed like the write credential (00007): a per-credential AES-256-GCM data key wrapped by
-- the keyring's key-encryption key read_cred_key_id; the ciphertext is bound to the
-- environment and to its role (AAD "environment-read-credential:<org>:<env>"), so the write
-- credential's columns copied here do not open. All five columns are set together or all are
-- NULL (no read credential: plans and verifications use workload identity tokens).
ALTER TABLE environments
    ADD COLUMN read_cred_key_id      text,
    ADD COLUMN read_cred_wrapped_key bytea,
    ADD COLUMN read_cred_nonce       bytea,
    ADD COLUMN read_cred_ciphertext  bytea,
    ADD COLUMN read_cred_set_at      timestamptz,
    ADD CONSTRAINT environments_read_cred_complete CHECK (
        (read_cred_key_id IS NULL AND read_cred_wrapped_key IS NULL AND read_cred_nonce IS NULL AND read_cred_ciphertext IS NULL AND read_cred_set_at IS NULL)
        OR (read_cred_key_id IS NOT NULL AND read_cred_wrapped_key IS NOT NULL AND read_cred_nonce IS NOT NULL AND read_cred_ciphertext IS NOT NULL AND read_cred_set_at IS NOT NULL));

-- +goose Down
SELECT 1;
