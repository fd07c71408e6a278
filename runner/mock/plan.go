package mock

import (
	"fmt"
	"sort"

	"github.com/zclconf/go-cty/cty"

	"gantry/runner"
)

// Action lists as tofu writes them in resource_changes[].change.actions.
var (
	actNoOp          = []string{"no-op"}
	actCreate        = []string{"create"}
	actUpdate        = []string{"update"}
	actDelete        = []string{"delete"}
	actDeleteCreate  = []string{"delete", "create"}
	actCreateDelete  = []string{"create", "delete"}
	reasonCannotUpd  = "replace_because_cannot_update"
	reasonNoConfig   = "delete_because_no_resource_config"
	reasonCountIndex = "delete_because_count_index"
	reasonNoModule   = "delete_because_no_module"
	reasonRepetition = "delete_because_wrong_repetition"
)

// change is the planned change of one resource instance.
type change struct {
	addr         instanceAddr
	actions      []string
	reason       string
	replacePaths []string  // attributes that force the replacement, sorted
	before       cty.Value // null when creating
	after        cty.Value // null when deleting; unknown leaves where tofu says "known after apply"
	deps         []string  // what the state records as dependencies
	cbd          bool
	res          *resourceConfig // nil when the resource is no longer configured
	// beforeSensitive and afterSensitive are the paths of the sensitive parts of before
	// (as the prior state records them) and after (as the configuration marks them).
	beforeSensitive, afterSensitive []cty.Path
}

func (c *change) is(actions []string) bool {
	if len(c.actions) != len(actions) {
		return false
	}
	for i := range actions {
		if c.actions[i] != actions[i] {
			return false
		}
	}
	return true
}

func (c *change) replaces() bool { return c.is(actDeleteCreate) || c.is(actCreateDelete) }

// outputChange is the planned change of one root module output.
type outputChange struct {
	name          string
	actions       []string
	before, after cty.Value // before is cty.NilVal when the output is new; after is null when deleted
	sensitive     bool
}

// plan is everything a plan decided, from which the plan JSON, the plan file,
// the log and (on apply) the new state are written.
type plan struct {
	kind    runner.Kind
	cfg     *config
	prior   *priorState
	changes []*change // sorted by address
	outputs []*outputChange
}

func (p *plan) hasChanges() bool {
	for _, c := range p.changes {
		if !c.is(actNoOp) {
			return true
		}
	}
	for _, o := range p.outputs {
		if o.actions[0] != "no-op" {
			return true
		}
	}
	return false
}

// change finds the change for an address.
func (p *plan) change(addr instanceAddr) *change {
	for _, c := range p.changes {
		if c.addr == addr {
			return c
		}
	}
	return nil
}

// makePlan compares the configuration with the prior state, as `tofu plan` does.
func makePlan(cfg *config, prior *priorState, kind runner.Kind) (*plan, error) {
	p := &plan{kind: kind, cfg: cfg, prior: prior}
	if kind == runner.KindRefreshOnly {
		// The mock has no live cloud: what it applied is what exists, so a refresh
		// finds nothing that differs from the state (no drift, nothing to codify).
		return p, nil
	}
	if kind == runner.KindDestroy {
		if err := p.planDestroy(); err != nil {
			return nil, err
		}
		return p, nil
	}
	moduleOutputs := map[string]map[string]cty.Value{}
	for _, m := range cfg.modules {
		values, err := m.walk(func(r *resourceConfig, addr instanceAddr, configured cty.Value, sensitive []cty.Path) (cty.Value, error) {
			return p.planInstance(m, r, addr, configured, sensitive)
		})
		if err != nil {
			return nil, err
		}
		if moduleOutputs[m.name], err = m.outputValues(values); err != nil {
			return nil, err
		}
	}
	p.planOrphans()
	sort.Slice(p.changes, func(i, j int) bool { return p.changes[i].addr.less(p.changes[j].addr) })
	outputs, err := cfg.rootOutputs(moduleOutputs)
	if err != nil {
		return nil, err
	}
	p.planOutputs(outputs)
	return p, nil
}

