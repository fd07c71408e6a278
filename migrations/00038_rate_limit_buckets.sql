-- Why: every portal replica must count against the same rate limits (issue 39), so the buckets live in the database instead of each process's memory.

-- +goose Up
-- One row per bucket (models/ratelimit): key names whose requests it counts and under
-- which limit ("decide session <hash>", "decide-ip 203.0.113.7"); full_at is the instant
-- the bucket holds its whole burst again (GCRA). A missing row is a full bucket, so the
-- rows whose full_at has passed are swept: the table holds the clients of the last few
-- minutes, never every address a flood came from.
-- UNLOGGED: a check writes a row on every limited request, and the buckets are not worth
-- the write-ahead log; after a crash (or a failover to a standby) the table is empty,
-- which only makes every bucket full again.
-- fillfactor 50: room on each page for the next version of its rows, so the update every
-- check makes stays a heap-only update (full_at is in no index).
CREATE UNLOGGED TABLE rate_limit_buckets (
    key     text PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 512),
    full_at timestamptz NOT NULL
) WITH (fillfactor = 50);

-- +goose Down
DROP TABLE rate_limit_buckets;
