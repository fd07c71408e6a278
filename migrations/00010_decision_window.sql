-- Why: the decision window (how long a run may wait in PENDING_APPROVAL before it expires)
-- is set per environment (DESIGN §3 "Clocks"); existing environments keep the 7-day default.

-- +goose Up
ALTER TABLE environments
    ADD COLUMN decision_window_hours integer NOT NULL DEFAULT 168
        CHECK (decision_window_hours BETWEEN 1 AND 720);

-- +goose Down
SELECT 1;
