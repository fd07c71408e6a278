-- Why: the run lifecycle: pinned template digests, encrypted artifacts, state versions,
-- runs with their evidence, and the per-workspace apply slot; plus River's job tables,
-- which live beside ours (installed by rivermigrate, see models/db.Migrate).

-- +goose Up
-- The module digest each template version had when Gantry first loaded it. A template
-- version is immutable: a different tree under the same version is refused.
CREATE TABLE template_pins (
    name          text NOT NULL,
    version       text NOT NULL,
    module_digest text NOT NULL,
    pinned_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, version)
);

-- Encrypted artifacts: config bundles, plan files, plan JSON, logs, states. Only the
-- digest and size of the plaintext are in clear; the data key is wrapped by a KEK.
CREATE TABLE artifacts (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id),
    workspace_id    text NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('config_bundle', 'plan_file', 'plan_json', 'plan_log', 'apply_log', 'verify_log', 'state')),
    sha256          text NOT NULL,
    size            bigint NOT NULL,
    key_id          text NOT NULL,
    wrapped_key     bytea NOT NULL,
    nonce           bytea NOT NULL,
    ciphertext      bytea NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (organization_id, workspace_id) REFERENCES workspaces (organization_id, id)
);
CREATE INDEX artifacts_workspace_idx ON artifacts (workspace_id);

ALTER TABLE workspaces
    ADD COLUMN template_name   text NOT NULL DEFAULT '',
    ADD COLUMN next_run_number integer NOT NULL DEFAULT 1,
    -- The apply slot: the one run applying or verifying in this workspace, if any.
    ADD COLUMN active_run_id   text;

CREATE TABLE state_versions (
    id              text PRIMARY KEY,
    organization_id text NOT NULL,
    workspace_id    text NOT NULL,
    serial          integer NOT NULL CHECK (serial > 0),
    lineage         text NOT NULL,
    artifact_id     text NOT NULL REFERENCES artifacts (id),
    sha256          text NOT NULL,
    run_id          text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, serial),
    FOREIGN KEY (organization_id, workspace_id) REFERENCES workspaces (organization_id, id)
);

CREATE TABLE runs (
    id                     text PRIMARY KEY,
    organization_id        text NOT NULL,
    workspace_id           text NOT NULL,
    environment_id         text NOT NULL,
    number                 integer NOT NULL,
    kind                   text NOT NULL CHECK (kind IN ('apply', 'plan_only', 'destroy')),
    state                  text NOT NULL CHECK (state IN ('QUEUED', 'PLANNING', 'PLANNED', 'NO_CHANGES', 'POLICY_BLOCKED',
                               'PENDING_APPROVAL', 'APPROVED', 'RUNNING', 'VERIFYING', 'SUCCEEDED', 'FAILED', 'REJECTED',
                               'CANCELLED', 'EXPIRED', 'STALE', 'APPLY_INTERRUPTED')),
    state_reason           text NOT NULL DEFAULT '',
    template_name          text NOT NULL,
    template_version       text NOT NULL,
    module_digest          text NOT NULL,
    inputs                 jsonb NOT NULL DEFAULT '{}',
    requested_by           text NOT NULL,
    requested_by_name      text NOT NULL,
    runner                 text NOT NULL,
    simulated              boolean NOT NULL,
    config_artifact_id     text NOT NULL REFERENCES artifacts (id),
    config_digest          text NOT NULL,
    prior_state_version_id text REFERENCES state_versions (id),
    prior_serial           integer NOT NULL DEFAULT 0,
    prior_lineage          text NOT NULL DEFAULT '',
    plan_revision          integer NOT NULL DEFAULT 0,
    plan_artifact_id       text REFERENCES artifacts (id),
    plan_digest            text NOT NULL DEFAULT '',
    plan_json_artifact_id  text REFERENCES artifacts (id),
    plan_log_artifact_id   text REFERENCES artifacts (id),
    plan_summary           jsonb NOT NULL DEFAULT '{}',
    decision_deadline      timestamptz,
    approved_by            text,
    approved_by_name       text NOT NULL DEFAULT '',
    approved_at            timestamptz,
    approved_plan_digest   text NOT NULL DEFAULT '',
    approval_kind          text NOT NULL DEFAULT '',
    approval_expires_at    timestamptz,
    rejected_by            text,
    rejected_by_name       text NOT NULL DEFAULT '',
    rejected_at            timestamptz,
    apply_log_artifact_id  text REFERENCES artifacts (id),
    new_state_version_id   text REFERENCES state_versions (id),
    outputs                jsonb,
    verify_log_artifact_id text REFERENCES artifacts (id),
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    finished_at            timestamptz,
    UNIQUE (organization_id, id),
    UNIQUE (workspace_id, number),
    FOREIGN KEY (organization_id, workspace_id) REFERENCES workspaces (organization_id, id),
    FOREIGN KEY (organization_id, environment_id) REFERENCES environments (organization_id, id),
    -- A rejection never reads as an approval.
    CHECK (state <> 'REJECTED' OR (approved_by IS NULL AND approved_plan_digest = ''))
);
CREATE INDEX runs_workspace_idx ON runs (workspace_id, number DESC);
CREATE INDEX runs_org_state_idx ON runs (organization_id, state);

-- +goose Down
SELECT 1;
