-- Why: a company's directory ends access without waiting for a sign-in: SCIM 2.0 (RFC 7643/7644) provisioning per organization, with its own bearer token, the users and groups the directory sends, and group members for the group rules.

-- +goose Up
-- One SCIM bearer token per organization, stored as a sha256 only (like api_tokens).
CREATE TABLE scim_tokens (
    organization_id text PRIMARY KEY REFERENCES organizations (id),
    id              text NOT NULL UNIQUE,
    secret_hash     bytea NOT NULL CHECK (length(secret_hash) = 32),
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- A user as the directory describes it. It grants nothing: it is linked to a Gantry
-- person only to end their access (docs/scim.md).
CREATE TABLE scim_users (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id),
    user_name       text NOT NULL CHECK (length(user_name) BETWEEN 1 AND 256),
    external_id     text CHECK (length(external_id) <= 256),
    active          boolean NOT NULL DEFAULT true,
    display_name    text NOT NULL DEFAULT '',
    doc             jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, id)
);
CREATE UNIQUE INDEX scim_users_user_name_idx ON scim_users (organization_id, lower(user_name));
CREATE INDEX scim_users_external_id_idx ON scim_users (organization_id, external_id);

CREATE TABLE scim_groups (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id),
    display_name    text NOT NULL CHECK (length(display_name) BETWEEN 1 AND 256),
    external_id     text CHECK (length(external_id) <= 256),
    doc             jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, id)
);

-- Members of a directory group: users of the same organization only.
CREATE TABLE scim_group_members (
    organization_id text NOT NULL,
    group_id        text NOT NULL,
    user_id         text NOT NULL,
    PRIMARY KEY (group_id, user_id),
    FOREIGN KEY (organization_id, group_id) REFERENCES scim_groups (organization_id, id) ON DELETE CASCADE,
    FOREIGN KEY (organization_id, user_id) REFERENCES scim_users (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX scim_group_members_user_idx ON scim_group_members (organization_id, user_id);

-- +goose Down
DROP TABLE scim_group_members;
DROP TABLE scim_groups;
DROP TABLE scim_users;
DROP TABLE scim_tokens;
