package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"gantry/sandbox/api"
)

// setState writes every attribute of a live object into the state. The cloud returns null for
// unset optional attributes and exactly the configured value otherwise, so the state equals the
// plan for everything the configuration set.
func setState(ctx context.Context, k api.Kind, s *tfsdk.State, obj api.Object) diag.Diagnostics {
	var diags diag.Diagnostics
	for _, a := range k.Attrs {
		v, err := frameworkValue(ctx, a, obj.Attributes[a.Name])
		if err != nil {
			diags.AddAttributeError(path.Root(a.Name), "Unexpected value from the sandbox cloud", fmt.Sprintf("%s %s: %v", k.TypeName(), obj.ID, err))
			continue
		}
		diags.Append(s.SetAttribute(ctx, path.Root(a.Name), v)...)
	}
	return diags
}

// frameworkValue converts a normalized API value into the framework value of the attribute.
func frameworkValue(ctx context.Context, a api.Attr, v any) (attr.Value, error) {
	wrong := fmt.Errorf("%s is %T, not a %s", a.Name, v, a.Type)
	switch a.Type {
	case api.String:
		if v == nil {
			return types.StringNull(), nil
		}
		if s, ok := v.(string); ok {
			return types.StringValue(s), nil
		}
	case api.Int:
		if v == nil {
			return types.Int64Null(), nil
		}
		if n, ok := v.(int64); ok {
			return types.Int64Value(n), nil
		}
	case api.Bool:
		if v == nil {
			return types.BoolNull(), nil
		}
		if b, ok := v.(bool); ok {
			return types.BoolValue(b), nil
		}
	case api.StringMap:
		if v == nil {
			return types.MapNull(types.StringType), nil
		}
		if m, ok := v.(map[string]string); ok {
			mv, diags := types.MapValueFrom(ctx, types.StringType, m)
			if diags.HasError() {
				return nil, fmt.Errorf("%s: %v", a.Name, diags)
			}
			return mv, nil
		}
	case api.StringList:
		if v == nil {
			return types.ListNull(types.StringType), nil
		}
		if l, ok := v.([]string); ok {
			lv, diags := types.ListValueFrom(ctx, types.StringType, l)
			if diags.HasError() {
				return nil, fmt.Errorf("%s: %v", a.Name, diags)
			}
			return lv, nil
		}
	}
	return nil, wrong
}

// checkValidator applies an attribute's rule from the api table at validate time, so a bad value
// fails `tofu validate` and `tofu plan` with the same message the cloud would give at apply.
type checkValidator struct {
	attr api.Attr
}

var (
	_ validator.String = checkValidator{}
	_ validator.Int64  = checkValidator{}
	_ validator.Bool   = checkValidator{}
	_ validator.Map    = checkValidator{}
	_ validator.List   = checkValidator{}
)

func asValidators[T any](vs []checkValidator) []T {
	out := make([]T, 0, len(vs))
	for _, v := range vs {
		out = append(out, any(v).(T))
	}
	return out
}

func (v checkValidator) Description(context.Context) string {
	return "value must be " + v.attr.Check.Rule
}

func (v checkValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v checkValidator) check(p path.Path, val any, diags *diag.Diagnostics) {
	if err := v.attr.Check.Fn(val); err != nil {
		diags.AddAttributeError(p, "Invalid "+v.attr.Name, err.Error())
	}
}

func (v checkValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if known(req.ConfigValue) {
		v.check(req.Path, req.ConfigValue.ValueString(), &resp.Diagnostics)
	}
}

func (v checkValidator) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if known(req.ConfigValue) {
		v.check(req.Path, req.ConfigValue.ValueInt64(), &resp.Diagnostics)
	}
}

func (v checkValidator) ValidateBool(_ context.Context, req validator.BoolRequest, resp *validator.BoolResponse) {
	if known(req.ConfigValue) {
		v.check(req.Path, req.ConfigValue.ValueBool(), &resp.Diagnostics)
	}
}

func (v checkValidator) ValidateMap(ctx context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if !known(req.ConfigValue) || !allKnownMap(req.ConfigValue.Elements()) {
		return
	}
	m := map[string]string{}
	if d := req.ConfigValue.ElementsAs(ctx, &m, false); d.HasError() {
		resp.Diagnostics.Append(d...)
		return
	}
	v.check(req.Path, m, &resp.Diagnostics)
}

func (v checkValidator) ValidateList(ctx context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if !known(req.ConfigValue) || !allKnownList(req.ConfigValue.Elements()) {
		return
	}
	l := []string{}
	if d := req.ConfigValue.ElementsAs(ctx, &l, false); d.HasError() {
		resp.Diagnostics.Append(d...)
		return
	}
	v.check(req.Path, l, &resp.Diagnostics)
}
