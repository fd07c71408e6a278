package gantry.rules.catalog_only_production_test

import data.gantry.rules.catalog_only_production

run(tier, template) := {
	"plan": {"format_version": "1.2", "resource_changes": []},
	"run": {"kind": "apply", "environment": {"name": tier, "tier": tier}, "template": template},
}

catalog := {
	"name": "postgres",
	"version": "1.1.1",
	"source": "catalog",
	"module_digest": "9f2c1e0b7d4a5c3e8f6a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a",
	"irreversible_types": ["sandbox_database"],
	"org_scoped_types": [],
}

test_allows_pinned_catalog_template_in_production if {
	count(catalog_only_production.deny) == 0 with input as run("production", catalog)
}

test_allows_uploaded_template_in_staging if {
	count(catalog_only_production.deny) == 0 with input as run("staging", object.union(catalog, {"source": "upload", "module_digest": ""}))
}

test_denies_uploaded_template_in_production if {
	catalog_only_production.deny == {`template "postgres" comes from "upload"; production accepts catalog templates only`} with input as run("production", object.union(catalog, {"source": "upload"}))
}

test_denies_unpinned_template_in_production if {
	catalog_only_production.deny == {`template "postgres" has no pinned module digest; production accepts pinned templates only`} with input as run("production", object.union(catalog, {"module_digest": ""}))
}
