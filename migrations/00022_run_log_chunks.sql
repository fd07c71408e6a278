-- Why: a phase's log is watched while it runs, from any replica: its output is stored as it arrives, masked and sealed in chunks, and announced (NOTIFY gantry_run_log) to the pages streaming it.

-- +goose Up
-- One chunk of the live log of one phase of a run: masked text (no secret is ever
-- in it), sealed like an artifact (a data key per chunk wrapped by the keyring's key
-- key_id; the associated data names organization, run, phase and seq, so a chunk
-- cannot be moved or reordered). seq counts from 1 in each phase, without gaps: a
-- reconnecting page resumes after the last one it got. The phase's whole log is still
-- stored as an artifact when the phase ends: that is the evidence, these are the view.
CREATE TABLE run_log_chunks (
    organization_id text NOT NULL,
    run_id          text NOT NULL,
    phase           text NOT NULL CHECK (phase IN ('plan', 'apply', 'verify')),
    seq             integer NOT NULL CHECK (seq > 0),
    key_id          text NOT NULL,
    wrapped_key     bytea NOT NULL,
    nonce           bytea NOT NULL,
    ciphertext      bytea NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, run_id, phase, seq),
    FOREIGN KEY (organization_id, run_id) REFERENCES runs (organization_id, id)
);

-- +goose Down
DROP TABLE run_log_chunks;
