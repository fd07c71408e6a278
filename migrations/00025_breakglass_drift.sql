-- Why: the manual change path and drift detection (DESIGN §9): break-glass windows on a workspace, drift checks and codifications as runs (refresh-only plans; a codification's is applied), each drift attributed to the window that made it or flagged unowned, and a drift schedule per environment.

-- +goose Up
CREATE TABLE breakglass_windows (
    id                   text PRIMARY KEY,
    organization_id      text NOT NULL REFERENCES organizations (id),
    environment_id       text NOT NULL,
    workspace_id         text NOT NULL,
    state                text NOT NULL CHECK (state IN ('REQUESTED', 'APPROVED', 'OPEN', 'AWAITING_CODIFICATION',
                             'CODIFIED', 'CLOSED', 'REJECTED', 'CANCELLED', 'EXPIRED')),
    state_reason         text NOT NULL DEFAULT '',
    reason               text NOT NULL CHECK (length(reason) BETWEEN 10 AND 2000),
    duration_minutes     integer NOT NULL CHECK (duration_minutes BETWEEN 5 AND 240),
    terms_digest         text NOT NULL,
    requested_by         text NOT NULL,
    requested_by_name    text NOT NULL,
    decision_deadline    timestamptz NOT NULL,
    approved_by          text,
    approved_by_name     text NOT NULL DEFAULT '',
    approved_at          timestamptz,
    approval_expires_at  timestamptz,
    rejected_by          text,
    rejected_by_name     text NOT NULL DEFAULT '',
    opened_at            timestamptz,
    ends_at              timestamptz,
    ended_at             timestamptz,
    credentials_issued   integer NOT NULL DEFAULT 0,
    drift_check_run_id   text REFERENCES runs (id),
    codify_run_id        text REFERENCES runs (id),
    closed_by            text,
    closed_by_name       text NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    finished_at          timestamptz,
    UNIQUE (organization_id, id),
    FOREIGN KEY (organization_id, workspace_id) REFERENCES workspaces (organization_id, id),
    FOREIGN KEY (organization_id, environment_id) REFERENCES environments (organization_id, id),
    -- The approver is never the requester (four eyes), and an open window has its clock.
    CHECK (approved_by IS NULL OR approved_by <> requested_by),
    CHECK (state <> 'OPEN' OR (opened_at IS NOT NULL AND ends_at IS NOT NULL))
);
-- One window at a time per workspace may be asked for, approved or open.
CREATE UNIQUE INDEX breakglass_windows_active_idx ON breakglass_windows (workspace_id)
    WHERE state IN ('REQUESTED', 'APPROVED', 'OPEN');
CREATE INDEX breakglass_windows_org_idx ON breakglass_windows (organization_id, created_at DESC);
CREATE INDEX breakglass_windows_workspace_idx ON breakglass_windows (workspace_id, created_at DESC);

ALTER TABLE runs DROP CONSTRAINT runs_kind_check;
ALTER TABLE runs ADD CONSTRAINT runs_kind_check CHECK (kind IN ('apply', 'plan_only', 'destroy', 'drift_check', 'codify'));
ALTER TABLE runs
    ADD COLUMN drift               jsonb,
    ADD COLUMN drift_status        text NOT NULL DEFAULT '' CHECK (drift_status IN ('', 'clean', 'expected', 'unowned')),
    ADD COLUMN breakglass_window_id text REFERENCES breakglass_windows (id);
-- The drift list: each workspace's newest drift check.
CREATE INDEX runs_drift_idx ON runs (organization_id, workspace_id, number DESC) WHERE kind = 'drift_check';

-- Minutes between scheduled drift checks of a workspace; 0 is off (development's default).
ALTER TABLE environments ADD COLUMN drift_interval_minutes integer NOT NULL DEFAULT 0
    CHECK (drift_interval_minutes = 0 OR drift_interval_minutes BETWEEN 5 AND 10080);
UPDATE environments SET drift_interval_minutes = CASE tier WHEN 'production' THEN 60 WHEN 'staging' THEN 240 ELSE 0 END;

-- +goose Down
ALTER TABLE environments DROP COLUMN drift_interval_minutes;
DROP INDEX runs_drift_idx;
ALTER TABLE runs DROP COLUMN breakglass_window_id, DROP COLUMN drift_status, DROP COLUMN drift;
ALTER TABLE runs DROP CONSTRAINT runs_kind_check;
ALTER TABLE runs ADD CONSTRAINT runs_kind_check CHECK (kind IN ('apply', 'plan_only', 'destroy'));
DROP TABLE breakglass_windows;
