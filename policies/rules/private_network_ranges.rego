# Networks use private (RFC 1918) address ranges, so they can be peered and routed
# without clashing with public addresses.
package gantry.rules.private_network_ranges

metadata := {
	"id": "private_network_ranges",
	"title": "Networks use private address ranges",
	"description": "A sandbox_network that is created, updated or replaced should use a range inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16 (RFC 1918).",
	"enforcement": "advisory",
}

private_ranges := ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]

deny contains msg if {
	some rc in input.plan.resource_changes
	rc.type == "sandbox_network"
	writes[rc.change.actions]
	cidr := rc.change.after.cidr
	is_string(cidr)
	not private(cidr)
	msg := sprintf("%s: range %s is not private (use 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16)", [rc.address, cidr])
}

private(cidr) if {
	some r in private_ranges
	net.cidr_contains(r, cidr)
}

# The actions of a create, an update and a replace (either order).
writes := {["create"], ["update"], ["delete", "create"], ["create", "delete"]}
