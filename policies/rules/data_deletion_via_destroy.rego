# Deleting a data-bearing resource loses its data. That must be a deliberate destroy
# run (owner approval, typed confirmation), never a side effect of an apply whose
# configuration happened to drop the resource.
package gantry.rules.data_deletion_via_destroy

metadata := {
	"id": "data_deletion_via_destroy",
	"title": "Data-bearing resources are deleted only by destroy runs",
	"description": "Deleting a resource whose type the template marks irreversible (data-bearing) is allowed only in a destroy run. An apply that would delete one is refused.",
	"enforcement": "hard_mandatory",
}

deny contains msg if {
	not destroy_run
	some rc in input.plan.resource_changes
	rc.change.actions == ["delete"]
	rc.type in input.run.template.irreversible_types
	msg := sprintf("%s: deleting a data-bearing %s loses its data; only a destroy run may delete it (run kind: %s)", [rc.address, rc.type, input.run.kind])
}

destroy_run if input.run.kind == "destroy"