// planInstance plans one configured instance (sensitive: the paths of its sensitive
// parts) and returns its planned value.
func (p *plan) planInstance(m *moduleConfig, r *resourceConfig, addr instanceAddr, configured cty.Value, sensitive []cty.Path) (cty.Value, error) {
	prior := p.prior.instances[addr.String()]
	c := diff(r, configured, prior)
	c.addr, c.res, c.cbd, c.deps = addr, r, r.cbd, m.dependencies(r)
	c.afterSensitive = sensitive
	if prior != nil {
		c.beforeSensitive = prior.sensitive
	}
	if r.preventDelete && (c.replaces() || c.is(actDelete)) {
		return cty.NilVal, preventDestroyError(c)
	}
	p.changes = append(p.changes, c)
	return c.after, nil
}

// diff compares an instance's configuration with its prior object: create,
// no-op, update in place, or replace when an attribute that forces replacement
// changed (or is unknown, e.g. it refers to a resource being replaced).
func diff(r *resourceConfig, configured cty.Value, prior *instance) *change {
	if prior == nil {
		return &change{actions: actCreate, before: cty.NullVal(r.schema.objectType()), after: withComputed(r.schema, configured, cty.NilVal)}
	}
	desired := keepIgnored(r, configured, prior.value)
	changed, replacePaths := compare(r.schema, desired, prior.value)
	c := &change{before: prior.value}
	switch {
	case len(replacePaths) > 0:
		c.actions, c.reason, c.replacePaths = actDeleteCreate, reasonCannotUpd, replacePaths
		if r.cbd {
			c.actions = actCreateDelete
		}
		c.after = withComputed(r.schema, desired, cty.NilVal)
	case changed:
		c.actions, c.after = actUpdate, withComputed(r.schema, desired, prior.value)
	default:
		c.actions, c.after = actNoOp, prior.value
	}
	return c
}

// compare lists whether any configurable attribute differs and which of the
// differing ones force replacement.
func compare(schema resourceSchema, desired, prior cty.Value) (changed bool, replacePaths []string) {
	for _, name := range schema.attrNames() {
		a := schema.attrs[name]
		if a.computed || sameValue(desired.GetAttr(name), prior.GetAttr(name)) {
			continue
		}
		changed = true
		if a.forcesReplacement {
			replacePaths = append(replacePaths, name)
		}
	}
	return changed, replacePaths
}

// keepIgnored keeps the prior value of attributes listed in lifecycle.ignore_changes.
func keepIgnored(r *resourceConfig, configured, prior cty.Value) cty.Value {
	if len(r.ignore) == 0 {
		return configured
	}
	attrs := configured.AsValueMap()
	for name := range r.ignore {
		attrs[name] = prior.GetAttr(name)
	}
	return cty.ObjectVal(attrs)
}

// withComputed fills the computed attributes: from the prior object when it is
// kept, else unknown until apply.
func withComputed(schema resourceSchema, obj cty.Value, prior cty.Value) cty.Value {
	attrs := obj.AsValueMap()
	for name, a := range schema.attrs {
		if !a.computed {
			continue
		}
		if prior != cty.NilVal {
			attrs[name] = prior.GetAttr(name)
		} else {
			attrs[name] = cty.UnknownVal(a.typ)
		}
	}
	return cty.ObjectVal(attrs)
}

// planOrphans plans the deletion of prior instances the configuration no longer has.
func (p *plan) planOrphans() {
	planned := map[instanceAddr]bool{}
	for _, c := range p.changes {
		planned[c.addr] = true
	}
	for _, in := range p.prior.sortedInstances() {
		if planned[in.addr] {
			continue
		}
		c := deleteChange(in)
		c.reason = p.orphanReason(in.addr)
		p.changes = append(p.changes, c)
	}
}

// orphanReason says why tofu deletes an instance: the reasons of its action_reason.
func (p *plan) orphanReason(addr instanceAddr) string {
	m := p.cfg.module(addr.module)
	if m == nil {
		return reasonNoModule
	}
	r := m.resources[addr.typ+"."+addr.name]
	switch {
	case r == nil:
		return reasonNoConfig
	case (r.count == nil) != (addr.index < 0):
		return reasonRepetition
	}
	return reasonCountIndex
}

