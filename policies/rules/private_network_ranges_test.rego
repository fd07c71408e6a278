package gantry.rules.private_network_ranges_test

import data.gantry.rules.private_network_ranges

network(actions, cidr) := {
	"address": "module.network.sandbox_network.this",
	"module_address": "module.network",
	"mode": "managed",
	"type": "sandbox_network",
	"name": "this",
	"provider_name": "portal.local/sandbox/sandbox",
	"change": {
		"actions": actions,
		"before": null,
		"after": {"name": "core", "cidr": cidr, "region": "eu-west", "labels": {"managed_by": "gantry", "template": "network"}},
		"after_unknown": {"id": true},
		"before_sensitive": false,
		"after_sensitive": {"labels": {}},
	},
}

with_networks(changes) := {
	"plan": {"format_version": "1.2", "resource_changes": changes},
	"run": {"kind": "apply", "environment": {"tier": "development"}},
}

test_allows_rfc1918_ranges if {
	count(private_network_ranges.deny) == 0 with input as with_networks([
		network(["create"], "10.20.0.0/16"),
		network(["create"], "172.16.4.0/22"),
		network(["update"], "192.168.10.0/24"),
	])
}

test_denies_public_range if {
	private_network_ranges.deny == {"module.network.sandbox_network.this: range 100.64.0.0/16 is not private (use 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16)"} with input as with_networks([network(["create"], "100.64.0.0/16")])
}

test_denies_range_straddling_a_private_block if {
	count(private_network_ranges.deny) == 1 with input as with_networks([network(["create"], "172.0.0.0/8")])
}
