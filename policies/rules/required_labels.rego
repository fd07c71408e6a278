# Every labelled resource the run creates, updates or replaces says who manages it
# and which template made it, so inventory, cost and audit can trace it back.
package gantry.rules.required_labels

metadata := {
	"id": "required_labels",
	"title": "Resources carry the managed_by and template labels",
	"description": "Every sandbox_network, sandbox_bucket and sandbox_database that is created, updated or replaced must carry the labels managed_by and template (non-empty), so inventory, cost reports and audits can trace it to Gantry and its template. (sandbox_instance has no labels attribute, so it is not checked.)",
	"enforcement": "soft_mandatory",
}

# The types with a labels attribute (sandbox/api/kinds.go).
labelled_types := {"sandbox_network", "sandbox_bucket", "sandbox_database"}

required := ["managed_by", "template"]

deny contains msg if {
	some rc in input.plan.resource_changes
	labelled_types[rc.type]
	writes[rc.change.actions]
	some key in required
	not has_label(rc.change, key)
	msg := sprintf("%s: the label %q is missing or empty (required: managed_by, template)", [rc.address, key])
}

# create, update and both orders of replace.
# The actions of a create, an update and a replace (either order).
writes := {["create"], ["update"], ["delete", "create"], ["create", "delete"]}

has_label(change, key) if {
	value := change.after.labels[key]
	is_string(value)
	value != ""
}

# Known only after apply (computed from another resource): present, value unknown.
has_label(change, key) if change.after_unknown.labels[key] == true
