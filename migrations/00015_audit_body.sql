-- Why: every event keeps the exact bytes its hash covers, so an export writes what was hashed as it was stored (no event is rebuilt and re-canonicalised on the way out), and the database itself refuses a body that does not match its hash.

-- +goose Up
-- NULL on events recorded before this migration (the append-only triggers refuse an
-- UPDATE, so they are never backfilled): those are rebuilt from their columns, as
-- before. The columns stay the readable record; the periodic chain check holds the
-- body equal to what the columns rebuild, so the two cannot drift apart unseen.
ALTER TABLE audit_events ADD COLUMN body bytea;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_body_hash
    CHECK (body IS NULL OR sha256(COALESCE(prev_hash, ''::bytea) || body) = hash);

-- +goose Down
SELECT 1;
