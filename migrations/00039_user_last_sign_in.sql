-- Why: owners must see what the OpenID Provider asserted at a person's last sign-in (address, how it was verified, groups, where each came from) to tell why someone did not join (issue 40).

-- +goose Up
-- The claims snapshot of models/signin.Asserted, replaced at every sign-in; never a token.
ALTER TABLE users ADD COLUMN last_sign_in jsonb;

-- +goose Down
ALTER TABLE users DROP COLUMN last_sign_in;
