-- Why: every way a run ends says why in a code from one closed set (models/run/endings.go), so evidence reads a code, not free text.

-- +goose Up
-- The code is written by the move that ends the run, with the move's audit event
-- ("ending"). Runs that ended before this migration get the code where their state says
-- it alone (a SUCCEEDED run was verified, a REJECTED one rejected, ...); the others
-- (EXPIRED, STALE, FAILED, APPLY_INTERRUPTED, POLICY_BLOCKED: more than one way in) keep
-- '' rather than a guess.
ALTER TABLE runs ADD COLUMN ending text NOT NULL DEFAULT '';
UPDATE runs SET ending = CASE state
    WHEN 'SUCCEEDED' THEN 'VERIFIED'
    WHEN 'NO_CHANGES' THEN 'NO_CHANGES'
    WHEN 'REJECTED' THEN 'REJECTED'
    WHEN 'CANCELLED' THEN 'CANCELLED'
    WHEN 'PLANNED' THEN CASE kind WHEN 'drift_check' THEN 'DRIFT_FOUND' ELSE 'PLAN_ONLY' END
    ELSE '' END;

-- +goose Down
SELECT 1;
