-- Why: Gantry serves the OpenTofu http state backend itself: job-scoped state credentials and per-workspace locks with a fence.

-- +goose Up
-- One credential per job phase. The id is the Basic-auth username; only the sha256 of
-- the random password is kept, so a database dump hands out no live credential.
CREATE TABLE state_credentials (
    id              text PRIMARY KEY,
    organization_id text NOT NULL,
    workspace_id    text NOT NULL,
    run_id          text NOT NULL,
    phase           text NOT NULL CHECK (phase IN ('plan', 'apply', 'verify')),
    secret_hash     bytea NOT NULL CHECK (length(secret_hash) = 32),
    expires_at      timestamptz NOT NULL,
    revoked_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (organization_id, workspace_id) REFERENCES workspaces (organization_id, id),
    FOREIGN KEY (organization_id, run_id) REFERENCES runs (organization_id, id)
);
CREATE INDEX state_credentials_run_idx ON state_credentials (run_id);

-- One row per workspace that was ever locked; lock_id is NULL while the lock is free.
-- The row stays after an unlock so fence keeps counting up: it grows on every
-- acquisition and every fencing, and never goes back.
CREATE TABLE state_locks (
    workspace_id    text PRIMARY KEY,
    organization_id text NOT NULL,
    lock_id         text,
    info            jsonb,
    run_id          text,
    credential_id   text REFERENCES state_credentials (id),
    fence           bigint NOT NULL DEFAULT 0 CHECK (fence >= 0),
    acquired_at     timestamptz,
    FOREIGN KEY (organization_id, workspace_id) REFERENCES workspaces (organization_id, id),
    -- Held means every holder column is set; free means none is.
    CHECK ((lock_id IS NULL) = (info IS NULL) AND (lock_id IS NULL) = (run_id IS NULL)
       AND (lock_id IS NULL) = (credential_id IS NULL) AND (lock_id IS NULL) = (acquired_at IS NULL))
);

-- +goose Down
SELECT 1;
