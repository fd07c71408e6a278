-- Why: "Waiting for you" lists the runs a person may decide now, paged in SQL at thousands of waiting runs: who may decide each waiting run is kept as rows, written by the run service from its own rules (Permissions) whenever one of their inputs changes.

-- +goose Up
-- One row per waiting run (PENDING_APPROVAL, or a soft policy block) and member who
-- may take the decision it waits for now: approve, or (a soft block) override. The
-- deadline is judged when reading (runs.decision_deadline); a fresh sign-in is the
-- session's, so a decision that needs one is marked, not left out.
CREATE TABLE run_deciders (
    run_id              text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    user_id             text NOT NULL,
    organization_id     text NOT NULL,
    action              text NOT NULL CHECK (action IN ('approve', 'override')),
    needs_fresh_sign_in boolean NOT NULL,
    PRIMARY KEY (run_id, user_id)
);
CREATE INDEX run_deciders_user_idx ON run_deciders (organization_id, user_id, run_id);

-- +goose Down
DROP TABLE run_deciders;
