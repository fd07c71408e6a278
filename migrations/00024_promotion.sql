-- Why: promotion takes a workspace to the next environment of its organization's order (configurable per environment, by tier unless an admin says otherwise), and the promoted run records the run it was promoted from.

-- +goose Up
ALTER TABLE environments ADD COLUMN promotion_order integer NOT NULL DEFAULT 1;
UPDATE environments SET promotion_order = CASE tier WHEN 'development' THEN 1 WHEN 'staging' THEN 2 ELSE 3 END;
ALTER TABLE environments ADD CONSTRAINT environments_promotion_order CHECK (promotion_order BETWEEN 1 AND 99);
ALTER TABLE runs ADD COLUMN promoted_from_run_id text REFERENCES runs (id);

-- +goose Down
ALTER TABLE runs DROP COLUMN promoted_from_run_id;
ALTER TABLE environments DROP CONSTRAINT environments_promotion_order, DROP COLUMN promotion_order;
