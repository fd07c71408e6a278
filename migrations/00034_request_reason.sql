-- Why: a request says why it is asked for and which ticket it answers (issue 37): the inbox, the review, the evidence report and the API show them to whoever decides.

-- +goose Up
-- request_reason and request_ticket are the requester's free text, escaped wherever
-- shown and never read by any rule: '' when the requester gave none.
ALTER TABLE runs ADD COLUMN request_reason text NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN request_ticket text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE runs DROP COLUMN request_ticket;
ALTER TABLE runs DROP COLUMN request_reason;
