# Production runs only vetted, pinned catalog templates.
package gantry.rules.catalog_only_production

metadata := {
	"id": "catalog_only_production",
	"title": "Production uses pinned catalog templates only",
	"description": "In production environments the run's template must come from the catalog (source catalog) with a pinned module digest.",
	"enforcement": "hard_mandatory",
}

deny contains msg if {
	input.run.environment.tier == "production"
	not from_catalog
	msg := sprintf("template %q comes from %q; production accepts catalog templates only", [input.run.template.name, input.run.template.source])
}

deny contains msg if {
	input.run.environment.tier == "production"
	not pinned
	msg := sprintf("template %q has no pinned module digest; production accepts pinned templates only", [input.run.template.name])
}

from_catalog if input.run.template.source == "catalog"

pinned if {
	is_string(input.run.template.module_digest)
	input.run.template.module_digest != ""
}
