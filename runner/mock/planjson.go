package mock

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// The types below are `tofu show -json`'s plan format (format_version 1.2), field
// for field and in tofu's order, so that a reader of real plans reads these too.

type planDoc struct {
	FormatVersion    string `json:"format_version"`
	TerraformVersion string `json:"terraform_version"`
	// Variables are the root variables' values, sensitive ones in clear, as tofu
	// writes them (the configuration's variables say which are sensitive).
	Variables       map[string]planVariable `json:"variables,omitempty"`
	PlannedValues   stateValues             `json:"planned_values"`
	ResourceChanges []resourceChange        `json:"resource_changes,omitempty"`
	OutputChanges   map[string]valueChange  `json:"output_changes,omitempty"`
	PriorState      *stateDoc               `json:"prior_state,omitempty"`
	Configuration   configDoc               `json:"configuration"`
	Timestamp       string                  `json:"timestamp"`
	Errored         bool                    `json:"errored"`
	// GantrySimulated is not tofu's: it marks a plan the MockTofuRunner made.
	// Readers of tofu's format ignore unknown keys.
	GantrySimulated bool `json:"gantry_simulated"`
}

type planVariable struct {
	Value json.RawMessage `json:"value"`
}

// stateValues is the "values" shape shared by planned_values and prior_state.
type stateValues struct {
	Outputs    map[string]jsonOutput `json:"outputs,omitempty"`
	RootModule jsonModule            `json:"root_module"`
}

type jsonOutput struct {
	Sensitive bool            `json:"sensitive"`
	Type      json.RawMessage `json:"type,omitempty"`
	Value     json.RawMessage `json:"value,omitempty"`
}

type jsonModule struct {
	Resources    []jsonResource `json:"resources,omitempty"`
	Address      string         `json:"address,omitempty"`
	ChildModules []jsonModule   `json:"child_modules,omitempty"`
}

type jsonResource struct {
	Address         string          `json:"address,omitempty"`
	Mode            string          `json:"mode,omitempty"`
	Type            string          `json:"type,omitempty"`
	Name            string          `json:"name,omitempty"`
	Index           *int            `json:"index,omitempty"`
	ProviderName    string          `json:"provider_name"`
	SchemaVersion   uint64          `json:"schema_version"`
	Values          json.RawMessage `json:"values,omitempty"`
	SensitiveValues json.RawMessage `json:"sensitive_values,omitempty"`
	DependsOn       []string        `json:"depends_on,omitempty"`
}

type stateDoc struct {
	FormatVersion    string       `json:"format_version"`
	TerraformVersion string       `json:"terraform_version"`
	Values           *stateValues `json:"values,omitempty"`
}

type resourceChange struct {
	Address       string      `json:"address"`
	ModuleAddress string      `json:"module_address,omitempty"`
	Mode          string      `json:"mode"`
	Type          string      `json:"type"`
	Name          string      `json:"name"`
	Index         *int        `json:"index,omitempty"`
	ProviderName  string      `json:"provider_name"`
	Change        valueChange `json:"change"`
	ActionReason  string      `json:"action_reason,omitempty"`
}

type valueChange struct {
	Actions         []string        `json:"actions"`
	Before          json.RawMessage `json:"before,omitempty"`
	After           json.RawMessage `json:"after,omitempty"`
	AfterUnknown    json.RawMessage `json:"after_unknown,omitempty"`
	BeforeSensitive json.RawMessage `json:"before_sensitive,omitempty"`
	AfterSensitive  json.RawMessage `json:"after_sensitive,omitempty"`
	ReplacePaths    [][]string      `json:"replace_paths,omitempty"`
}

type configDoc struct {
	ProviderConfig map[string]providerConfigDoc `json:"provider_config,omitempty"`
	RootModule     configModule                 `json:"root_module"`
}

type providerConfigDoc struct {
	Name              string `json:"name"`
	FullName          string `json:"full_name"`
	VersionConstraint string `json:"version_constraint,omitempty"`
}

type configModule struct {
	Outputs     map[string]configOutput   `json:"outputs,omitempty"`
	Resources   []configResource          `json:"resources,omitempty"`
	ModuleCalls map[string]moduleCallDoc  `json:"module_calls,omitempty"`
	Variables   map[string]configVariable `json:"variables,omitempty"`
}

type moduleCallDoc struct {
	Source      string                   `json:"source"`
	Expressions map[string]expressionDoc `json:"expressions,omitempty"`
	Module      configModule             `json:"module"`
}

type configVariable struct {
	Default     json.RawMessage `json:"default,omitempty"`
	Description string          `json:"description,omitempty"`
	Sensitive   bool            `json:"sensitive,omitempty"`
	Type        string          `json:"type,omitempty"`
	Nullable    bool            `json:"nullable"`
	Required    bool            `json:"required"`
}

