-- +goose Up
-- A requester's landing page lists their newest runs.
CREATE INDEX runs_requested_by ON runs (organization_id, requested_by, created_at DESC);

-- +goose Down
DROP INDEX runs_requested_by;
