package provider

import (
	"context"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// harness drives the provider over plugin protocol 6 in process, as OpenTofu does: no tofu binary
// is needed, but every request goes through the framework's real server.
type harness struct {
	t       *testing.T
	srv     tfprotov6.ProviderServer
	schemas map[string]*tfprotov6.Schema
	prov    *tfprotov6.Schema
}

// unknown marks a value that is unknown in a plan.
type unknownValue struct{}

var unknown = unknownValue{}

func newHarness(t *testing.T) *harness {
	t.Helper()
	srv := providerserver.NewProtocol6(New("test")())()
	resp, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d := errorsOf(resp.Diagnostics); d != "" {
		t.Fatal(d)
	}
	return &harness{t: t, srv: srv, schemas: resp.ResourceSchemas, prov: resp.Provider}
}

func errorsOf(diags []*tfprotov6.Diagnostic) string {
	var out []string
	for _, d := range diags {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			out = append(out, diagString(d))
		}
	}
	return strings.Join(out, "\n")
}

func diagString(d *tfprotov6.Diagnostic) string {
	at := ""
	if d.Attribute != nil {
		at = d.Attribute.String() + ": "
	}
	return at + d.Summary + ": " + d.Detail
}

func (h *harness) typ(typeName string) tftypes.Type {
	h.t.Helper()
	s, ok := h.schemas[typeName]
	if !ok {
		h.t.Fatalf("no schema for %s", typeName)
	}
	return s.ValueType()
}

// object builds a value of the schema's object type; missing attributes are null.
func object(t *testing.T, typ tftypes.Type, attrs map[string]any) tftypes.Value {
	t.Helper()
	ot := typ.(tftypes.Object)
	vals := map[string]tftypes.Value{}
	for name, at := range ot.AttributeTypes {
		vals[name] = goToValue(t, at, attrs[name])
	}
	for name := range attrs {
		if _, ok := ot.AttributeTypes[name]; !ok {
			t.Fatalf("no attribute %q", name)
		}
	}
	return tftypes.NewValue(ot, vals)
}

func goToValue(t *testing.T, typ tftypes.Type, v any) tftypes.Value {
	t.Helper()
	switch x := v.(type) {
	case nil:
		return tftypes.NewValue(typ, nil)
	case unknownValue:
		return tftypes.NewValue(typ, tftypes.UnknownValue)
	case tftypes.Value:
		return x
	case string:
		return tftypes.NewValue(typ, x)
	case bool:
		return tftypes.NewValue(typ, x)
	case int:
		return tftypes.NewValue(typ, big.NewFloat(float64(x)))
	case int64:
		return tftypes.NewValue(typ, big.NewFloat(float64(x)))
	case map[string]string:
		m := map[string]tftypes.Value{}
		for k, s := range x {
			m[k] = tftypes.NewValue(tftypes.String, s)
		}
		return tftypes.NewValue(typ, m)
	case []string:
		l := []tftypes.Value{}
		for _, s := range x {
			l = append(l, tftypes.NewValue(tftypes.String, s))
		}
		return tftypes.NewValue(typ, l)
	}
	t.Fatalf("cannot convert %T", v)
	return tftypes.Value{}
}

// attrsOf converts an object value into Go values: nil (null), unknown, string, int64, bool,
// map[string]string, []string.
func attrsOf(t *testing.T, v tftypes.Value) map[string]any {
	t.Helper()
	if v.IsNull() {
		return nil
	}
	var m map[string]tftypes.Value
	if err := v.As(&m); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for name, av := range m {
		out[name] = valueToGo(t, av)
	}
	return out
}

func valueToGo(t *testing.T, v tftypes.Value) any {
	t.Helper()
	if !v.IsKnown() {
		return unknown
	}
	if v.IsNull() {
		return nil
	}
	switch {
	case v.Type().Is(tftypes.String):
		var s string
		_ = v.As(&s)
		return s
	case v.Type().Is(tftypes.Number):
		var f big.Float
		_ = v.As(&f)
		n, _ := f.Int64()
		return n
	case v.Type().Is(tftypes.Bool):
		var b bool
		_ = v.As(&b)
		return b
	case v.Type().Is(tftypes.Map{}):
		var m map[string]tftypes.Value
		_ = v.As(&m)
		out := map[string]string{}
		for k, e := range m {
			var s string
			_ = e.As(&s)
			out[k] = s
		}
		return out
	case v.Type().Is(tftypes.List{}):
		var l []tftypes.Value
		_ = v.As(&l)
		out := []string{}
		for _, e := range l {
			var s string
			_ = e.As(&s)
			out = append(out, s)
		}
		return out
	}
	t.Fatalf("cannot convert %s", v.Type())
	return nil
}

func dv(t *testing.T, typ tftypes.Type, v tftypes.Value) *tfprotov6.DynamicValue {
	t.Helper()
	d, err := tfprotov6.NewDynamicValue(typ, v)
	if err != nil {
		t.Fatal(err)
	}
	return &d
}

func (h *harness) configure(cfg map[string]any) []*tfprotov6.Diagnostic {
	h.t.Helper()
	typ := h.prov.ValueType()
	resp, err := h.srv.ConfigureProvider(context.Background(), &tfprotov6.ConfigureProviderRequest{TerraformVersion: "1.10.10", Config: dv(h.t, typ, object(h.t, typ, cfg))})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Diagnostics
}

