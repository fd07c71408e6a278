// Package provider is the OpenTofu provider for the sandbox cloud (source address
// portal.local/sandbox/sandbox), built with terraform-plugin-framework. Its resources are
// generated from the kinds in gantry/sandbox/api, the same table the cloud validates against, and
// they call the cloud through gantry/sandbox/client.
//
// Credentials: the provider reads a workload identity token from the runner's environment
// (SANDBOX_TOKEN, or SANDBOX_TOKEN_FILE naming a mounted secret file). The token is never echoed:
// not into state, plans, diagnostics or logs.
package provider

import (
	"context"
	"fmt"
	"io"
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

// maxTokenFile bounds the token file.
const maxTokenFile = 64 << 10

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
				Description: "Path of a file holding the workload identity token (a mounted secret), read when the provider is configured. Default: the " + EnvTokenFile + " environment variable.",
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
	token, source := p.token(cfg, resp)
	if token == "" && resp.Diagnostics.ErrorsCount() == before {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Missing sandbox token",
			"The sandbox provider needs a workload identity token. Gantry's runner provides it in the "+EnvToken+
				" or "+EnvTokenFile+" environment variable; outside Gantry set one of them (or the provider's token_file).")
	}
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := client.New(endpoint, token, client.WithUserAgent(fmt.Sprintf("terraform-provider-sandbox/%s (%s)", p.version, req.TerraformVersion)))
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Invalid sandbox endpoint", err.Error())
		return
	}
	tflog.Debug(ctx, "sandbox provider configured", map[string]any{"endpoint": endpoint, "token_source": source})
	resp.ResourceData = c
	resp.DataSourceData = c
}

// token finds the token: the token attribute, the token_file attribute, then SANDBOX_TOKEN and
// SANDBOX_TOKEN_FILE. It returns where it came from (never the token in any message).
func (p *sandboxProvider) token(cfg providerModel, resp *provider.ConfigureResponse) (token, source string) {
	if cfg.Token.ValueString() != "" && cfg.TokenFile.ValueString() != "" {
		resp.Diagnostics.AddAttributeError(path.Root("token_file"), "Conflicting sandbox credentials",
			"Set either token or token_file in the provider block, not both.")
		return "", ""
	}
	switch {
	case cfg.Token.ValueString() != "":
		return strings.TrimSpace(cfg.Token.ValueString()), "token attribute"
	case cfg.TokenFile.ValueString() != "":
		return readTokenFile(cfg.TokenFile.ValueString(), path.Root("token_file"), resp), "token_file attribute"
	case os.Getenv(EnvToken) != "":
		return strings.TrimSpace(os.Getenv(EnvToken)), EnvToken
	case os.Getenv(EnvTokenFile) != "":
		return readTokenFile(os.Getenv(EnvTokenFile), path.Root("token_file"), resp), EnvTokenFile
	}
	return "", ""
}

func readTokenFile(name string, at path.Path, resp *provider.ConfigureResponse) string {
	f, err := os.Open(name)
	if err != nil {
		resp.Diagnostics.AddAttributeError(at, "Cannot read the sandbox token file", err.Error())
		return ""
	}
	defer f.Close()
	body, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		resp.Diagnostics.AddAttributeError(at, "Cannot read the sandbox token file", fmt.Sprintf("%s: %v", name, err))
		return ""
	}
	if len(body) > maxTokenFile {
		resp.Diagnostics.AddAttributeError(at, "Invalid sandbox token file", name+" is larger than 64 KiB; it should hold one token.")
		return ""
	}
	tok := strings.TrimSpace(string(body))
	if tok == "" {
		resp.Diagnostics.AddAttributeError(at, "Missing sandbox token", "The token file "+name+" is empty.")
	}
	return tok
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
