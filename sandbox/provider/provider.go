// Package provider is the OpenTofu provider for the sandbox cloud (source address
// portal.local/sandbox/sandbox), built with terraform-plugin-framework. Its resources are
// generated from the kinds in gantry/sandbox/api, the same table the cloud validates against, and
// they call the cloud through gantry/sandbox/client.
//
// Credentials: the provider reads a workload identity token from the runner's environment
// (SANDBOX_TOKEN, or SANDBOX_TOKEN_FILE naming a mounted secret file, which is read again before
// a request whenever it has changed: Gantry's runner refreshes it during long jobs). The token
// is never echoed: not into state, plans, diagnostics or logs.
package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"gantry/sandbox/api"
	"gantry/sandbox/client"
)

// Address is the provider's source address.
const Address = "portal.local/sandbox/sandbox"

// Environment variables the provider reads when the provider block leaves an attribute unset.
const (
	EnvEndpoint  = "SANDBOX_ENDPOINT"
	EnvToken     = "SANDBOX_TOKEN"
	EnvTokenFile = "SANDBOX_TOKEN_FILE"
)

type sandboxProvider struct {
	version string
}

var _ provider.Provider = (*sandboxProvider)(nil)

// New returns the provider factory for providerserver.Serve.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &sandboxProvider{version: version} }
}

type providerModel struct {
	Endpoint  types.String `tfsdk:"endpoint"`
	Token     types.String `tfsdk:"token"`
	TokenFile types.String `tfsdk:"token_file"`
}

func (p *sandboxProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "sandbox"
	resp.Version = p.version
}

func (p *sandboxProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The sandbox cloud that Gantry ships for development and tests. Credentials come from the runner's environment: " +
			EnvToken + " or " + EnvTokenFile + ", never from configuration.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Optional:    true,
				Description: "Base URL of the sandbox cloud API, such as http://127.0.0.1:8790. Default: the " + EnvEndpoint + " environment variable.",
			},
			"token": schema.StringAttribute{
				Optional:  true,
				Sensitive: true,
				Description: "Workload identity token. Default: the " + EnvToken + " environment variable. Prefer the environment: " +
					"a token in configuration is saved in plan files.",
			},
			"token_file": schema.StringAttribute{
				Optional:    true,
				Description: "Path of a file holding the workload identity token (a mounted secret), read when the provider is configured and again before a request whenever the file has changed (replace it by a rename to refresh the token). Default: the " + EnvTokenFile + " environment variable.",
			},
		},
	}
}

func (p *sandboxProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	for name, v := range map[string]types.String{"endpoint": cfg.Endpoint, "token": cfg.Token, "token_file": cfg.TokenFile} {
		if v.IsUnknown() {
			resp.Diagnostics.AddAttributeError(path.Root(name), "Unknown sandbox provider "+name,
				"The provider's "+name+" is not known until apply. Set it to a static value or use the environment variables.")
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}

	endpoint := cfg.Endpoint.ValueString()
	if endpoint == "" {
		endpoint = os.Getenv(EnvEndpoint)
	}
	if endpoint == "" {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Missing sandbox endpoint",
			"Set the sandbox cloud's URL in the "+EnvEndpoint+" environment variable or the provider's endpoint attribute.")
	}

	before := resp.Diagnostics.ErrorsCount()
	tokens, source := p.tokenSource(cfg, resp)
	if tokens == nil && resp.Diagnostics.ErrorsCount() == before {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Missing sandbox token",
			"The sandbox provider needs a workload identity token. Gantry's runner provides it in the "+EnvTokenFile+
				" environment variable (a file it refreshes while the job runs); outside Gantry set "+EnvToken+" or "+EnvTokenFile+
				" (or the provider's token_file).")
	}
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := client.NewWithSource(endpoint, tokens, client.WithUserAgent(fmt.Sprintf("terraform-provider-sandbox/%s (%s)", p.version, req.TerraformVersion)))
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Invalid sandbox endpoint", err.Error())
		return
	}
	tflog.Debug(ctx, "sandbox provider configured", map[string]any{"endpoint": endpoint, "token_source": source})
	resp.ResourceData = c
	resp.DataSourceData = c
}

// tokenSource finds the token: the token attribute, the token_file attribute, then
// SANDBOX_TOKEN and SANDBOX_TOKEN_FILE. A token file is read now (so a missing or empty
// one is a configuration error) and again for every request whenever it has changed: a
// runner replaces it with a fresh token before the current one expires, and a plan or
// apply longer than a token's life goes on with the next one. It returns where the token
// came from (never the token in any message); nil when there is none or it is unusable.
func (p *sandboxProvider) tokenSource(cfg providerModel, resp *provider.ConfigureResponse) (client.TokenSource, string) {
	if cfg.Token.ValueString() != "" && cfg.TokenFile.ValueString() != "" {
		resp.Diagnostics.AddAttributeError(path.Root("token_file"), "Conflicting sandbox credentials",
			"Set either token or token_file in the provider block, not both.")
		return nil, ""
	}
	fixed := func(tok string) client.TokenSource {
		if tok = strings.TrimSpace(tok); tok == "" {
			return nil
		}
		return client.StaticToken(tok)
	}
	switch {
	case cfg.Token.ValueString() != "":
		return fixed(cfg.Token.ValueString()), "token attribute"
	case cfg.TokenFile.ValueString() != "":
		return tokenFile(cfg.TokenFile.ValueString(), path.Root("token_file"), resp), "token_file attribute"
	case os.Getenv(EnvToken) != "":
		return fixed(os.Getenv(EnvToken)), EnvToken
	case os.Getenv(EnvTokenFile) != "":
		return tokenFile(os.Getenv(EnvTokenFile), path.Root("token_file"), resp), EnvTokenFile
	}
	return nil, ""
}

// tokenFile checks that the file at name holds a token and returns its source.
func tokenFile(name string, at path.Path, resp *provider.ConfigureResponse) client.TokenSource {
	_, err := client.ReadTokenFile(name)
	switch {
	case errors.Is(err, client.ErrTokenFileEmpty):
		resp.Diagnostics.AddAttributeError(at, "Missing sandbox token", "The token file "+name+" is empty.")
		return nil
	case errors.Is(err, client.ErrTokenFileTooLarge):
		resp.Diagnostics.AddAttributeError(at, "Invalid sandbox token file", name+" is larger than 64 KiB; it should hold one token.")
		return nil
	case err != nil:
		resp.Diagnostics.AddAttributeError(at, "Cannot read the sandbox token file", err.Error())
		return nil
	}
	return client.TokenFile(name)
}

func (p *sandboxProvider) Resources(context.Context) []func() resource.Resource {
	var out []func() resource.Resource
	for _, k := range api.Kinds() {
		out = append(out, func() resource.Resource { return &sandboxResource{kind: k} })
	}
	return out
}

func (p *sandboxProvider) DataSources(context.Context) []func() datasource.DataSource {
	return nil
}
