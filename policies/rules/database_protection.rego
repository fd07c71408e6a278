# Databases outside development hold data someone cares about: encrypt them and keep
# a week of backups.
package gantry.rules.database_protection

metadata := {
	"id": "database_protection",
	"title": "Staging and production databases are encrypted and backed up",
	"description": "In staging and production environments, a sandbox_database that is created, updated or replaced must have encrypted = true and backup_retention_days of at least 7.",
	"enforcement": "soft_mandatory",
}

protected_tiers := {"staging", "production"}

min_retention := 7

deny contains msg if {
	some rc in changed_databases
	not encrypted(rc.change.after)
	msg := sprintf("%s: the database must be encrypted (encrypted = true) in %s", [rc.address, input.run.environment.tier])
}

deny contains msg if {
	some rc in changed_databases
	not retention_ok(rc.change.after)
	msg := sprintf("%s: backup_retention_days must be at least %d in %s", [rc.address, min_retention, input.run.environment.tier])
}

changed_databases contains rc if {
	protected_tiers[input.run.environment.tier]
	some rc in input.plan.resource_changes
	rc.type == "sandbox_database"
	writes[rc.change.actions]
}

encrypted(after) if after.encrypted == true

retention_ok(after) if after.backup_retention_days >= min_retention

# The actions of a create, an update and a replace (either order).
writes := {["create"], ["update"], ["delete", "create"], ["create", "delete"]}
