# Data residency: this organization keeps its resources in the EU regions.
package gantry.rules.allowed_regions

metadata := {
	"id": "allowed_regions",
	"title": "Resources stay in the allowed regions",
	"description": "A resource that is created, updated or replaced with a region must use eu-west or eu-central. The sandbox also offers us-east, which this organization's data residency rules out.",
	"enforcement": "hard_mandatory",
}

allowed := {"eu-west", "eu-central"}

deny contains msg if {
	some rc in input.plan.resource_changes
	region := rc.change.after.region
	is_string(region)
	not allowed[region]
	writes[rc.change.actions]
	msg := sprintf("%s: region %q is not allowed (allowed: eu-central, eu-west)", [rc.address, region])
}

# The actions of a create, an update and a replace (either order).
writes := {["create"], ["update"], ["delete", "create"], ["create", "delete"]}
