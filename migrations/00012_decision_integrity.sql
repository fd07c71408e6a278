-- Why: decisions you can trust (issue 9, DESIGN §3-§4): a decision binds the predecessor
-- state's digest too; a run records who may also decide after its escalation time and
-- since when it waits; cancellations name who cancelled; members may hold cloud.live; the
-- ID token's groups are kept per user for named environment owners; escalations are
-- recorded once per run and decision row; overrides expire with the run's decision window.

-- +goose Up
ALTER TABLE runs
    ADD COLUMN prior_state_digest     text NOT NULL DEFAULT '',
    ADD COLUMN escalation             text NOT NULL DEFAULT '',
    ADD COLUMN escalate_after_minutes integer NOT NULL DEFAULT 0 CHECK (escalate_after_minutes >= 0),
    ADD COLUMN waiting_since          timestamptz,
    ADD COLUMN cancelled_by           text,
    ADD COLUMN cancelled_by_name      text NOT NULL DEFAULT '',
    ADD COLUMN cancelled_at           timestamptz,
    -- A run planned again from an earlier one (same template version and inputs), and
    -- the people who requested the runs it was planned again from: four eyes keeps them
    -- all from deciding it.
    ADD COLUMN source_run_id          text,
    ADD COLUMN prior_requesters       jsonb NOT NULL DEFAULT '[]';

-- The digest of each run's predecessor, for runs planned before it was recorded.
UPDATE runs r SET prior_state_digest = sv.sha256 FROM state_versions sv WHERE sv.id = r.prior_state_version_id;
-- Runs already waiting started waiting when they were planned (as near as is known).
UPDATE runs SET waiting_since = updated_at WHERE state IN ('PENDING_APPROVAL', 'POLICY_BLOCKED') AND waiting_since IS NULL;

CREATE INDEX runs_workspace_state_idx ON runs (workspace_id, state);

-- cloud.live: the entitlement to request and approve runs on live executors, granted by owners.
ALTER TABLE memberships ADD COLUMN cloud_live boolean NOT NULL DEFAULT false;

-- The groups claim of the user's last sign-in (a snapshot workers and notifications read).
ALTER TABLE users ADD COLUMN groups jsonb NOT NULL DEFAULT '[]';

-- Named owners of an environment: members, and groups from the ID token.
CREATE TABLE environment_owners (
    organization_id text NOT NULL,
    environment_id  text NOT NULL,
    user_id         text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (environment_id, user_id),
    FOREIGN KEY (organization_id, environment_id) REFERENCES environments (organization_id, id),
    FOREIGN KEY (organization_id, user_id) REFERENCES memberships (organization_id, user_id) ON DELETE CASCADE
);
CREATE TABLE environment_owner_groups (
    organization_id text NOT NULL,
    environment_id  text NOT NULL,
    group_name      text NOT NULL CHECK (length(group_name) BETWEEN 1 AND 128),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (environment_id, group_name),
    FOREIGN KEY (organization_id, environment_id) REFERENCES environments (organization_id, id)
);

-- One row per run and decision row whose escalation took effect: the escalation job
-- inserts it (ON CONFLICT DO NOTHING) and audits run.escalated only when it did.
CREATE TABLE run_escalations (
    organization_id text NOT NULL,
    run_id          text NOT NULL,
    level           text NOT NULL,
    escalation      text NOT NULL,
    escalated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, level),
    FOREIGN KEY (organization_id, run_id) REFERENCES runs (organization_id, id)
);

-- An override holds until the decision deadline of the run it was given to.
ALTER TABLE policy_overrides ADD COLUMN expires_at timestamptz;
UPDATE policy_overrides o SET expires_at = coalesce(r.decision_deadline, o.created_at + interval '7 days')
    FROM runs r WHERE r.id = o.run_id;
ALTER TABLE policy_overrides ALTER COLUMN expires_at SET NOT NULL;

-- +goose Down
SELECT 1;
