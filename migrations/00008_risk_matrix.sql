-- Why: the risk rules and approval matrix are data owned by each organization (DESIGN §3):
-- owners edit them, and every edit is a new, immutable version that runs can name.

-- +goose Up
-- One row per saved version. No row for an organization means it uses the built-in default
-- (version 0). A version is never changed or removed: a run's evidence names the version
-- that classified it, and the history page shows who changed what, when and why.
CREATE TABLE risk_matrix_versions (
    organization_id text NOT NULL REFERENCES organizations (id),
    version         integer NOT NULL CHECK (version > 0),
    matrix          jsonb NOT NULL CHECK (jsonb_typeof(matrix) = 'object'),
    comment         text NOT NULL DEFAULT '' CHECK (length(comment) <= 500),
    -- NULL when Gantry itself saved the version (the system subject is no user).
    created_by      text REFERENCES users (id),
    created_by_name text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, version)
);

-- +goose StatementBegin
CREATE FUNCTION risk_matrix_versions_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'risk_matrix_versions is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER risk_matrix_versions_no_update_delete
    BEFORE UPDATE OR DELETE ON risk_matrix_versions
    FOR EACH ROW EXECUTE FUNCTION risk_matrix_versions_immutable();
CREATE TRIGGER risk_matrix_versions_no_truncate
    BEFORE TRUNCATE ON risk_matrix_versions
    FOR EACH STATEMENT EXECUTE FUNCTION risk_matrix_versions_immutable();

-- +goose Down
-- Forward-only: Gantry never migrates down.
SELECT 1;