type configResource struct {
	Address           string                   `json:"address"`
	Mode              string                   `json:"mode"`
	Type              string                   `json:"type"`
	Name              string                   `json:"name"`
	ProviderConfigKey string                   `json:"provider_config_key"`
	Expressions       map[string]expressionDoc `json:"expressions,omitempty"`
	SchemaVersion     uint64                   `json:"schema_version"`
	CountExpression   *expressionDoc           `json:"count_expression,omitempty"`
	DependsOn         []string                 `json:"depends_on,omitempty"`
}

type configOutput struct {
	Sensitive   bool          `json:"sensitive,omitempty"`
	Expression  expressionDoc `json:"expression"`
	Description string        `json:"description,omitempty"`
}

// expressionDoc is an unevaluated expression: its value when it is a constant,
// else the references it makes.
type expressionDoc struct {
	ConstantValue json.RawMessage `json:"constant_value,omitempty"`
	References    []string        `json:"references,omitempty"`
}

// fixedTimestamp stands in for the plan's creation time, which would make two
// identical plans differ.
const fixedTimestamp = "1970-01-01T00:00:00Z"

// planJSON writes the plan as `tofu show -json` would.
func (p *plan) planJSON() ([]byte, error) {
	doc := planDoc{
		FormatVersion:    "1.2",
		TerraformVersion: tofuVersion,
		Variables:        p.cfg.variableValues(),
		PlannedValues:    p.plannedValues(),
		ResourceChanges:  p.resourceChanges(),
		OutputChanges:    p.outputChanges(),
		Configuration:    p.cfg.configDoc(),
		Timestamp:        fixedTimestamp,
		GantrySimulated:  true,
	}
	if !p.prior.empty() {
		doc.PriorState = priorStateDoc(p.prior)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding the plan JSON: %w", err)
	}
	return out, nil
}

func (p *plan) resourceChanges() []resourceChange {
	out := make([]resourceChange, 0, len(p.changes))
	for _, c := range p.changes {
		rc := resourceChange{
			Address: c.addr.String(), ModuleAddress: c.addr.moduleAddress(), Mode: "managed",
			Type: c.addr.typ, Name: c.addr.name, Index: indexPtr(c.addr), ProviderName: providerSource,
			ActionReason: c.reason,
		}
		rc.Change = valueChange{
			Actions: c.actions, Before: marshalValue(c.before), BeforeSensitive: marshalValue(sensitiveAsBool(markSensitive(c.before, c.beforeSensitive))),
			AfterSensitive: marshalValue(sensitiveAsBool(markSensitive(c.after, c.afterSensitive))),
		}
		rc.Change.After, rc.Change.AfterUnknown = afterJSON(c.after)
		for _, path := range c.replacePaths {
			rc.Change.ReplacePaths = append(rc.Change.ReplacePaths, []string{path})
		}
		out = append(out, rc)
	}
	return out
}

func (p *plan) outputChanges() map[string]valueChange {
	out := map[string]valueChange{}
	for _, o := range p.outputs {
		sensitive := marshalValue(cty.BoolVal(o.sensitive))
		vc := valueChange{Actions: o.actions, Before: marshalValue(o.before), BeforeSensitive: sensitive, AfterSensitive: sensitive}
		if o.after.IsWhollyKnown() {
			vc.After, vc.AfterUnknown = marshalValue(o.after), json.RawMessage("false")
		} else {
			if known := omitUnknowns(o.after); known != cty.NilVal && !known.IsNull() {
				vc.After = marshalValue(known)
			}
			vc.AfterUnknown = marshalValue(unknownAsBool(o.after))
		}
		out[o.name] = vc
	}
	return out
}

// plannedValues is the state the plan expects: every instance but the deleted
// ones, unknown attributes left out; outputs with their value when known.
func (p *plan) plannedValues() stateValues {
	var instances []*instance
	for _, c := range p.changes {
		if !c.is(actDelete) {
			instances = append(instances, &instance{addr: c.addr, value: c.after, sensitive: c.afterSensitive})
		}
	}
	sv := stateValues{RootModule: jsonModule{ChildModules: childModules(instances)}}
	for _, o := range p.outputs {
		if o.actions[0] == "delete" {
			continue
		}
		if sv.Outputs == nil {
			sv.Outputs = map[string]jsonOutput{}
		}
		jo := jsonOutput{Sensitive: o.sensitive}
		if o.after.IsWhollyKnown() {
			jo.Value, jo.Type = marshalValue(o.after), marshalType(o.after.Type())
		}
		sv.Outputs[o.name] = jo
	}
	return sv
}

