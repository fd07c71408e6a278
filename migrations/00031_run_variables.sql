-- Why: a run's sensitive template inputs reach its runner only as TF_VAR_ environment variables, so their values are kept sealed with the run instead of written into its config bundle.

-- +goose Up
-- The values of the run's sensitive inputs (a JSON object, input name -> value), sealed like
-- an artifact: a per-run AES-256-GCM data key wrapped by the keyring's key variables_key_id;
-- the associated data names the organization and the run ("run_variables:<org>:<run>"), so
-- the columns copied to another row do not open. A run made from another run's config bundle
-- (plan again, rollback, drift check, codification, correction) gets its own copy, sealed for
-- it. All four columns are set together or all are NULL (no sensitive input, or a run from
-- before this migration whose bundle still holds them as literals).
ALTER TABLE runs
    ADD COLUMN variables_key_id      text,
    ADD COLUMN variables_wrapped_key bytea,
    ADD COLUMN variables_nonce       bytea,
    ADD COLUMN variables_ciphertext  bytea,
    ADD CONSTRAINT runs_variables_complete CHECK (
        (variables_key_id IS NULL AND variables_wrapped_key IS NULL AND variables_nonce IS NULL AND variables_ciphertext IS NULL)
        OR (variables_key_id IS NOT NULL AND variables_wrapped_key IS NOT NULL AND variables_nonce IS NOT NULL AND variables_ciphertext IS NOT NULL));

-- +goose Down
SELECT 1;
