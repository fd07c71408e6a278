-- Why: the lease sweeper runs on whichever replica holds its lock at each pass (no
-- replica waits for an election after the last one died), and its passes are counted,
-- so a takeover can prove it came on the first pass after the lease expired.

-- +goose Up
CREATE TABLE lease_sweeps (
    id           boolean PRIMARY KEY DEFAULT true CHECK (id),
    passes       bigint NOT NULL DEFAULT 0 CHECK (passes >= 0),
    last_pass_at timestamptz,
    replica      text
);
INSERT INTO lease_sweeps DEFAULT VALUES;

-- +goose Down
DROP TABLE lease_sweeps;
