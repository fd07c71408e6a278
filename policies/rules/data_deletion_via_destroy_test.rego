package gantry.rules.data_deletion_via_destroy_test

import data.gantry.rules.data_deletion_via_destroy

deleted(address, type) := {
	"address": address,
	"mode": "managed",
	"type": type,
	"name": "this",
	"provider_name": "portal.local/sandbox/sandbox",
	"change": {
		"actions": ["delete"],
		"before": {"id": "db-1a2b3c4d", "name": "orders"},
		"after": null,
		"after_unknown": {},
		"before_sensitive": {},
		"after_sensitive": false,
	},
	"action_reason": "delete_because_no_resource_config",
}

with_kind(kind, changes) := {
	"plan": {"format_version": "1.2", "resource_changes": changes},
	"run": {
		"kind": kind,
		"environment": {"tier": "production"},
		"template": {"name": "postgres", "irreversible_types": ["sandbox_database"], "org_scoped_types": []},
	},
}

test_allows_destroy_run_deleting_a_database if {
	count(data_deletion_via_destroy.deny) == 0 with input as with_kind("destroy", [deleted("module.postgres.sandbox_database.this", "sandbox_database")])
}

test_allows_apply_deleting_a_reversible_resource if {
	count(data_deletion_via_destroy.deny) == 0 with input as with_kind("apply", [deleted("module.postgres.sandbox_subnet.this", "sandbox_subnet")])
}

test_denies_apply_deleting_a_database if {
	data_deletion_via_destroy.deny == {"module.postgres.sandbox_database.this: deleting a data-bearing sandbox_database loses its data; only a destroy run may delete it (run kind: apply)"} with input as with_kind("apply", [deleted("module.postgres.sandbox_database.this", "sandbox_database")])
}

test_denies_plan_only_deleting_a_database if {
	count(data_deletion_via_destroy.deny) == 1 with input as with_kind("plan_only", [deleted("module.postgres.sandbox_database.this", "sandbox_database")])
}
