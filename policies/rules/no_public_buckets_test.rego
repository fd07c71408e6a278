package gantry.rules.no_public_buckets_test

import data.gantry.rules.no_public_buckets

bucket(actions, public) := {
	"address": "module.bucket.sandbox_bucket.this",
	"module_address": "module.bucket",
	"mode": "managed",
	"type": "sandbox_bucket",
	"name": "this",
	"provider_name": "portal.local/sandbox/sandbox",
	"change": {
		"actions": actions,
		"before": {"id": "bkt-1a2b3c4d", "name": "assets", "region": "eu-west", "public": false, "versioning": true, "retention_days": 30, "url": "https://assets.bucket.sandbox.internal", "labels": {"managed_by": "gantry", "template": "bucket"}},
		"after": {"id": "bkt-1a2b3c4d", "name": "assets", "region": "eu-west", "public": public, "versioning": true, "retention_days": 30, "url": "https://assets.bucket.sandbox.internal", "labels": {"managed_by": "gantry", "template": "bucket"}},
		"after_unknown": {},
		"before_sensitive": {"labels": {}},
		"after_sensitive": {"labels": {}},
	},
}

run := {"kind": "apply", "environment": {"tier": "staging", "requires_approval": false}}

test_allows_private_bucket if {
	count(no_public_buckets.deny) == 0 with input as {"plan": {"resource_changes": [bucket(["update"], false)]}, "run": run}
}

test_allows_unset_public if {
	count(no_public_buckets.deny) == 0 with input as {"plan": {"resource_changes": [bucket(["create"], null)]}, "run": run}
}

test_denies_bucket_made_public if {
	no_public_buckets.deny == {"module.bucket.sandbox_bucket.this: the bucket would be public (anonymous reads); set public = false"} with input as {
		"plan": {"resource_changes": [bucket(["update"], true)]},
		"run": run,
	}
}
