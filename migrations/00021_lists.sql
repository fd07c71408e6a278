-- Why: the workspaces and runs lists page by keyset at thousands of rows, in the orders people sort them by (name, last activity, time requested), so each order needs an index that ends in the id.

-- +goose Up
-- When the workspace's newest run was requested: written with its run number, in the
-- row the request already locks.
ALTER TABLE workspaces ADD COLUMN last_run_at timestamptz;
UPDATE workspaces w SET last_run_at = COALESCE((SELECT max(r.created_at) FROM runs r WHERE r.workspace_id = w.id), w.created_at);
ALTER TABLE workspaces ALTER COLUMN last_run_at SET NOT NULL, ALTER COLUMN last_run_at SET DEFAULT now();
CREATE INDEX workspaces_org_name_idx ON workspaces (organization_id, name, id);
CREATE INDEX workspaces_org_activity_idx ON workspaces (organization_id, last_run_at, id);
CREATE INDEX runs_org_created_idx ON runs (organization_id, created_at, id);

-- +goose Down
DROP INDEX runs_org_created_idx;
DROP INDEX workspaces_org_activity_idx;
DROP INDEX workspaces_org_name_idx;
ALTER TABLE workspaces DROP COLUMN last_run_at;
