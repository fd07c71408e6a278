package catalog

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"gantry/models/bundle"
	"gantry/models/runport"
)

// Secrets reads back, from a config bundle Generate wrote for template name before
// sensitive inputs were sealed with their run (models/run/variables.go), the values of
// the template's sensitive inputs it holds as literals: what a run's live log masks
// besides the sealed values. A bundle generated since holds none (only var.<name>). A
// template the catalog no longer offers says nothing of which inputs were sensitive,
// so all of its literal arguments count as secrets: masking too much garbles a log,
// too little would leak. A bundle that does not read has nothing to mask (no runner
// gets far enough with it to print anything).
//
// String values are returned, and the decimal text of numbers; a bool has too few
// values for masking its text to hide anything, and masking every "true" would only
// garble the log.
func (c *Catalog) Secrets(name string, config []byte) []string {
	var sensitive map[string]bool // nil: every argument
	if e, err := c.Get(name); err == nil {
		sensitive = map[string]bool{}
		for _, in := range e.Template.Inputs {
			if in.Sensitive {
				sensitive[in.Name] = true
			}
		}
		if len(sensitive) == 0 {
			return nil
		}
	}
	args := bundleArguments(config, name, sensitive == nil)
	var out []string
	for argName, v := range args {
		if sensitive != nil && !sensitive[argName] {
			continue
		}
		switch v.Type() {
		case cty.String:
			out = append(out, v.AsString())
		case cty.Number:
			out = append(out, v.AsBigFloat().Text('f', -1))
		}
	}
	return out
}

// bundleArguments are the literal arguments (source aside) Generate wrote into a config
// bundle's module block for template name (of every module block, when any). A bundle
// that does not read has none.
func bundleArguments(config []byte, name string, any bool) map[string]cty.Value {
	out := map[string]cty.Value{}
	b, err := bundle.FromTar(config)
	if err != nil {
		return out
	}
	f, diags := hclsyntax.ParseConfig(b.Files["main.tf"], "main.tf", hcl.InitialPos)
	if diags.HasErrors() {
		return out
	}
	for _, blk := range f.Body.(*hclsyntax.Body).Blocks {
		if blk.Type != "module" || len(blk.Labels) != 1 || (!any && blk.Labels[0] != name) {
			continue
		}
		for argName, attr := range blk.Body.Attributes {
			if argName == "source" || isContextVariable(argName) {
				continue // ids Gantry set, no person's input
			}
			// Generate writes literals only: a value that needs an evaluation context
			// is not one of its arguments.
			v, diags := attr.Expr.Value(nil)
			if diags.HasErrors() || v.IsNull() || !v.IsKnown() {
				continue
			}
			out[argName] = v
		}
	}
	return out
}

// Inputs are template name's inputs as config bundle config holds them (what a
// promotion compares), with what the manifest says of each. A sensitive input the
// bundle only declares (var.<name>) takes its value from sealed, the run's sealed
// values (validated: a string, float64 or bool), encoded as a literal would be, so an
// older bundle's literal and a sealed value compare alike.
func (c *Catalog) Inputs(name string, config []byte, sealed map[string]any) ([]runport.InputValue, error) {
	e, err := c.Get(name)
	if err != nil {
		return nil, err
	}
	args := bundleArguments(config, name, false)
	for _, in := range e.Template.Inputs {
		if raw, ok := sealed[in.Name]; ok && in.Sensitive {
			if _, literal := args[in.Name]; literal {
				continue
			}
			v, err := in.ctyValue(raw)
			if err != nil {
				return nil, fmt.Errorf("sealed value of %w", err)
			}
			args[in.Name] = v
		}
	}
	out := make([]runport.InputValue, 0, len(e.Template.Inputs))
	for _, in := range e.Template.Inputs {
		iv := runport.InputValue{Name: in.Name, Label: in.Label, Divergence: in.Divergence, Sensitive: in.Sensitive}
		if v, ok := args[in.Name]; ok {
			if text, err := ctyjson.Marshal(v, v.Type()); err == nil {
				iv.Value, iv.Set = string(text), true
			}
		}
		out = append(out, iv)
	}
	return out, nil
}