func (h *harness) validate(typeName string, config map[string]any) []*tfprotov6.Diagnostic {
	h.t.Helper()
	typ := h.typ(typeName)
	resp, err := h.srv.ValidateResourceConfig(context.Background(), &tfprotov6.ValidateResourceConfigRequest{TypeName: typeName, Config: dv(h.t, typ, object(h.t, typ, config))})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Diagnostics
}

// planned is the result of a PlanResourceChange.
type planned struct {
	state   tftypes.Value
	attrs   map[string]any
	replace []string
	diags   []*tfprotov6.Diagnostic
}

// plan plans a change from prior (nil: create) to config, proposing the new state as OpenTofu
// does: configuration values, with computed attributes taken from the prior state.
func (h *harness) plan(typeName string, prior tftypes.Value, config map[string]any) planned {
	h.t.Helper()
	typ := h.typ(typeName)
	if prior.Type() == nil {
		prior = tftypes.NewValue(typ, nil)
	}
	proposed := map[string]any{}
	for k, v := range config {
		proposed[k] = v
	}
	priorAttrs := attrsOf(h.t, prior)
	for _, a := range h.schemas[typeName].Block.Attributes {
		if a.Computed && !a.Optional {
			if priorAttrs == nil {
				proposed[a.Name] = nil
			} else {
				proposed[a.Name] = priorAttrs[a.Name]
			}
		}
	}
	resp, err := h.srv.PlanResourceChange(context.Background(), &tfprotov6.PlanResourceChangeRequest{
		TypeName:         typeName,
		PriorState:       dv(h.t, typ, prior),
		ProposedNewState: dv(h.t, typ, object(h.t, typ, proposed)),
		Config:           dv(h.t, typ, object(h.t, typ, config)),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	p := planned{diags: resp.Diagnostics}
	if resp.PlannedState != nil {
		st, err := resp.PlannedState.Unmarshal(typ)
		if err != nil {
			h.t.Fatal(err)
		}
		p.state, p.attrs = st, attrsOf(h.t, st)
	}
	for _, rp := range resp.RequiresReplace {
		if steps := rp.Steps(); len(steps) == 1 {
			if name, ok := steps[0].(tftypes.AttributeName); ok {
				p.replace = append(p.replace, string(name))
				continue
			}
		}
		p.replace = append(p.replace, rp.String())
	}
	sort.Strings(p.replace)
	return p
}

func (h *harness) apply(typeName string, prior tftypes.Value, p planned, config map[string]any) (tftypes.Value, []*tfprotov6.Diagnostic) {
	h.t.Helper()
	typ := h.typ(typeName)
	if prior.Type() == nil {
		prior = tftypes.NewValue(typ, nil)
	}
	plannedState := p.state
	if plannedState.Type() == nil {
		plannedState = tftypes.NewValue(typ, nil)
	}
	var cfg tftypes.Value
	if config == nil {
		cfg = tftypes.NewValue(typ, nil)
	} else {
		cfg = object(h.t, typ, config)
	}
	resp, err := h.srv.ApplyResourceChange(context.Background(), &tfprotov6.ApplyResourceChangeRequest{
		TypeName: typeName, PriorState: dv(h.t, typ, prior), PlannedState: dv(h.t, typ, plannedState),
		Config: dv(h.t, typ, cfg), PlannedPrivate: nil,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	st, err := resp.NewState.Unmarshal(typ)
	if err != nil {
		h.t.Fatal(err)
	}
	return st, resp.Diagnostics
}

// destroy plans and applies the deletion of an object.
func (h *harness) destroy(typeName string, prior tftypes.Value) []*tfprotov6.Diagnostic {
	h.t.Helper()
	typ := h.typ(typeName)
	_, diags := h.apply(typeName, prior, planned{state: tftypes.NewValue(typ, nil)}, nil)
	return diags
}

func (h *harness) read(typeName string, current tftypes.Value) (tftypes.Value, []*tfprotov6.Diagnostic) {
	h.t.Helper()
	typ := h.typ(typeName)
	resp, err := h.srv.ReadResource(context.Background(), &tfprotov6.ReadResourceRequest{TypeName: typeName, CurrentState: dv(h.t, typ, current)})
	if err != nil {
		h.t.Fatal(err)
	}
	st, err := resp.NewState.Unmarshal(typ)
	if err != nil {
		h.t.Fatal(err)
	}
	return st, resp.Diagnostics
}

func (h *harness) importState(typeName, id string) (tftypes.Value, []*tfprotov6.Diagnostic) {
	h.t.Helper()
	typ := h.typ(typeName)
	resp, err := h.srv.ImportResourceState(context.Background(), &tfprotov6.ImportResourceStateRequest{TypeName: typeName, ID: id})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(resp.ImportedResources) != 1 {
		return tftypes.Value{}, resp.Diagnostics
	}
	st, err := resp.ImportedResources[0].State.Unmarshal(typ)
	if err != nil {
		h.t.Fatal(err)
	}
	return st, resp.Diagnostics
}

// create plans and applies a new object, failing the test on any error.
func (h *harness) create(typeName string, config map[string]any) (tftypes.Value, map[string]any) {
	h.t.Helper()
	p := h.plan(typeName, tftypes.Value{}, config)
	if d := errorsOf(p.diags); d != "" {
		h.t.Fatalf("plan %s: %s", typeName, d)
	}
	st, diags := h.apply(typeName, tftypes.Value{}, p, config)
	if d := errorsOf(diags); d != "" {
		h.t.Fatalf("apply %s: %s", typeName, d)
	}
	return st, attrsOf(h.t, st)
}

func fmtAttrs(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%v ", k, m[k])
	}
	return b.String()
}
