package s3

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// harness drives the provider over plugin protocol 6 in process, as OpenTofu does: every
// request goes through the framework's real server (the sandbox provider's tests do the same).
type harness struct {
	t    *testing.T
	srv  tfprotov6.ProviderServer
	res  *tfprotov6.Schema
	prov *tfprotov6.Schema
}

const bucketType = "s3_bucket"

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
	return &harness{t: t, srv: srv, res: resp.ResourceSchemas[bucketType], prov: resp.Provider}
}

func errorsOf(diags []*tfprotov6.Diagnostic) string {
	var out []string
	for _, d := range diags {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			at := ""
			if d.Attribute != nil {
				at = d.Attribute.String() + ": "
			}
			out = append(out, at+d.Summary+": "+d.Detail)
		}
	}
	return strings.Join(out, "\n")
}

// configure configures the provider (its block is empty: everything comes from the
// environment).
func (h *harness) configure() []*tfprotov6.Diagnostic {
	h.t.Helper()
	typ := h.prov.ValueType()
	resp, err := h.srv.ConfigureProvider(context.Background(), &tfprotov6.ConfigureProviderRequest{TerraformVersion: "1.10.10",
		Config: h.dv(typ, tftypes.NewValue(typ, map[string]tftypes.Value{}))})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Diagnostics
}

func (h *harness) mustConfigure() {
	h.t.Helper()
	if d := errorsOf(h.configure()); d != "" {
		h.t.Fatal(d)
	}
}

func (h *harness) typ() tftypes.Type { return h.res.ValueType() }

// object is a bucket value: bucket (string), versioning, force_destroy (bool), tags
// (map[string]string), id and arn (string); missing attributes are null, unknown ones
// tftypes.UnknownValue.
func (h *harness) object(attrs map[string]any) tftypes.Value {
	h.t.Helper()
	ot := h.typ().(tftypes.Object)
	vals := map[string]tftypes.Value{}
	for name, at := range ot.AttributeTypes {
		switch v := attrs[name].(type) {
		case nil:
			vals[name] = tftypes.NewValue(at, nil)
		case map[string]string:
			m := map[string]tftypes.Value{}
			for k, s := range v {
				m[k] = tftypes.NewValue(tftypes.String, s)
			}
			vals[name] = tftypes.NewValue(at, m)
		default:
			vals[name] = tftypes.NewValue(at, v)
		}
	}
	for name := range attrs {
		if _, ok := ot.AttributeTypes[name]; !ok {
			h.t.Fatalf("no attribute %q", name)
		}
	}
	return tftypes.NewValue(ot, vals)
}

// attrs is a bucket value as Go values (nil for null, "unknown" for unknown).
func (h *harness) attrs(v tftypes.Value) map[string]any {
	h.t.Helper()
	if v.IsNull() {
		return nil
	}
	var m map[string]tftypes.Value
	if err := v.As(&m); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]any{}
	for name, av := range m {
		switch {
		case !av.IsKnown():
			out[name] = "unknown"
		case av.IsNull():
			out[name] = nil
		case av.Type().Is(tftypes.String):
			var s string
			_ = av.As(&s)
			out[name] = s
		case av.Type().Is(tftypes.Bool):
			var b bool
			_ = av.As(&b)
			out[name] = b
		default:
			var elems map[string]tftypes.Value
			_ = av.As(&elems)
			tags := map[string]string{}
			for k, e := range elems {
				var s string
				_ = e.As(&s)
				tags[k] = s
			}
			out[name] = tags
		}
	}
	return out
}

func (h *harness) dv(typ tftypes.Type, v tftypes.Value) *tfprotov6.DynamicValue {
	h.t.Helper()
	d, err := tfprotov6.NewDynamicValue(typ, v)
	if err != nil {
		h.t.Fatal(err)
	}
	return &d
}

