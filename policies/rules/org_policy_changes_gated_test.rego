package gantry.rules.org_policy_changes_gated_test

import data.gantry.rules.org_policy_changes_gated

policy(actions) := {
	"address": "module.guardrails.sandbox_org_policy.this",
	"module_address": "module.guardrails",
	"mode": "managed",
	"type": "sandbox_org_policy",
	"name": "this",
	"provider_name": "portal.local/sandbox/sandbox",
	"change": {
		"actions": actions,
		"before": {"id": "pol-1a2b3c4d", "name": "tagging", "rules": ["require owner"]},
		"after": {"id": "pol-1a2b3c4d", "name": "tagging", "rules": ["require owner", "require cost_center"]},
		"after_unknown": {},
		"before_sensitive": {"rules": [false]},
		"after_sensitive": {"rules": [false, false]},
	},
}

in_env(requires_approval, changes) := {
	"plan": {"format_version": "1.2", "resource_changes": changes},
	"run": {
		"kind": "apply",
		"environment": {"name": "shared", "tier": "production", "requires_approval": requires_approval},
		"template": {"name": "guardrails", "irreversible_types": [], "org_scoped_types": ["sandbox_org_policy"]},
	},
}

test_allows_org_policy_change_in_approval_gated_environment if {
	count(org_policy_changes_gated.deny) == 0 with input as in_env(true, [policy(["update"])])
}

test_allows_untouched_org_policy_in_self_service if {
	count(org_policy_changes_gated.deny) == 0 with input as in_env(false, [policy(["no-op"])])
}

test_denies_org_policy_change_through_self_service if {
	org_policy_changes_gated.deny == {`module.guardrails.sandbox_org_policy.this: changes to the org-scoped sandbox_org_policy need an environment that requires approval; "shared" does not`} with input as in_env(false, [policy(["update"])])
}

test_denies_org_policy_delete_through_self_service if {
	count(org_policy_changes_gated.deny) == 1 with input as in_env(false, [policy(["delete"])])
}
