-- Why: a worker running a phase holds a lease on the run, renewed by a heartbeat, so a
-- dead portal is noticed in seconds instead of after River's rescue window (DESIGN §6).
-- The token fences: it grows with every lease ever granted, and every side effect of a
-- phase names it, so a worker whose lease was taken over can change nothing.

-- +goose Up
CREATE SEQUENCE run_lease_tokens;

-- One row per run while a worker runs one of its phases; deleted when the phase ends
-- (finished, failed, or taken over by the sweeper).
CREATE TABLE run_leases (
    run_id          text PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    phase           text NOT NULL CHECK (phase IN ('plan', 'apply', 'verify')),
    token           bigint NOT NULL UNIQUE,
    -- The River job working the phase: the sweeper closes it when it takes over, so
    -- River's own rescue never runs the phase a second time.
    job_id          bigint NOT NULL,
    -- The portal replica that holds it (its orphaned containers carry the same id).
    holder          text NOT NULL CHECK (length(holder) BETWEEN 1 AND 200),
    acquired_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    renewed_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at      timestamptz NOT NULL
);
CREATE INDEX run_leases_expiry ON run_leases (expires_at);

-- +goose Down
DROP TABLE run_leases;
DROP SEQUENCE run_lease_tokens;
