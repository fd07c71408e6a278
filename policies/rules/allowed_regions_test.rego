package gantry.rules.allowed_regions_test

import data.gantry.rules.allowed_regions

network(actions, region) := {
	"address": "module.network.sandbox_network.this",
	"module_address": "module.network",
	"mode": "managed",
	"type": "sandbox_network",
	"name": "this",
	"provider_name": "portal.local/sandbox/sandbox",
	"change": {
		"actions": actions,
		"before": null,
		"after": {
			"name": "core",
			"cidr": "10.20.0.0/16",
			"region": region,
			"labels": {"managed_by": "gantry", "template": "network"},
		},
		"after_unknown": {"id": true},
		"before_sensitive": false,
		"after_sensitive": {"labels": {}},
	},
}

run := {"kind": "apply", "environment": {"tier": "production", "requires_approval": true}}

plan(changes) := {"format_version": "1.2", "resource_changes": changes}

test_allows_eu_regions if {
	count(allowed_regions.deny) == 0 with input as {
		"plan": plan([network(["create"], "eu-west"), network(["update"], "eu-central")]),
		"run": run,
	}
}

test_allows_unset_region_and_untouched_us_resource if {
	count(allowed_regions.deny) == 0 with input as {
		"plan": plan([network(["create"], null), network(["no-op"], "us-east")]),
		"run": run,
	}
}

test_denies_us_east if {
	allowed_regions.deny == {`module.network.sandbox_network.this: region "us-east" is not allowed (allowed: eu-central, eu-west)`} with input as {
		"plan": plan([network(["create"], "us-east")]),
		"run": run,
	}
}

test_denies_replace_into_us_east if {
	count(allowed_regions.deny) == 1 with input as {
		"plan": plan([network(["delete", "create"], "us-east")]),
		"run": run,
	}
}
