package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"gantry/sandbox/api"
	"gantry/sandbox/client"
)

// sandboxResource is one resource type, generated from an api.Kind.
type sandboxResource struct {
	kind   api.Kind
	client *client.Client
}

var (
	_ resource.Resource                   = (*sandboxResource)(nil)
	_ resource.ResourceWithConfigure      = (*sandboxResource)(nil)
	_ resource.ResourceWithImportState    = (*sandboxResource)(nil)
	_ resource.ResourceWithValidateConfig = (*sandboxResource)(nil)
)

func (r *sandboxResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + r.kind.Name
}

func (r *sandboxResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = kindSchema(r.kind)
}

// kindSchema builds a resource schema from a kind: computed attributes keep their value for the
// object's life (UseStateForUnknown), attributes that force replacement get RequiresReplace, and
// every rule of the cloud is checked at validate time.
func kindSchema(k api.Kind) schema.Schema {
	attrs := make(map[string]schema.Attribute, len(k.Attrs))
	for _, a := range k.Attrs {
		optional := !a.Required && !a.Computed
		var vals []checkValidator
		if a.Check.Fn != nil {
			vals = []checkValidator{{attr: a}}
		}
		desc := a.Description
		if a.ForceNew {
			desc += " Changing it replaces the " + k.TypeName() + "."
		}
		switch a.Type {
		case api.String:
			var mods []planmodifier.String
			if a.ForceNew {
				mods = append(mods, stringplanmodifier.RequiresReplace())
			}
			if a.Computed {
				mods = append(mods, stringplanmodifier.UseStateForUnknown())
			}
			attrs[a.Name] = schema.StringAttribute{Required: a.Required, Optional: optional, Computed: a.Computed, Description: desc, PlanModifiers: mods, Validators: asValidators[validator.String](vals)}
		case api.Int:
			var mods []planmodifier.Int64
			if a.ForceNew {
				mods = append(mods, int64planmodifier.RequiresReplace())
			}
			if a.Computed {
				mods = append(mods, int64planmodifier.UseStateForUnknown())
			}
			attrs[a.Name] = schema.Int64Attribute{Required: a.Required, Optional: optional, Computed: a.Computed, Description: desc, PlanModifiers: mods, Validators: asValidators[validator.Int64](vals)}
		case api.Bool:
			var mods []planmodifier.Bool
			if a.ForceNew {
				mods = append(mods, boolplanmodifier.RequiresReplace())
			}
			if a.Computed {
				mods = append(mods, boolplanmodifier.UseStateForUnknown())
			}
			attrs[a.Name] = schema.BoolAttribute{Required: a.Required, Optional: optional, Computed: a.Computed, Description: desc, PlanModifiers: mods, Validators: asValidators[validator.Bool](vals)}
		case api.StringMap:
			var mods []planmodifier.Map
			if a.ForceNew {
				mods = append(mods, mapplanmodifier.RequiresReplace())
			}
			if a.Computed {
				mods = append(mods, mapplanmodifier.UseStateForUnknown())
			}
			attrs[a.Name] = schema.MapAttribute{ElementType: types.StringType, Required: a.Required, Optional: optional, Computed: a.Computed, Description: desc, PlanModifiers: mods, Validators: asValidators[validator.Map](vals)}
		case api.StringList:
			var mods []planmodifier.List
			if a.ForceNew {
				mods = append(mods, listplanmodifier.RequiresReplace())
			}
			if a.Computed {
				mods = append(mods, listplanmodifier.UseStateForUnknown())
			}
			attrs[a.Name] = schema.ListAttribute{ElementType: types.StringType, Required: a.Required, Optional: optional, Computed: a.Computed, Description: desc, PlanModifiers: mods, Validators: asValidators[validator.List](vals)}
		default:
			panic(fmt.Sprintf("sandbox provider: %s.%s has unsupported type %v", k.TypeName(), a.Name, a.Type))
		}
	}
	desc := k.Description
	if k.OrgScoped {
		desc += " Organization-scoped."
	}
	return schema.Schema{Description: desc, Attributes: attrs}
}

func (r *sandboxResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if req.ProviderData == nil {
		return // validate runs without a configured provider
	}
	c, ok := req.ProviderData.(*client.Client)
	if !ok {
		resp.Diagnostics.AddError("Unexpected provider data", fmt.Sprintf("expected *client.Client, got %T", req.ProviderData))
		return
	}
	r.client = c
}

func (r *sandboxResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	if r.kind.CheckObject == nil {
		return
	}
	vals, diags := readAttrs(ctx, r.kind, req.Config)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	for _, fe := range r.kind.CheckObject(vals) {
		at := path.Empty()
		if fe.Attr != "" {
			at = path.Root(fe.Attr)
		}
		resp.Diagnostics.AddAttributeError(at, "Invalid "+r.kind.TypeName(), fe.Message)
	}
}

func (r *sandboxResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	attrs, diags := readAttrs(ctx, r.kind, req.Plan)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	obj, err := r.client.Create(ctx, r.kind.Name, attrs)
	if err != nil {
		r.apiError(&resp.Diagnostics, "create", err)
		return
	}
	tflog.Info(ctx, "created "+r.kind.TypeName(), map[string]any{"id": obj.ID})
	resp.Diagnostics.Append(setState(ctx, r.kind, &resp.State, obj)...)
}

