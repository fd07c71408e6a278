# Organization-scoped resources (policies, IAM) affect every workspace of the
# organization: they never change through self-service.
package gantry.rules.org_policy_changes_gated

metadata := {
	"id": "org_policy_changes_gated",
	"title": "Org-scoped changes need an approval-gated environment",
	"description": "A change to a resource whose type the template marks org-scoped (such as sandbox_org_policy) is refused unless the environment requires approval: never through self-service.",
	"enforcement": "hard_mandatory",
}

deny contains msg if {
	not input.run.environment.requires_approval == true
	some rc in input.plan.resource_changes
	rc.type in input.run.template.org_scoped_types
	does_something(rc.change.actions)
	msg := sprintf("%s: changes to the org-scoped %s need an environment that requires approval; %q does not", [rc.address, rc.type, input.run.environment.name])
}

does_something(actions) if {
	actions != ["no-op"]
	actions != ["read"]
}
