-- Why: every mutating call takes an idempotency key, browser forms and the JSON API alike (DESIGN §10): a form's replay needs the kind of its flash, an API call's replay its answer.

-- +goose Up
-- flash_kind: the flash message's kind (success, error) a form's replay shows again.
-- content_type and body: an API call's answer, replayed byte for byte to a retry with
-- the same key (never a secret: the answers that carry one are not kept).
ALTER TABLE idempotency_keys
    ADD COLUMN flash_kind   text,
    ADD COLUMN content_type text,
    ADD COLUMN body         bytea CHECK (length(body) <= 1048576);

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN flash_kind, DROP COLUMN content_type, DROP COLUMN body;
