// Command fakeprovider is the smallest useful terraform-plugin-framework provider: it serves
// portal.local/sandbox/sandbox with an empty schema and no resources. The runner/tofu tests build
// it (when cmd/terraform-provider-sandbox is not there) to prove that a provider installed from
// the packed mirror is verified, extracted with its exec bit, and started by OpenTofu.
package main

import (
	"context"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

var version = "dev" // set with -ldflags "-X main.version=..."

type sandbox struct{}

func (sandbox) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "sandbox"
	resp.Version = version
}

func (sandbox) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{}
}

func (sandbox) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {}

func (sandbox) Resources(context.Context) []func() resource.Resource { return nil }

func (sandbox) DataSources(context.Context) []func() datasource.DataSource { return nil }

func main() {
	err := providerserver.Serve(context.Background(), func() provider.Provider { return sandbox{} },
		providerserver.ServeOpts{Address: "portal.local/sandbox/sandbox"})
	if err != nil {
		log.Fatal(err)
	}
}
