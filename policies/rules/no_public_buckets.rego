# Buckets hold data; anonymous reads are how data leaks.
package gantry.rules.no_public_buckets

metadata := {
	"id": "no_public_buckets",
	"title": "Buckets are never public",
	"description": "A sandbox_bucket that is created, updated or replaced must not set public = true (anonymous reads).",
	"enforcement": "hard_mandatory",
}

deny contains msg if {
	some rc in input.plan.resource_changes
	rc.type == "sandbox_bucket"
	writes[rc.change.actions]
	rc.change.after.public == true
	msg := sprintf("%s: the bucket would be public (anonymous reads); set public = false", [rc.address])
}

# The actions of a create, an update and a replace (either order).
writes := {["create"], ["update"], ["delete", "create"], ["create", "delete"]}
