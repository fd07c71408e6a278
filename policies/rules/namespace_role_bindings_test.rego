package gantry.rules.namespace_role_bindings_test

import data.gantry.rules.namespace_role_bindings

# The team namespace template's role binding as tofu plans it (provider
# hashicorp/kubernetes 1.13.4; see models/classify/testdata/team_namespace_regroup.json).
binding(actions, role, group) := {
	"address": "module.team-namespace.kubernetes_role_binding.team",
	"module_address": "module.team-namespace",
	"mode": "managed",
	"type": "kubernetes_role_binding",
	"name": "team",
	"provider_name": "registry.opentofu.org/hashicorp/kubernetes",
	"change": {
		"actions": actions,
		"before": null,
		"after": {
			"metadata": [{"name": "team-edit", "namespace": "team-a", "labels": {"app.kubernetes.io/managed-by": "gantry"}}],
			"role_ref": [{"api_group": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}],
			"subject": [{"api_group": "rbac.authorization.k8s.io", "kind": "Group", "name": group, "namespace": "default"}],
		},
		"after_unknown": {"id": true},
		"before_sensitive": false,
		"after_sensitive": {"metadata": [{"labels": {}}], "role_ref": [{}], "subject": [{}]},
	},
}

with_role_kind(rc, kind) := object.union(rc, {"change": {"after": {"role_ref": [{"api_group": "rbac.authorization.k8s.io", "kind": kind, "name": "deployer"}]}}})

in_plan(changes) := {
	"plan": {"format_version": "1.2", "resource_changes": changes},
	"run": {"kind": "apply", "environment": {"name": "development", "tier": "development", "requires_approval": false}},
}

test_allows_edit_and_view_for_a_team_group if {
	count(namespace_role_bindings.deny) == 0 with input as in_plan([
		binding(["create"], "edit", "team-a"),
		binding(["update"], "view", "team-b"),
	])
}

test_allows_a_role_of_the_namespace if {
	count(namespace_role_bindings.deny) == 0 with input as in_plan([with_role_kind(binding(["create"], "ignored", "team-a"), "Role")])
}

test_allows_removing_any_binding if {
	count(namespace_role_bindings.deny) == 0 with input as in_plan([
		binding(["delete"], "cluster-admin", "system:authenticated"),
		binding(["no-op"], "admin", "team-a"),
	])
}

test_denies_admin_roles if {
	namespace_role_bindings.deny == {`module.team-namespace.kubernetes_role_binding.team: binds the ClusterRole "cluster-admin"; a namespace grant binds the ClusterRole edit or view, or a Role of the namespace`} with input as in_plan([binding(["delete", "create"], "cluster-admin", "team-a")])
}

test_denies_kubernetes_own_groups if {
	namespace_role_bindings.deny == {`module.team-namespace.kubernetes_role_binding.team: grants to the Group "system:authenticated", which Kubernetes itself defines; name the team's own group`} with input as in_plan([binding(["update"], "edit", "system:authenticated")])
}
