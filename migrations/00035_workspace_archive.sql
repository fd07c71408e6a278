-- Why: a destroyed workspace can be archived (issue 37): hidden from the lists, kept with its runs, state history and audit.

-- +goose Up
-- archived_at: when the workspace was archived (NULL: it is in the lists). A new
-- request into its name brings it back (archived_at NULL again, audited).
ALTER TABLE workspaces ADD COLUMN archived_at timestamptz;
ALTER TABLE workspaces ADD COLUMN archived_by text;
ALTER TABLE workspaces ADD COLUMN archived_by_name text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE workspaces DROP COLUMN archived_by_name;
ALTER TABLE workspaces DROP COLUMN archived_by;
ALTER TABLE workspaces DROP COLUMN archived_at;
