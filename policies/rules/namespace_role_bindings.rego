# A role binding in a namespace hands people power over what runs there. It may hand
# out the edit or view role (or a role of the namespace itself), never the roles that
# grant access on (admin, cluster-admin), and never to a group or user of Kubernetes
# itself: binding system:authenticated would give every signed-in identity the role.
package gantry.rules.namespace_role_bindings

metadata := {
	"id": "namespace_role_bindings",
	"title": "Namespace role bindings grant edit or view to named subjects",
	"description": "A kubernetes_role_binding that is created, updated or replaced binds either a Role of its namespace or the ClusterRole edit or view (not admin or cluster-admin, which let the grantee grant access), and none of its subjects is a group or user of Kubernetes itself (a name starting with system:).",
	"enforcement": "soft_mandatory",
}

# The cluster roles a namespace grant may bind.
grantable := {"edit", "view"}

deny contains msg if {
	some rc in input.plan.resource_changes
	rc.type == "kubernetes_role_binding"
	writes[rc.change.actions]
	some ref in rc.change.after.role_ref
	ref.kind != "Role"
	not grantable[ref.name]
	msg := sprintf("%s: binds the %s %q; a namespace grant binds the ClusterRole edit or view, or a Role of the namespace", [rc.address, ref.kind, ref.name])
}

deny contains msg if {
	some rc in input.plan.resource_changes
	rc.type == "kubernetes_role_binding"
	writes[rc.change.actions]
	some subject in rc.change.after.subject
	startswith(subject.name, "system:")
	msg := sprintf("%s: grants to the %s %q, which Kubernetes itself defines; name the team's own group", [rc.address, subject.kind, subject.name])
}

# The actions of a create, an update and a replace (either order).
writes := {["create"], ["update"], ["delete", "create"], ["create", "delete"]}
