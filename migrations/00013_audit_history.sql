-- Why: auditors read, filter, export and verify the log: events name the environment, workspace and run they concern (hashed with them), the chain keeps a checkpoint, each organization signs its exports with an Ed25519 key, and exports are stored encrypted in chunks.

-- +goose Up
-- The scope of an event, set when it is recorded and covered by its hash (an event
-- recorded before this migration has none and hashes as before). Adding columns is
-- the one change the append-only triggers allow.
ALTER TABLE audit_events
    ADD COLUMN environment_id text,
    ADD COLUMN workspace_id   text,
    ADD COLUMN run_id         text;

-- Every filter of the history walks one index newest first (keyset paging on seq).
CREATE INDEX audit_events_environment_idx ON audit_events (organization_id, environment_id, seq) WHERE environment_id IS NOT NULL;
CREATE INDEX audit_events_workspace_idx ON audit_events (organization_id, workspace_id, seq) WHERE workspace_id IS NOT NULL;
CREATE INDEX audit_events_run_idx ON audit_events (organization_id, run_id, seq) WHERE run_id IS NOT NULL;
CREATE INDEX audit_events_actor_idx ON audit_events (organization_id, actor_id, seq);
CREATE INDEX audit_events_action_idx ON audit_events (organization_id, action, seq);
CREATE INDEX audit_events_time_idx ON audit_events (organization_id, occurred_at, seq);

-- How far the chain of an organization has been verified, advanced incrementally by a
-- periodic job so that no page verifies a million rows; broken_seq names the first
-- event that failed (and stays until an operator looks).
CREATE TABLE audit_checkpoints (
    organization_id text PRIMARY KEY REFERENCES organizations (id),
    verified_seq    bigint NOT NULL DEFAULT 0,
    verified_hash   bytea,
    checked_at      timestamptz NOT NULL,
    broken_seq      bigint,
    broken_reason   text
);

-- One Ed25519 signing key per organization signs its exports and attestations; a
-- rotated key keeps its row (retired_at set) so what it signed still verifies. The
-- private half is sealed like artifacts (a data key wrapped by the keyring's key_id).
CREATE TABLE audit_signing_keys (
    kid             text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id),
    public_key      bytea NOT NULL CHECK (length(public_key) = 32),
    fingerprint     text NOT NULL UNIQUE,
    key_id          text NOT NULL,
    wrapped_key     bytea NOT NULL,
    nonce           bytea NOT NULL,
    ciphertext      bytea NOT NULL,
    created_at      timestamptz NOT NULL,
    retired_at      timestamptz
);
CREATE UNIQUE INDEX audit_signing_keys_one_active_idx ON audit_signing_keys (organization_id) WHERE retired_at IS NULL;

-- An export of a time range (and filters), pinned to the last event that existed when
-- it was asked for, built by a River job into encrypted chunks of a fixed plaintext
-- size (so a byte range maps to chunks without reading the rest).
CREATE TABLE audit_exports (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id),
    requested_by    text NOT NULL,
    format          text NOT NULL CHECK (format IN ('csv', 'jsonl')),
    from_time       timestamptz NOT NULL,
    to_time         timestamptz NOT NULL CHECK (to_time > from_time),
    filters         jsonb NOT NULL DEFAULT '{}',
    last_seq        bigint NOT NULL,
    status          text NOT NULL CHECK (status IN ('queued', 'building', 'ready', 'failed')),
    events_total    bigint,
    events_done     bigint NOT NULL DEFAULT 0,
    size            bigint,
    sha256          text,
    manifest        jsonb,
    error           text,
    chunk_size      integer NOT NULL,
    key_id          text NOT NULL,
    wrapped_key     bytea NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz
);
CREATE INDEX audit_exports_org_idx ON audit_exports (organization_id, created_at DESC);

CREATE TABLE audit_export_chunks (
    export_id  text NOT NULL REFERENCES audit_exports (id) ON DELETE CASCADE,
    n          integer NOT NULL CHECK (n >= 0),
    ciphertext bytea NOT NULL,
    PRIMARY KEY (export_id, n)
);
-- Ciphertext does not compress: store it out of line without trying.
ALTER TABLE audit_export_chunks ALTER COLUMN ciphertext SET STORAGE EXTERNAL;

-- +goose Down
SELECT 1;