func (h *harness) state(d *tfprotov6.DynamicValue) tftypes.Value {
	h.t.Helper()
	v, err := d.Unmarshal(h.typ())
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

func (h *harness) validate(config map[string]any) []*tfprotov6.Diagnostic {
	h.t.Helper()
	resp, err := h.srv.ValidateResourceConfig(context.Background(), &tfprotov6.ValidateResourceConfigRequest{TypeName: bucketType,
		Config: h.dv(h.typ(), h.object(config))})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Diagnostics
}

// planned is a PlanResourceChange's answer.
type planned struct {
	state   tftypes.Value
	replace []string
	diags   []*tfprotov6.Diagnostic
}

// plan plans prior (a null value: create) towards config, proposing as OpenTofu does: the
// configuration, with the computed attributes the configuration leaves null from prior.
func (h *harness) plan(prior tftypes.Value, config map[string]any) planned {
	h.t.Helper()
	if prior.Type() == nil {
		prior = tftypes.NewValue(h.typ(), nil)
	}
	proposed := map[string]any{}
	for k, v := range config {
		proposed[k] = v
	}
	if p := h.attrs(prior); p != nil {
		for _, a := range h.res.Block.Attributes {
			if a.Computed && proposed[a.Name] == nil {
				proposed[a.Name] = p[a.Name]
			}
		}
	}
	resp, err := h.srv.PlanResourceChange(context.Background(), &tfprotov6.PlanResourceChangeRequest{TypeName: bucketType,
		PriorState: h.dv(h.typ(), prior), ProposedNewState: h.dv(h.typ(), h.object(proposed)), Config: h.dv(h.typ(), h.object(config))})
	if err != nil {
		h.t.Fatal(err)
	}
	p := planned{diags: resp.Diagnostics}
	if resp.PlannedState != nil {
		p.state = h.state(resp.PlannedState)
	}
	for _, rp := range resp.RequiresReplace {
		p.replace = append(p.replace, rp.String())
	}
	sort.Strings(p.replace)
	return p
}

// apply applies p (from prior, for config; a nil config destroys).
func (h *harness) apply(prior tftypes.Value, p planned, config map[string]any) (tftypes.Value, []*tfprotov6.Diagnostic) {
	h.t.Helper()
	if prior.Type() == nil {
		prior = tftypes.NewValue(h.typ(), nil)
	}
	cfg := tftypes.NewValue(h.typ(), nil)
	if config != nil {
		cfg = h.object(config)
	}
	resp, err := h.srv.ApplyResourceChange(context.Background(), &tfprotov6.ApplyResourceChangeRequest{TypeName: bucketType,
		PriorState: h.dv(h.typ(), prior), PlannedState: h.dv(h.typ(), p.state), Config: h.dv(h.typ(), cfg)})
	if err != nil {
		h.t.Fatal(err)
	}
	return h.state(resp.NewState), resp.Diagnostics
}

// change plans and applies config from prior, failing the test on any error.
func (h *harness) change(prior tftypes.Value, config map[string]any) tftypes.Value {
	h.t.Helper()
	p := h.plan(prior, config)
	if d := errorsOf(p.diags); d != "" {
		h.t.Fatalf("plan: %s", d)
	}
	st, diags := h.apply(prior, p, config)
	if d := errorsOf(diags); d != "" {
		h.t.Fatalf("apply: %s", d)
	}
	return st
}

// destroy applies the deletion of prior.
func (h *harness) destroy(prior tftypes.Value) (tftypes.Value, []*tfprotov6.Diagnostic) {
	h.t.Helper()
	return h.apply(prior, planned{state: tftypes.NewValue(h.typ(), nil)}, nil)
}

func (h *harness) read(current tftypes.Value) (tftypes.Value, []*tfprotov6.Diagnostic) {
	h.t.Helper()
	resp, err := h.srv.ReadResource(context.Background(), &tfprotov6.ReadResourceRequest{TypeName: bucketType, CurrentState: h.dv(h.typ(), current)})
	if err != nil {
		h.t.Fatal(err)
	}
	return h.state(resp.NewState), resp.Diagnostics
}

func (h *harness) importState(id string) (tftypes.Value, []*tfprotov6.Diagnostic) {
	h.t.Helper()
	resp, err := h.srv.ImportResourceState(context.Background(), &tfprotov6.ImportResourceStateRequest{TypeName: bucketType, ID: id})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(resp.ImportedResources) != 1 {
		return tftypes.Value{}, resp.Diagnostics
	}
	return h.state(resp.ImportedResources[0].State), resp.Diagnostics
}
