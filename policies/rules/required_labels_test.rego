package gantry.rules.required_labels_test

import data.gantry.rules.required_labels

# A bucket as the bucket template plans it (tofu show -json, resource_changes[]).
bucket(actions, labels) := {
	"address": "module.bucket.sandbox_bucket.this",
	"module_address": "module.bucket",
	"mode": "managed",
	"type": "sandbox_bucket",
	"name": "this",
	"provider_name": "portal.local/sandbox/sandbox",
	"change": {
		"actions": actions,
		"before": null,
		"after": {
			"name": "team-data",
			"region": "eu-west",
			"versioning": true,
			"retention_days": 30,
			"public": false,
			"labels": labels,
		},
		"after_unknown": {"id": true, "url": true},
		"before_sensitive": false,
		"after_sensitive": {"labels": {}},
	},
}

subnet := {
	"address": "module.network.sandbox_subnet.this[0]",
	"module_address": "module.network",
	"mode": "managed",
	"type": "sandbox_subnet",
	"name": "this",
	"index": 0,
	"provider_name": "portal.local/sandbox/sandbox",
	"change": {
		"actions": ["create"],
		"before": null,
		"after": {"name": "core-0", "cidr": "10.20.0.0/24"},
		"after_unknown": {"id": true, "network_id": true},
		"before_sensitive": false,
		"after_sensitive": {},
	},
}

run := {"kind": "apply", "environment": {"tier": "development", "requires_approval": false}}

plan(changes) := {"format_version": "1.2", "terraform_version": "1.10.10", "resource_changes": changes}

test_allows_labelled_bucket if {
	count(required_labels.deny) == 0 with input as {
		"plan": plan([bucket(["create"], {"managed_by": "gantry", "template": "bucket"})]),
		"run": run,
	}
}

test_allows_unlabelled_types_and_unchanged_resources if {
	count(required_labels.deny) == 0 with input as {
		"plan": plan([subnet, bucket(["no-op"], null), bucket(["delete"], null)]),
		"run": run,
	}
}

test_allows_label_known_after_apply if {
	change := object.union(bucket(["create"], {"managed_by": "gantry"}), {"change": {"after_unknown": {"labels": {"template": true}}}})
	count(required_labels.deny) == 0 with input as {"plan": plan([change]), "run": run}
}

test_denies_bucket_without_labels if {
	required_labels.deny == {
		`module.bucket.sandbox_bucket.this: the label "managed_by" is missing or empty (required: managed_by, template)`,
		`module.bucket.sandbox_bucket.this: the label "template" is missing or empty (required: managed_by, template)`,
	} with input as {"plan": plan([bucket(["create"], null)]), "run": run}
}

test_denies_replace_with_empty_template_label if {
	required_labels.deny == {`module.bucket.sandbox_bucket.this: the label "template" is missing or empty (required: managed_by, template)`} with input as {
		"plan": plan([bucket(["delete", "create"], {"managed_by": "gantry", "template": ""})]),
		"run": run,
	}
}