func (r *sandboxResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	id, diags := stateID(ctx, req.State)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	obj, err := r.client.Get(ctx, r.kind.Name, id)
	if client.IsNotFound(err) {
		// Deleted outside this configuration: drift. Forget it, so the plan creates it again.
		tflog.Warn(ctx, r.kind.TypeName()+" no longer exists; removing it from state", map[string]any{"id": id})
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		r.apiError(&resp.Diagnostics, "read", err)
		return
	}
	resp.Diagnostics.Append(setState(ctx, r.kind, &resp.State, obj)...)
}

func (r *sandboxResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	id, diags := stateID(ctx, req.State)
	resp.Diagnostics.Append(diags...)
	attrs, diags := readAttrs(ctx, r.kind, req.Plan)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	obj, err := r.client.Update(ctx, r.kind.Name, id, attrs)
	if err != nil {
		r.apiError(&resp.Diagnostics, "update", err)
		return
	}
	resp.Diagnostics.Append(setState(ctx, r.kind, &resp.State, obj)...)
}

func (r *sandboxResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	id, diags := stateID(ctx, req.State)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	err := r.client.Delete(ctx, r.kind.Name, id)
	if client.IsNotFound(err) {
		return // already gone
	}
	if err != nil {
		r.apiError(&resp.Diagnostics, "delete", err)
	}
}

func (r *sandboxResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if !r.kind.ValidID(req.ID) {
		resp.Diagnostics.AddError("Invalid import id", fmt.Sprintf("%q is not a %s id such as %s-1a2b3c4d", req.ID, r.kind.TypeName(), r.kind.IDPrefix))
		return
	}
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

// apiError turns a cloud error into diagnostics; attribute problems point at their attributes.
func (r *sandboxResource) apiError(d *diag.Diagnostics, op string, err error) {
	summary := fmt.Sprintf("Cannot %s %s", op, r.kind.TypeName())
	var ce *client.Error
	if errors.As(err, &ce) {
		switch {
		case len(ce.Fields) > 0:
			for _, f := range ce.Fields {
				if _, ok := r.kind.Attr(f.Attr); ok {
					d.AddAttributeError(path.Root(f.Attr), summary, f.Message)
				} else {
					d.AddError(summary, f.String())
				}
			}
			return
		case ce.Status == http.StatusForbidden:
			d.AddError(summary, ce.Message+"\n\nThe sandbox cloud only accepts changes from an apply job's identity.")
			return
		case ce.Status == http.StatusUnauthorized:
			d.AddError(summary, "The sandbox cloud rejected the provider's token: "+ce.Message)
			return
		}
	}
	d.AddError(summary, err.Error())
}

// attrGetter is a tfsdk.Plan, tfsdk.Config or tfsdk.State.
type attrGetter interface {
	GetAttribute(ctx context.Context, p path.Path, target any) diag.Diagnostics
}

func stateID(ctx context.Context, s tfsdk.State) (string, diag.Diagnostics) {
	var id types.String
	diags := s.GetAttribute(ctx, path.Root("id"), &id)
	if !diags.HasError() && (id.IsNull() || id.IsUnknown() || id.ValueString() == "") {
		diags.AddAttributeError(path.Root("id"), "Missing id", "The resource's state has no id.")
	}
	return id.ValueString(), diags
}

// readAttrs reads the configurable attributes: null values as nil; unknown values are left out.
func readAttrs(ctx context.Context, k api.Kind, g attrGetter) (map[string]any, diag.Diagnostics) {
	var diags diag.Diagnostics
	out := map[string]any{}
	for _, a := range k.Attrs {
		if a.Computed {
			continue
		}
		p := path.Root(a.Name)
		var v attr.Value
		switch a.Type {
		case api.String:
			var x types.String
			diags.Append(g.GetAttribute(ctx, p, &x)...)
			v = x
			if known(x) {
				out[a.Name] = x.ValueString()
			}
		case api.Int:
			var x types.Int64
			diags.Append(g.GetAttribute(ctx, p, &x)...)
			v = x
			if known(x) {
				out[a.Name] = x.ValueInt64()
			}
		case api.Bool:
			var x types.Bool
			diags.Append(g.GetAttribute(ctx, p, &x)...)
			v = x
			if known(x) {
				out[a.Name] = x.ValueBool()
			}
		case api.StringMap:
			var x types.Map
			diags.Append(g.GetAttribute(ctx, p, &x)...)
			v = x
			if known(x) && allKnownMap(x.Elements()) {
				m := map[string]string{}
				diags.Append(x.ElementsAs(ctx, &m, false)...)
				out[a.Name] = m
			}
		case api.StringList:
			var x types.List
			diags.Append(g.GetAttribute(ctx, p, &x)...)
			v = x
			var elems []attr.Value
			if known(x) {
				elems = x.Elements()
			}
			if known(x) && allKnownList(elems) {
				l := []string{}
				diags.Append(x.ElementsAs(ctx, &l, false)...)
				out[a.Name] = l
			}
		}
		if v != nil && v.IsNull() {
			out[a.Name] = nil
		}
	}
	return out, diags
}

func known(v attr.Value) bool { return !v.IsNull() && !v.IsUnknown() }

func allKnownMap(elems map[string]attr.Value) bool {
	for _, e := range elems {
		if e.IsUnknown() {
			return false
		}
	}
	return true
}

func allKnownList(elems []attr.Value) bool {
	for _, e := range elems {
		if e.IsUnknown() {
			return false
		}
	}
	return true
}
