package catalog

import (
	"context"
	"fmt"

	"gantry/models/bundle"
	"gantry/models/errs"
	"gantry/models/runport"
)

// ForRuns adapts the catalog to what requesting a run needs (run.Catalog, which the
// composition root hands it to: the catalog does not import models/run). It fetches
// no module: see WithArchives.
func ForRuns(c *Catalog) RunCatalog { return RunCatalog{c: c} }

// RunCatalog is the catalog as requesting a run sees it.
type RunCatalog struct {
	c        *Catalog
	archives Archives
}

// Archives hands over the archive of an allowlisted module (models/modules fetches it
// once, keeps it by its sha256 and checks it at every read).
type Archives interface {
	// Archive returns the archive of the module package pkg (a source without its
	// //subdir) at version ("" for an https archive), refusing any whose sha256 is not
	// sum ("sha256:<hex>"). It may use the network: never call it in a transaction.
	Archive(ctx context.Context, pkg, version, sum string) ([]byte, error)
}

// WithArchives is rc fetching the allowlisted modules templates call from a.
func (rc RunCatalog) WithArchives(a Archives) RunCatalog {
	rc.archives = a
	return rc
}

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
		Inputs: v.Inputs, StateAddress: stateAddress, Modules: v.Modules})
}

// Modules fetches (or reads from the store) the archive of every allowlisted module
// template name calls that the catalog does not ship vendored, and assembles the
// template with them as generation will. A module that cannot be had or used (an
// archive whose sha256 is not the allowlisted one, an unreachable registry, an
// archive breaking the rules) makes the template unusable for now: a message on the
// "template" field, naming the module and why, so nothing is requested.
func (rc RunCatalog) Modules(ctx context.Context, name string) (map[string][]byte, error) {
	e, err := rc.c.Get(name)
	if err != nil || len(e.module.remote) == 0 {
		return nil, err
	}
	refuse := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		v := &errs.Validation{}
		v.Add("template", fmt.Sprintf("Template %s cannot be used now: %v.", name, err))
		return v
	}
	out := map[string][]byte{}
	for _, c := range e.module.remote {
		allowed := e.allowlist[c.source]
		if _, done := out[c.source]; done || allowed.vendored != nil {
			continue
		}
		if rc.archives == nil {
			return nil, refuse(fmt.Errorf("module %s must be fetched, and this Gantry fetches no modules", c.source))
		}
		pkg, _ := splitSubdir(c.source)
		data, err := rc.archives.Archive(ctx, pkg, allowed.Version, allowed.SHA256)
		if err != nil {
			return nil, refuse(err)
		}
		out[c.source] = data
	}
	if _, _, err := e.assemble(out); err != nil {
		return nil, refuse(err)
	}
	return out, nil
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
