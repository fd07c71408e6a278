-- Why: policy as code on the plan (DESIGN §7). Every evaluation is kept with the policy
-- bundle digest and the digest of its results, so an approval and an override bind to
-- exactly what was evaluated; environments set each rule's enforcement; organizations
-- add their own Rego, versioned. Runs record their risk class, the rule that set it,
-- the approver it requires (from the org's approval matrix version) and a cost estimate.

-- +goose Up
ALTER TABLE runs
    ADD COLUMN risk_class           integer,
    ADD COLUMN risk_level           text NOT NULL DEFAULT '',
    ADD COLUMN risk_rule            text NOT NULL DEFAULT '',
    ADD COLUMN risk_reason          text NOT NULL DEFAULT '',
    ADD COLUMN required_approver    text NOT NULL DEFAULT '',
    ADD COLUMN four_eyes            boolean NOT NULL DEFAULT true,
    ADD COLUMN elevated             boolean NOT NULL DEFAULT false,
    ADD COLUMN matrix_version       integer NOT NULL DEFAULT 0,
    ADD COLUMN policy_evaluation_id text,
    ADD COLUMN policy_outcome       text NOT NULL DEFAULT '',
    ADD COLUMN policy_bundle_digest text NOT NULL DEFAULT '',
    ADD COLUMN policy_result_digest text NOT NULL DEFAULT '',
    ADD COLUMN cost                 jsonb;

-- Runs planned before this migration keep the approver the interim rules gave them:
-- an owner for destroys, an admin for replaces and production, else an operator.
UPDATE runs r SET required_approver = CASE
        WHEN r.kind = 'destroy' OR coalesce((r.plan_summary->>'delete')::int, 0) > 0 THEN 'owner'
        WHEN coalesce((r.plan_summary->>'replace')::int, 0) > 0 OR e.tier = 'production' THEN 'admin'
        ELSE 'operator' END
    FROM environments e
    WHERE e.id = r.environment_id AND r.plan_digest <> '';

CREATE TABLE policy_evaluations (
    id              text PRIMARY KEY,
    organization_id text NOT NULL,
    run_id          text NOT NULL,
    plan_revision   integer NOT NULL,
    plan_digest     text NOT NULL,
    bundle_digest   text NOT NULL,
    result_digest   text NOT NULL,
    outcome         text NOT NULL CHECK (outcome IN ('pass', 'advisory', 'soft_failed', 'hard_failed')),
    results         jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, id),
    FOREIGN KEY (organization_id, run_id) REFERENCES runs (organization_id, id)
);
CREATE INDEX policy_evaluations_run_idx ON policy_evaluations (run_id, created_at);

-- An admin's override of one soft-mandatory failure, bound to the rule's version and the
-- evaluation's result digest: a different evaluation needs a new override.
CREATE TABLE policy_overrides (
    id                 text PRIMARY KEY,
    organization_id    text NOT NULL,
    run_id             text NOT NULL,
    evaluation_id      text NOT NULL,
    rule_id            text NOT NULL,
    rule_version       text NOT NULL,
    result_digest      text NOT NULL,
    reason             text NOT NULL CHECK (length(reason) >= 10),
    overridden_by      text NOT NULL REFERENCES users (id),
    overridden_by_name text NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (evaluation_id, rule_id),
    FOREIGN KEY (organization_id, run_id) REFERENCES runs (organization_id, id),
    FOREIGN KEY (organization_id, evaluation_id) REFERENCES policy_evaluations (organization_id, id)
);

-- A rule's enforcement in one environment; no row: the rule's default.
CREATE TABLE environment_policy_modes (
    organization_id text NOT NULL,
    environment_id  text NOT NULL,
    rule_id         text NOT NULL,
    enforcement     text NOT NULL CHECK (enforcement IN ('advisory', 'soft_mandatory', 'hard_mandatory')),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (environment_id, rule_id),
    FOREIGN KEY (organization_id, environment_id) REFERENCES environments (organization_id, id) ON DELETE CASCADE
);

-- Org-managed policies: uploaded Rego and its tests, one row per version; the newest
-- active version of each name joins the org's bundle.
CREATE TABLE org_policies (
    organization_id  text NOT NULL REFERENCES organizations (id),
    name             text NOT NULL CHECK (name ~ '^[a-z][a-z0-9_]{2,40}$'),
    version          integer NOT NULL CHECK (version > 0),
    title            text NOT NULL,
    enforcement      text NOT NULL CHECK (enforcement IN ('advisory', 'soft_mandatory', 'hard_mandatory')),
    rego             text NOT NULL,
    tests            text NOT NULL,
    digest           text NOT NULL,
    active           boolean NOT NULL DEFAULT true,
    uploaded_by      text REFERENCES users (id),
    uploaded_by_name text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, name, version)
);

-- +goose Down
SELECT 1;
