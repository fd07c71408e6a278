package mock

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/zclconf/go-cty/cty"

	"gantry/runner"
)

// applied is the result of applying a plan: the instances that exist afterwards
// and the root outputs.
type applied struct {
	serial    uint64
	lineage   string
	instances []*instance
	outputs   map[string]outputValue
	final     map[instanceAddr]cty.Value // final values of created and updated instances, for the log
}

// applyPlan simulates the provider: creates get their computed attributes,
// updates keep theirs, deletions disappear. Values that were unknown in the plan
// (a database's network_id when the network is new) are evaluated again against
// the final values of the resources they refer to.
func applyPlan(p *plan, workspaceID string) (*applied, error) {
	a := &applied{serial: p.prior.serial + 1, lineage: p.prior.lineage, final: map[instanceAddr]cty.Value{}}
	if a.lineage == "" {
		a.lineage = newLineage(workspaceID)
	}
	if p.kind == runner.KindDestroy {
		a.outputs = map[string]outputValue{}
		return a, nil
	}
	moduleOutputs := map[string]map[string]cty.Value{}
	for _, m := range p.cfg.modules {
		values, err := m.walk(func(r *resourceConfig, addr instanceAddr, configured cty.Value, sensitive []cty.Path) (cty.Value, error) {
			return a.applyInstance(p, workspaceID, r, addr, configured, sensitive)
		})
		if err != nil {
			return nil, err
		}
		if moduleOutputs[m.name], err = m.outputValues(values); err != nil {
			return nil, err
		}
	}
	outputs, err := p.cfg.rootOutputs(moduleOutputs)
	if err != nil {
		return nil, err
	}
	a.outputs = outputs
	return a, nil
}

// applyInstance computes one instance's final value and checks it against the plan;
// the state records the paths of its sensitive parts.
func (a *applied) applyInstance(p *plan, workspaceID string, r *resourceConfig, addr instanceAddr, configured cty.Value, sensitive []cty.Path) (cty.Value, error) {
	c := p.change(addr)
	if c == nil {
		return cty.NilVal, fmt.Errorf("%s: not in the plan; plan again", addr)
	}
	var final cty.Value
	switch {
	case c.is(actNoOp):
		final = c.before
	case c.is(actUpdate):
		final = withComputed(r.schema, keepIgnored(r, configured, c.before), c.before)
	default: // create or replace: the simulated provider sets the computed attributes
		desired := configured
		if c.replaces() {
			desired = keepIgnored(r, configured, c.before)
		}
		final = a.create(r, addr, desired, workspaceID)
	}
	if err := conforms(addr, c.after, final); err != nil {
		return cty.NilVal, err
	}
	a.instances = append(a.instances, &instance{addr: addr, value: final, deps: c.deps, cbd: c.cbd, sensitive: sensitive})
	a.final[addr] = final
	return final, nil
}

// create fills in computed attributes as the sandbox provider would. The seed
// includes the lineage and the new serial so a replacement gets a new id.
func (a *applied) create(r *resourceConfig, addr instanceAddr, desired cty.Value, workspaceID string) cty.Value {
	attrs := desired.AsValueMap()
	seed := workspaceID + "\x00" + a.lineage + "\x00" + strconv.FormatUint(a.serial, 10) + "\x00" + addr.String()
	for _, name := range r.schema.attrNames() {
		if r.schema.attrs[name].computed {
			attrs[name] = computeValue(r.typ, name, attrs, seed+"\x00"+name)
		}
	}
	return cty.ObjectVal(attrs)
}

// conforms checks that every value the plan knew is the value applied, as tofu
// checks a provider's result ("Provider produced inconsistent result").
func conforms(addr instanceAddr, planned, final cty.Value) error {
	for name, pv := range planned.AsValueMap() {
		fv := final.GetAttr(name)
		if !fv.IsWhollyKnown() {
			return fmt.Errorf("%s: the mock runner left %q unknown after apply", addr, name)
		}
		if pv.IsWhollyKnown() && !pv.Equals(fv).True() {
			return fmt.Errorf("%s: inconsistent result after apply: %q was planned as %s but applied as %s; plan again", addr, name, marshalValue(pv), marshalValue(fv))
		}
	}
	return nil
}

// outputsJSON writes the outputs as `tofu output -json` does; null outputs are left out.
func outputsJSON(outputs map[string]outputValue) (json.RawMessage, error) {
	type outputDoc struct {
		Sensitive bool            `json:"sensitive"`
		Type      json.RawMessage `json:"type"`
		Value     json.RawMessage `json:"value"`
	}
	doc := map[string]outputDoc{}
	for name, o := range outputs {
		if o.value.IsNull() {
			continue
		}
		doc[name] = outputDoc{Sensitive: o.sensitive, Type: marshalType(o.value.Type()), Value: marshalValue(o.value)}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding the outputs: %w", err)
	}
	return out, nil
}
