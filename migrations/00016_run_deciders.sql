-- Why: the personal inbox lists the runs a person may decide now ("Waiting for you") and the other waiting runs they see ("Waiting for others"), paged in SQL at thousands of waiting runs: who sees and who may decide each waiting run is kept as rows, written by the run service from its own rules (Permissions) whenever one of their inputs changes.

-- +goose Up
-- One row per waiting run (PENDING_APPROVAL, or a soft policy block) and member who
-- sees it: decides says whether they may take the decision it waits for now (action:
-- approve, or override a soft block). The run's decision deadline is copied here so
-- each list is one walk of the index in deadline order; a fresh sign-in is the
-- session's, so a decision that needs one is marked, not left out.
CREATE TABLE run_deciders (
    run_id              text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    user_id             text NOT NULL,
    organization_id     text NOT NULL,
    decides             boolean NOT NULL,
    action              text CHECK (action IN ('approve', 'override')),
    needs_fresh_sign_in boolean NOT NULL,
    decision_deadline   timestamptz NOT NULL,
    PRIMARY KEY (run_id, user_id),
    CHECK (decides = (action IS NOT NULL))
);
CREATE INDEX run_deciders_inbox_idx ON run_deciders (organization_id, user_id, decides, decision_deadline, run_id);

-- +goose Down
DROP TABLE run_deciders;
