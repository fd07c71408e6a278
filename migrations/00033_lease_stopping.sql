-- Why: a person may cancel a run while it applies (issue 36): its lease stays while the worker stops OpenTofu and stores the state it wrote, and says so.

-- +goose Up
-- stopping: the run was cancelled mid-apply. The worker holding the lease keeps renewing
-- it while it interrupts tofu and records what was written; the sweeper fences the
-- workspace if the worker dies meanwhile. Only an apply's lease is ever stopping.
ALTER TABLE run_leases ADD COLUMN stopping boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE run_leases DROP COLUMN stopping;
