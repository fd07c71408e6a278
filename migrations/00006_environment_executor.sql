-- Why: the executor that runs an environment's jobs is chosen per environment (mock,
-- a plain process for development, or runc containers); "default" is the deployment's.

-- +goose Up
ALTER TABLE environments
    ADD COLUMN executor text NOT NULL DEFAULT 'default'
        CHECK (executor IN ('default', 'mock', 'tofu/process', 'tofu/oci'));

-- +goose Down
SELECT 1;
