-- Why: automation drives Gantry over its JSON API with API tokens (DESIGN §10): personal tokens and service accounts' tokens, scoped, expiring, revocable, and hashed at rest.

-- +goose Up
-- A service account is a user of no OpenID Provider: a member of one organization,
-- with a role like anyone, that acts only through its tokens.
ALTER TABLE users ADD COLUMN service_account boolean NOT NULL DEFAULT false;

CREATE TABLE api_tokens (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id),
    user_id         text NOT NULL REFERENCES users (id),
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    scopes          jsonb NOT NULL,
    -- sha256 of the secret part: the database holds no usable token.
    secret_hash     bytea NOT NULL CHECK (length(secret_hash) = 32),
    expires_at      timestamptz NOT NULL,
    last_used_at    timestamptz,
    revoked_at      timestamptz,
    revoked_by      text,
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, id),
    FOREIGN KEY (organization_id, user_id) REFERENCES memberships (organization_id, user_id) ON DELETE CASCADE
);
CREATE INDEX api_tokens_holder_idx ON api_tokens (organization_id, user_id, created_at DESC);

-- +goose Down
DROP TABLE api_tokens;
ALTER TABLE users DROP COLUMN service_account;
