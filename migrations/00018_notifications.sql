-- Why: people are told when a decision waits, escalates, is made, expires, fails or goes stale: organization webhooks (signed, retried, logged) and personal e-mail preferences.

-- +goose Up
-- An outgoing webhook of one organization. Its signing secret is sealed like an environment's
-- credential (a per-hook data key wrapped by the keyring's key secret_key_id, the ciphertext
-- bound to the hook): shown once when the hook is created, never again.
CREATE TABLE webhooks (
    id                   text PRIMARY KEY,
    organization_id      text NOT NULL REFERENCES organizations (id),
    name                 text NOT NULL CHECK (length(name) BETWEEN 1 AND 80),
    url                  text NOT NULL CHECK (length(url) BETWEEN 1 AND 2000),
    format               text NOT NULL CHECK (format IN ('json', 'slack')),
    events               jsonb NOT NULL CHECK (jsonb_typeof(events) = 'array'),
    secret_key_id        text NOT NULL,
    secret_wrapped_key   bytea NOT NULL,
    secret_nonce         bytea NOT NULL,
    secret_ciphertext    bytea NOT NULL,
    enabled              boolean NOT NULL DEFAULT true,
    -- Why the hook is off, when Gantry turned it off after repeated failures ('' = on, or
    -- turned off by a person).
    disabled_reason      text NOT NULL DEFAULT '',
    consecutive_failures integer NOT NULL DEFAULT 0,
    created_by           text NOT NULL REFERENCES users (id),
    created_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, name)
);

-- One notification sent to one hook: the exact body signed (no secret is in it), its
-- outcome and its attempts. A redelivery is a delivery of its own.
CREATE TABLE webhook_deliveries (
    id                text PRIMARY KEY,
    webhook_id        text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    organization_id   text NOT NULL REFERENCES organizations (id),
    notification_id   text NOT NULL,
    event             text NOT NULL,
    run_id            text,
    payload           bytea NOT NULL,
    status            text NOT NULL CHECK (status IN ('pending', 'retrying', 'delivered', 'failed')),
    attempts          integer NOT NULL DEFAULT 0,
    last_status_code  integer,
    last_error        text NOT NULL DEFAULT '',
    redelivery_of     text REFERENCES webhook_deliveries (id) ON DELETE SET NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz
);
-- A notification reaches each hook once (a fan-out job that runs twice inserts nothing).
CREATE UNIQUE INDEX webhook_deliveries_once ON webhook_deliveries (webhook_id, notification_id) WHERE redelivery_of IS NULL;
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (webhook_id, created_at DESC, id DESC);

CREATE TABLE webhook_attempts (
    delivery_id  text NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt      integer NOT NULL,
    at           timestamptz NOT NULL DEFAULT now(),
    status_code  integer,
    error        text NOT NULL DEFAULT '',
    duration_ms  integer NOT NULL,
    PRIMARY KEY (delivery_id, attempt)
);

-- A member's choice of which notifications reach them on which channel. No row: the
-- default (on).
CREATE TABLE notification_preferences (
    organization_id text NOT NULL REFERENCES organizations (id),
    user_id         text NOT NULL REFERENCES users (id),
    event           text NOT NULL,
    channel         text NOT NULL CHECK (channel IN ('email')),
    enabled         boolean NOT NULL,
    PRIMARY KEY (organization_id, user_id, event, channel)
);

-- +goose Down
SELECT 1;
