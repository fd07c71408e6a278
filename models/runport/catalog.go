package runport

import "gantry/models/classify"

// Validated is a request's template inputs after the catalog checked them.
type Validated struct {
	Template     string
	Version      string
	ModuleDigest string
	Inputs       map[string]any // typed values, as the generated config gets them
	Display      map[string]any // the same with sensitive values masked: what is stored and shown
	// Sensitive are the values of the template's sensitive inputs (a subset of Inputs):
	// the generated config bundle only declares them, the run keeps them sealed
	// (models/run/variables.go) and its runner gets them as TF_VAR_ environment variables.
	Sensitive map[string]any
	// Runner is the executor the environment's jobs run on (set by run.Requests.Validate).
	Runner RunnerInfo
	// OrganizationID and EnvironmentID are where the run would be (set by
	// run.Requests.Validate with Runner): a template module that declares
	// gantry_organization_id or gantry_environment_id gets them (models/catalog).
	OrganizationID, EnvironmentID string
	// Modules are the archives of the allowlisted registry and https modules the
	// template calls, by source: fetched (or read from their store) and checked against
	// the allowlisted sha256 by run.Catalog.Modules before any transaction, so
	// generation, in one, only reads verified bytes.
	Modules map[string][]byte
}

// RunnerInfo names an executor and whether it only simulates.
type RunnerInfo struct {
	Name      string
	Simulated bool
}

// InputValue is one input of a template as a config bundle holds it (Value its JSON,
// Set false when the bundle has none), with its manifest's label, divergence kind and
// sensitivity.
type InputValue struct {
	Name, Label, Divergence string
	Sensitive               bool
	Value                   string
	Set                     bool
}

// TemplateFacts are a template's resource-type facts from its manifest, and its
// rollback notes.
type TemplateFacts struct {
	Version      string
	Source       string // "catalog": every template comes from the pinned catalog
	Irreversible []string
	OrgScoped    []string
	OrgPolicy    []string // the org-scoped types that are organization policies
	Prices       map[string]float64
	// Rollback are the manifest's rollback notes: how (and whether) a change rolls back.
	Rollback string
}

// ClassifyOptions are the facts the plan classifier needs.
func (f TemplateFacts) ClassifyOptions() classify.Options {
	return classify.Options{Irreversible: f.Irreversible, OrgScoped: f.OrgScoped}
}
