package catalog

import (
	"gantry/models/bundle"
	"gantry/models/runport"
)

// ForRuns adapts the catalog to what requesting a run needs (run.Catalog, which the
// composition root hands it to: the catalog does not import models/run).
func ForRuns(c *Catalog) RunCatalog { return RunCatalog{c} }

// RunCatalog is the catalog as requesting a run sees it.
type RunCatalog struct{ c *Catalog }

// masked stands in for a sensitive value wherever inputs are stored or shown.
const masked = "(sensitive)"

func (rc RunCatalog) Validate(name string, raw map[string]string) (runport.Validated, error) {
	e, err := rc.c.Get(name)
	if err != nil {
		return runport.Validated{}, err
	}
	values, v := e.Template.ValidateInputs(raw)
	if v != nil {
		return runport.Validated{}, v
	}
	display := make(map[string]any, len(values))
	var sensitive map[string]any
	for _, in := range e.Template.Inputs {
		val, ok := values[in.Name]
		if !ok {
			continue
		}
		if in.Sensitive {
			if sensitive == nil {
				sensitive = map[string]any{}
			}
			sensitive[in.Name] = val
			val = masked
		}
		display[in.Name] = val
	}
	return runport.Validated{Template: e.Template.Name, Version: e.Template.Version, ModuleDigest: e.ModuleDigest, Inputs: values, Display: display,
		Sensitive: sensitive}, nil
}

func (rc RunCatalog) Generate(v runport.Validated, workspaceID, stateAddress string) (bundle.Bundle, error) {
	e, err := rc.c.Get(v.Template)
	if err != nil {
		return bundle.Bundle{}, err
	}
	return e.Generate(GenerateInput{WorkspaceID: workspaceID, EnvironmentID: v.EnvironmentID, OrganizationID: v.OrganizationID,
		Inputs: v.Inputs, StateAddress: stateAddress})
}

func (rc RunCatalog) Facts(name string) (runport.TemplateFacts, error) {
	e, err := rc.c.Get(name)
	if err != nil {
		return runport.TemplateFacts{}, err
	}
	t := e.Template
	return runport.TemplateFacts{Version: t.Version, Source: "catalog", Irreversible: t.Irreversible, OrgScoped: t.OrgScoped, OrgPolicy: t.OrgPolicy, Prices: t.Prices,
		Rollback: t.Rollback}, nil
}

func (rc RunCatalog) Secrets(name string, config []byte) []string { return rc.c.Secrets(name, config) }

func (rc RunCatalog) Inputs(name string, config []byte, sealed map[string]any) ([]runport.InputValue, error) {
	return rc.c.Inputs(name, config, sealed)
}
