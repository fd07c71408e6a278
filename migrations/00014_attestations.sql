-- Why: every apply that wrote state versions leaves a signed in-toto attestation (DSSE, the organization's Ed25519 key) naming what led to them.

-- +goose Up
CREATE TABLE attestations (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id),
    run_id          text NOT NULL,
    bundle          jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX attestations_run_idx ON attestations (organization_id, run_id, created_at DESC);

-- +goose Down
SELECT 1;
