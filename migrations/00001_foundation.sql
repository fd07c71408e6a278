-- Why: the foundation every later feature stands on: tenants, people, roles, environments,
-- workspaces, server-side sessions and the append-only, hash-chained audit log.

-- +goose Up
CREATE TABLE organizations (
    id         text PRIMARY KEY,
    slug       text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$'),
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- A user is one identity at one OpenID Provider: (issuer, subject) is the key,
-- never the e-mail address, which the provider may let people change.
CREATE TABLE users (
    id         text PRIMARY KEY,
    issuer     text NOT NULL,
    subject    text NOT NULL,
    email      text NOT NULL DEFAULT '',
    name       text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (issuer, subject)
);

CREATE TABLE memberships (
    organization_id text NOT NULL REFERENCES organizations (id),
    user_id         text NOT NULL REFERENCES users (id),
    role            text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin', 'owner', 'auditor')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX memberships_user_idx ON memberships (user_id);

CREATE TABLE environments (
    id                text PRIMARY KEY,
    organization_id   text NOT NULL REFERENCES organizations (id),
    name              text NOT NULL CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    tier              text NOT NULL CHECK (tier IN ('development', 'staging', 'production')),
    requires_approval boolean NOT NULL,
    restricted        boolean NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, id)
);
-- Names are unique per organization regardless of case, so "Prod" and "prod" cannot coexist.
CREATE UNIQUE INDEX environments_org_name_idx ON environments (organization_id, lower(name));

-- Explicit grants: who may use a restricted environment. The composite keys keep a
-- grant inside one organization: it cannot point at another tenant's environment or
-- at someone who is not a member.
CREATE TABLE environment_grants (
    organization_id text NOT NULL,
    environment_id  text NOT NULL,
    user_id         text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (environment_id, user_id),
    FOREIGN KEY (organization_id, environment_id) REFERENCES environments (organization_id, id),
    FOREIGN KEY (organization_id, user_id) REFERENCES memberships (organization_id, user_id) ON DELETE CASCADE
);

CREATE TABLE workspaces (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id),
    environment_id  text NOT NULL,
    name            text NOT NULL CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, id),
    UNIQUE (environment_id, name),
    FOREIGN KEY (organization_id, environment_id) REFERENCES environments (organization_id, id)
);

-- Server-side sessions. Only the sha256 of the cookie value is stored, so a database
-- dump does not hand out live sessions. data holds the login flow (state, nonce, PKCE
-- verifier) before sign-in and flash messages after.
CREATE TABLE sessions (
    id_hash         bytea PRIMARY KEY,
    user_id         text REFERENCES users (id),
    organization_id text REFERENCES organizations (id),
    csrf_token      text NOT NULL,
    data            jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL
);
CREATE INDEX sessions_expires_idx ON sessions (expires_at);
CREATE INDEX sessions_last_seen_idx ON sessions (last_seen_at);

-- The audit log: per organization an unbroken sequence, each event's hash covering the
-- previous event's hash and the event's canonical JSON.
CREATE TABLE audit_events (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id),
    seq             bigint NOT NULL CHECK (seq > 0),
    occurred_at     timestamptz NOT NULL,
    actor_id        text NOT NULL,
    actor_name      text NOT NULL,
    action          text NOT NULL,
    target_type     text NOT NULL,
    target_id       text NOT NULL,
    data            jsonb NOT NULL DEFAULT '{}',
    prev_hash       bytea,
    hash            bytea NOT NULL,
    UNIQUE (organization_id, seq)
);
CREATE INDEX audit_events_target_idx ON audit_events (organization_id, target_type, target_id);

-- +goose StatementBegin
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_no_update_delete
    BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate
    BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

-- +goose Down
-- Forward-only: Gantry never migrates down.
SELECT 1;
