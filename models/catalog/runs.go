package catalog

import (
	"gantry/models/bundle"
	"gantry/models/run"
)

// ForRuns adapts the catalog to what requesting a run needs (run.Catalog).
func ForRuns(c *Catalog) run.Catalog { return runCatalog{c} }

type runCatalog struct{ c *Catalog }

// masked stands in for a sensitive value wherever inputs are stored or shown.
const masked = "(sensitive)"

func (rc runCatalog) Validate(name string, raw map[string]string) (run.Validated, error) {
	e, err := rc.c.Get(name)
	if err != nil {
		return run.Validated{}, err
	}
	values, v := e.Template.ValidateInputs(raw)
	if v != nil {
		return run.Validated{}, v
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
	return run.Validated{Template: e.Template.Name, Version: e.Template.Version, ModuleDigest: e.ModuleDigest, Inputs: values, Display: display,
		Sensitive: sensitive}, nil
}

func (rc runCatalog) Generate(v run.Validated, workspaceID, stateAddress string) (bundle.Bundle, error) {
	e, err := rc.c.Get(v.Template)
	if err != nil {
		return bundle.Bundle{}, err
	}
	return e.Generate(GenerateInput{WorkspaceID: workspaceID, Inputs: v.Inputs, StateAddress: stateAddress})
}

func (rc runCatalog) Facts(name string) (run.TemplateFacts, error) {
	e, err := rc.c.Get(name)
	if err != nil {
		return run.TemplateFacts{}, err
	}
	t := e.Template
	return run.TemplateFacts{Version: t.Version, Source: "catalog", Irreversible: t.Irreversible, OrgScoped: t.OrgScoped, OrgPolicy: t.OrgPolicy, Prices: t.Prices}, nil
}

func (rc runCatalog) Secrets(name string, config []byte) []string { return rc.c.Secrets(name, config) }

func (rc runCatalog) Inputs(name string, config []byte, sealed map[string]any) ([]run.InputValue, error) {
	return rc.c.Inputs(name, config, sealed)
}
