-- Why: owners map an identity provider's group to a role, evaluated at every sign-in (issue 40); a membership a rule made is the rules' to end, one an invitation or an owner made never is.

-- +goose Up
-- direct: an invitation, an owner's or admin's action, a service account or bootstrap;
-- rule: a group rule made it, and the rules change or end it.
ALTER TABLE memberships ADD COLUMN source text NOT NULL DEFAULT 'direct' CHECK (source IN ('direct', 'rule'));

-- One rule per group per organization: the group's members get role (never owner: owners
-- stay invitation-only) and, when cloud_live, the live-cloud entitlement.
CREATE TABLE group_rules (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id),
    group_name      text NOT NULL CHECK (length(group_name) BETWEEN 1 AND 256),
    role            text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin', 'auditor')),
    cloud_live      boolean NOT NULL DEFAULT false,
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, group_name)
);

-- +goose Down
DROP TABLE group_rules;
ALTER TABLE memberships DROP COLUMN source;
