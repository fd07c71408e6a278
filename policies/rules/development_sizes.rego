# Development environments are for trying things: large machines there are usually
# a copy-paste from production and cost money nobody meant to spend.
package gantry.rules.development_sizes

metadata := {
	"id": "development_sizes",
	"title": "Development uses small or medium sizes",
	"description": "In development environments, a sandbox_instance or sandbox_database that is created, updated or replaced should be size small or medium, not large.",
	"enforcement": "advisory",
}

sized_types := {"sandbox_instance", "sandbox_database"}

allowed_sizes := {"small", "medium"}

deny contains msg if {
	input.run.environment.tier == "development"
	some rc in input.plan.resource_changes
	sized_types[rc.type]
	writes[rc.change.actions]
	size := rc.change.after.size
	is_string(size)
	not allowed_sizes[size]
	msg := sprintf("%s: size %q in a development environment; use small or medium", [rc.address, size])
}

# The actions of a create, an update and a replace (either order).
writes := {["create"], ["update"], ["delete", "create"], ["create", "delete"]}
