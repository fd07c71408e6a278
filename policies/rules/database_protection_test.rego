package gantry.rules.database_protection_test

import data.gantry.rules.database_protection

# A database as the postgres template plans it.
database(actions, encrypted, retention) := {
	"address": "module.postgres.sandbox_database.this",
	"module_address": "module.postgres",
	"mode": "managed",
	"type": "sandbox_database",
	"name": "this",
	"provider_name": "portal.local/sandbox/sandbox",
	"change": {
		"actions": actions,
		"before": null,
		"after": {
			"name": "orders",
			"engine": "postgres",
			"engine_version": "16",
			"size": "small",
			"storage_gb": 20,
			"backup_retention_days": retention,
			"encrypted": encrypted,
			"labels": {"managed_by": "gantry", "template": "postgres"},
		},
		"after_unknown": {"id": true, "endpoint": true, "network_id": true, "subnet_id": true},
		"before_sensitive": false,
		"after_sensitive": {"labels": {}},
	},
}

in_tier(tier, changes) := {
	"plan": {"format_version": "1.2", "resource_changes": changes},
	"run": {"kind": "apply", "environment": {"name": tier, "tier": tier, "requires_approval": tier == "production"}},
}

test_allows_encrypted_backed_up_database_in_production if {
	count(database_protection.deny) == 0 with input as in_tier("production", [database(["create"], true, 7)])
}

test_allows_anything_in_development if {
	count(database_protection.deny) == 0 with input as in_tier("development", [database(["create"], false, 0)])
}

test_allows_untouched_database if {
	count(database_protection.deny) == 0 with input as in_tier("staging", [database(["no-op"], false, 1)])
}

test_denies_unencrypted_database_in_staging if {
	database_protection.deny == {"module.postgres.sandbox_database.this: the database must be encrypted (encrypted = true) in staging"} with input as in_tier("staging", [database(["create"], false, 14)])
}

test_denies_short_or_missing_retention_in_production if {
	database_protection.deny == {"module.postgres.sandbox_database.this: backup_retention_days must be at least 7 in production"} with input as in_tier("production", [database(["update"], true, 3)])
	count(database_protection.deny) == 2 with input as in_tier("production", [database(["delete", "create"], null, null)])
}
