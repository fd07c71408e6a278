-- Why: a run decision submitted twice (a double click, a retried request, the back button) must take effect once and answer the same way (DESIGN §3 "Evidence binding").

-- +goose Up
-- One row per idempotency key a member used. The key is chosen by the form (a fresh
-- random value per rendered form), so it is only unique per person: the same value
-- from another person or in another organization is another key.
-- request_hash is the sha256 of method, path and the sorted form fields (without
-- _csrf and the key itself): the same key with other values is refused, not replayed.
-- status, location and flash are the response to replay (a redirect and its flash
-- message). The row is written in the transaction that records the decision, so a
-- failed decision leaves no row behind and its key stays usable.
-- Rows older than a day are swept by the next request of the same person.
CREATE TABLE idempotency_keys (
    organization_id text NOT NULL,
    user_id         text NOT NULL,
    key             text NOT NULL CHECK (length(key) BETWEEN 1 AND 128),
    request_hash    text NOT NULL,
    status          integer,
    location        text,
    flash           text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, user_id, key),
    FOREIGN KEY (organization_id, user_id) REFERENCES memberships (organization_id, user_id) ON DELETE CASCADE
);

-- +goose Down
SELECT 1;
