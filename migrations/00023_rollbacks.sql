-- Why: a rollback is a run that re-applies what produced an earlier state version; the run records which version it rolls back to, so its review can say what a rollback cannot bring back.

-- +goose Up
ALTER TABLE runs
    ADD COLUMN rollback_version_id text REFERENCES state_versions (id),
    ADD COLUMN rollback_serial     integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE runs DROP COLUMN rollback_serial, DROP COLUMN rollback_version_id;
