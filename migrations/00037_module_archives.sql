-- Why: Gantry fetches each allowlisted registry or https module itself, once, and keeps its archive by sha256 (issue 39), so runners need no network and every replica shares one copy.

-- +goose Up
-- One row per archive ever fetched, keyed by its sha256 ("sha256:<hex>"), which the
-- allowlist pins: a read checks the content against it again (models/modules). The
-- package and version say what it was fetched as, location where from (without its
-- query, which may be a signed URL's credentials). Modules are code a platform team
-- shares, not secrets: the config bundles that embed them are the encrypted artifacts.
CREATE TABLE module_archives (
    sha256     text PRIMARY KEY CHECK (sha256 ~ '^sha256:[0-9a-f]{64}$'),
    package    text NOT NULL CHECK (length(package) BETWEEN 1 AND 500),
    version    text NOT NULL DEFAULT '' CHECK (length(version) <= 100),
    location   text NOT NULL CHECK (length(location) BETWEEN 1 AND 2000),
    size       integer NOT NULL CHECK (size = octet_length(content) AND size BETWEEN 1 AND 8388608),
    content    bytea NOT NULL,
    fetched_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE module_archives;