// childModules groups instances (in address order) into tofu's child_modules.
func childModules(instances []*instance) []jsonModule {
	var mods []jsonModule
	for _, in := range instances {
		if len(mods) == 0 || mods[len(mods)-1].Address != in.addr.moduleAddress() {
			mods = append(mods, jsonModule{Address: in.addr.moduleAddress()})
		}
		m := &mods[len(mods)-1]
		m.Resources = append(m.Resources, jsonResource{
			Address: in.addr.String(), Mode: "managed", Type: in.addr.typ, Name: in.addr.name,
			Index: indexPtr(in.addr), ProviderName: providerSource,
			Values: marshalValue(omitUnknowns(in.value)), SensitiveValues: marshalValue(sensitiveAsBool(markSensitive(in.value, in.sensitive))),
			DependsOn: in.deps,
		})
	}
	return mods
}

// priorStateDoc is the prior state as `tofu show -json` shows a state.
func priorStateDoc(prior *priorState) *stateDoc {
	sv := &stateValues{RootModule: jsonModule{ChildModules: childModules(prior.sortedInstances())}}
	for _, name := range sortedKeys(prior.outputs) {
		if sv.Outputs == nil {
			sv.Outputs = map[string]jsonOutput{}
		}
		v := prior.outputs[name]
		sv.Outputs[name] = jsonOutput{Sensitive: prior.sensitive[name], Type: marshalType(v.Type()), Value: marshalValue(v)}
	}
	return &stateDoc{FormatVersion: "1.0", TerraformVersion: tofuVersion, Values: sv}
}

func indexPtr(a instanceAddr) *int {
	if a.index < 0 {
		return nil
	}
	i := a.index
	return &i
}

// configDoc is the configuration section: enough for a reader to see which
// resource refers to which (expressions[].references).
func (c *config) configDoc() configDoc {
	doc := configDoc{
		ProviderConfig: map[string]providerConfigDoc{
			"sandbox": {Name: "sandbox", FullName: providerSource, VersionConstraint: c.providerVersion},
		},
		RootModule: configModule{Outputs: outputDocs(c.outputs), ModuleCalls: map[string]moduleCallDoc{}, Variables: variableDocs(c.variables)},
	}
	for _, m := range c.modules {
		call := moduleCallDoc{Source: m.source, Expressions: map[string]expressionDoc{}, Module: m.configModule()}
		for name, expr := range m.inputExprs {
			call.Expressions[name] = expressionOf(expr)
		}
		doc.RootModule.ModuleCalls[m.name] = call
	}
	return doc
}

// variableValues are the root variables' values for the plan's "variables" (nil when
// there are none).
func (c *config) variableValues() map[string]planVariable {
	if len(c.vars) == 0 {
		return nil
	}
	out := make(map[string]planVariable, len(c.vars))
	for name, v := range c.vars {
		v, _ = v.UnmarkDeep()
		out[name] = planVariable{Value: marshalValue(v)}
	}
	return out
}

// variableDocs describe `variable` blocks as the configuration JSON does (nil when
// there are none).
func variableDocs(vars map[string]*variableConfig) map[string]configVariable {
	if len(vars) == 0 {
		return nil
	}
	out := make(map[string]configVariable, len(vars))
	for name, v := range vars {
		cv := configVariable{Description: v.description, Sensitive: v.sensitive, Type: v.typeString, Required: v.def == cty.NilVal}
		if v.def != cty.NilVal {
			cv.Default = marshalValue(v.def)
		}
		out[name] = cv
	}
	return out
}

func (m *moduleConfig) configModule() configModule {
	cm := configModule{Outputs: outputDocs(m.outputs), Variables: variableDocs(m.variables)}
	if cm.Variables == nil {
		cm.Variables = map[string]configVariable{}
	}
	for _, key := range sortedKeys(m.resources) {
		r := m.resources[key]
		cr := configResource{
			Address: key, Mode: "managed", Type: r.typ, Name: r.name, ProviderConfigKey: "sandbox",
			Expressions: map[string]expressionDoc{}, DependsOn: r.dependsOn,
		}
		for name, attr := range r.attrs {
			cr.Expressions[name] = expressionOf(attr.Expr)
		}
		if r.count != nil {
			e := expressionOf(r.count)
			cr.CountExpression = &e
		}
		cm.Resources = append(cm.Resources, cr)
	}
	sort.Slice(cm.Resources, func(i, j int) bool { return cm.Resources[i].Address < cm.Resources[j].Address })
	return cm
}

func outputDocs(outputs []*outputConfig) map[string]configOutput {
	if len(outputs) == 0 {
		return nil
	}
	out := map[string]configOutput{}
	for _, o := range outputs {
		out[o.name] = configOutput{Sensitive: o.sensitive, Expression: expressionOf(o.expr), Description: o.description}
	}
	return out
}

// expressionOf describes an expression as tofu's configuration JSON does.
func expressionOf(expr hcl.Expression) expressionDoc {
	var doc expressionDoc
	if v, _ := expr.Value(nil); v != cty.NilVal && v.IsWhollyKnown() {
		doc.ConstantValue = marshalValue(v)
	}
	doc.References = referenceStrings(expr)
	return doc
}
