-- Why: a new deployment needs a first owner. An invitation names an e-mail address and a
-- role; the first sign-in with that address, verified by the OpenID Provider, turns it
-- into a membership.

-- +goose Up
CREATE TABLE invitations (
    organization_id text NOT NULL REFERENCES organizations (id),
    email           text NOT NULL CHECK (email = lower(email) AND email LIKE '%_@_%'),
    role            text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin', 'owner', 'auditor')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, email)
);
CREATE INDEX invitations_email_idx ON invitations (email);

-- +goose Down
SELECT 1;
