package gantry.rules.development_sizes_test

import data.gantry.rules.development_sizes

instance(actions, size) := {
	"address": "sandbox_instance.app[0]",
	"mode": "managed",
	"type": "sandbox_instance",
	"name": "app",
	"index": 0,
	"provider_name": "portal.local/sandbox/sandbox",
	"change": {
		"actions": actions,
		"before": null,
		"after": {"name": "app-0", "size": size, "image": "debian-12", "subnet_id": "subnet-1a2b3c4d"},
		"after_unknown": {"id": true, "private_ip": true},
		"before_sensitive": false,
		"after_sensitive": {},
	},
}

in_tier(tier, changes) := {
	"plan": {"format_version": "1.2", "resource_changes": changes},
	"run": {"kind": "apply", "environment": {"tier": tier}},
}

test_allows_small_and_medium_in_development if {
	count(development_sizes.deny) == 0 with input as in_tier("development", [instance(["create"], "small"), instance(["update"], "medium")])
}

test_allows_large_in_production if {
	count(development_sizes.deny) == 0 with input as in_tier("production", [instance(["create"], "large")])
}

test_denies_large_in_development if {
	development_sizes.deny == {`sandbox_instance.app[0]: size "large" in a development environment; use small or medium`} with input as in_tier("development", [instance(["create"], "large")])
}