func deleteChange(in *instance) *change {
	return &change{addr: in.addr, actions: actDelete, before: in.value, after: cty.NullVal(in.value.Type()), deps: in.deps, cbd: in.cbd,
		beforeSensitive: in.sensitive}
}

// planDestroy deletes every prior instance, without action_reason, as tofu's
// destroy plan does; prevent_destroy still refuses.
func (p *plan) planDestroy() error {
	for _, in := range p.prior.sortedInstances() {
		c := deleteChange(in)
		if m := p.cfg.module(in.addr.module); m != nil {
			c.res = m.resources[in.addr.typ+"."+in.addr.name]
		}
		if c.res != nil && c.res.preventDelete {
			return preventDestroyError(c)
		}
		p.changes = append(p.changes, c)
	}
	for _, name := range sortedKeys(p.prior.outputs) {
		p.outputs = append(p.outputs, &outputChange{
			name: name, actions: actDelete, before: p.prior.outputs[name],
			after: cty.NullVal(cty.DynamicPseudoType), sensitive: p.prior.sensitive[name],
		})
	}
	return nil
}

// planOutputs compares the root outputs with the prior state's.
func (p *plan) planOutputs(outputs map[string]outputValue) {
	for _, name := range sortedKeys(outputs) {
		o := outputs[name]
		oc := &outputChange{name: name, after: o.value, sensitive: o.sensitive}
		before, existed := p.prior.outputs[name]
		switch {
		case !existed:
			oc.actions, oc.before = actCreate, cty.NilVal
		case sameValue(before, o.value):
			oc.actions, oc.before = actNoOp, before
		default:
			oc.actions, oc.before = actUpdate, before
		}
		p.outputs = append(p.outputs, oc)
	}
	for _, name := range sortedKeys(p.prior.outputs) {
		if _, kept := outputs[name]; !kept {
			p.outputs = append(p.outputs, &outputChange{
				name: name, actions: actDelete, before: p.prior.outputs[name],
				after: cty.NullVal(cty.DynamicPseudoType), sensitive: p.prior.sensitive[name],
			})
		}
	}
	sort.Slice(p.outputs, func(i, j int) bool { return p.outputs[i].name < p.outputs[j].name })
}

func preventDestroyError(c *change) error {
	return at(c.res.rng, "instance cannot be destroyed: resource %s has lifecycle.prevent_destroy set, but the plan calls for this resource to be destroyed", c.addr)
}

// counts is the plan's summary: replacements count as one add and one destroy.
func (p *plan) counts() (add, change, destroy int) {
	for _, c := range p.changes {
		switch {
		case c.is(actCreate):
			add++
		case c.is(actUpdate):
			change++
		case c.is(actDelete):
			destroy++
		case c.replaces():
			add++
			destroy++
		}
	}
	return add, change, destroy
}

// summary is tofu's "Plan: ..." line.
func (p *plan) summary() string {
	add, change, destroy := p.counts()
	return fmt.Sprintf("Plan: %d to add, %d to change, %d to destroy.", add, change, destroy)
}

// executionOrder lists the changes so that every change comes after the
// changes of the resources it depends on (ties in address order): the order
// creates run in, and in reverse the order destroys run in.
func (p *plan) executionOrder() []*change {
	pending := map[string]bool{}
	for _, c := range p.changes {
		pending[c.addr.resource()] = true
	}
	var order []*change
	done := map[*change]bool{}
	for len(order) < len(p.changes) {
		var ready []*change
		for _, c := range p.changes {
			if !done[c] && !waitsFor(c, pending) {
				ready = append(ready, c)
			}
		}
		if len(ready) == 0 { // a cycle in recorded dependencies: fall back to address order
			for _, c := range p.changes {
				if !done[c] {
					ready = append(ready, c)
				}
			}
		}
		for _, c := range ready {
			done[c] = true
			order = append(order, c)
		}
		pending = map[string]bool{}
		for _, c := range p.changes {
			if !done[c] {
				pending[c.addr.resource()] = true
			}
		}
	}
	return order
}

// waitsFor reports whether c depends on a resource that still has pending changes.
func waitsFor(c *change, pending map[string]bool) bool {
	for _, d := range c.deps {
		if pending[d] && d != c.addr.resource() {
			return true
		}
	}
	return false
}
