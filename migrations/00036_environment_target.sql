-- Why: an environment names where its runs provision (issue 38): its target, whose kind picks how a phase's workload token is handed over.

-- +goose Up
-- target: the environment's target as JSON (models/environment.Target): its kind, the
-- audience its tokens are minted for and the kind's settings (addresses, identities to
-- assume, a CA certificate; never a secret). Every environment so far provisions into the
-- sandbox cloud.
ALTER TABLE environments
    ADD COLUMN target jsonb NOT NULL DEFAULT '{"kind":"sandbox"}',
    ADD CONSTRAINT environments_target_kind CHECK (
        jsonb_typeof(target) = 'object' AND target->>'kind' IN ('sandbox', 'kubernetes', 'aws', 'gcp', 'azure'));

-- +goose Down
ALTER TABLE environments DROP CONSTRAINT environments_target_kind;
ALTER TABLE environments DROP COLUMN target;
