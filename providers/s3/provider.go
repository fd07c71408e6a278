// Package s3 is the small OpenTofu provider Gantry ships for S3 buckets (source address
// portal.local/gantry/s3, plugin protocol 6), built with terraform-plugin-framework and
// aws-sdk-go-v2. It exists because no S3 provider can be built from the module proxy:
// hashicorp/aws is served only at a 2019 version that OpenTofu cannot load, and the
// S3-compatible stores' own providers are AGPL. It has one resource, s3_bucket.
//
// Credentials come only from the AWS SDK's default chain, never from configuration: the
// provider block has no attributes at all. Gantry's AWS target hands a phase AWS_ROLE_ARN,
// AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_SESSION_NAME and AWS_REGION (runner/targets), and
// the chain exchanges the phase's workload token itself (AssumeRoleWithWebIdentity),
// reading the token file again at every exchange. AWS_ENDPOINT_URL_STS and
// AWS_ENDPOINT_URL_S3 point it at an S3-compatible store; with an S3 endpoint override,
// buckets are addressed path-style. No token, key or session credential reaches state,
// plans or diagnostics: errors name the bucket, the operation and S3's error code.
package s3

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// Address is the provider's source address: Gantry builds it into the offline mirror
// beside the sandbox provider (portal.local/*/* is installed only from there).
const Address = "portal.local/gantry/s3"

// SessionDuration is the life the provider asks of a web identity session: AWS's shortest,
// and the longest a Gantry workload token lives (a store may not shorten a session to its
// token's expiry, SeaweedFS does not).
const SessionDuration = 15 * time.Minute

type s3Provider struct{ version string }

var _ provider.Provider = (*s3Provider)(nil)

// New returns the provider factory for providerserver.Serve.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &s3Provider{version: version} }
}

func (p *s3Provider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "s3"
	resp.Version = p.version
}

func (p *s3Provider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "S3 buckets on AWS or an S3-compatible store. Everything comes from the environment, through the AWS SDK's " +
			"default credential chain: AWS_REGION, AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE (Gantry's AWS target sets them), " +
			"AWS_ENDPOINT_URL_STS and AWS_ENDPOINT_URL_S3 for a store other than AWS. The provider block takes no attributes: " +
			"credentials are never configuration.",
	}
}

// client is what the resources call.
type client struct {
	s3     *awss3.Client
	region string
}

func (p *s3Provider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithAppID("gantry-s3-provider/"+p.version),
		config.WithWebIdentityRoleCredentialOptions(func(o *stscreds.WebIdentityRoleOptions) { o.Duration = SessionDuration }))
	if err != nil {
		resp.Diagnostics.AddError("Cannot load the AWS configuration", redact(err.Error()))
		return
	}
	if cfg.Region == "" {
		resp.Diagnostics.AddError("Missing AWS region",
			"Set AWS_REGION: Gantry's AWS target sets it from the environment's settings.")
		return
	}
	compatible := endpointOverride()
	c := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		if compatible {
			// An S3-compatible store: buckets in the path (no wildcard DNS or certificate
			// needed), and checksums only where S3 requires them (not every store knows the
			// newer flexible checksums).
			o.UsePathStyle = true
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
	tflog.Debug(ctx, "s3 provider configured", map[string]any{"region": cfg.Region, "path_style": compatible,
		"web_identity": os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != ""})
	resp.ResourceData = &client{s3: c, region: cfg.Region}
}

// endpointOverride reports whether the environment points S3 at another endpoint than
// AWS's (AWS_ENDPOINT_URL_S3, or AWS_ENDPOINT_URL for every service).
func endpointOverride() bool {
	return os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
}

func (p *s3Provider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &bucketResource{} }}
}

func (p *s3Provider) DataSources(context.Context) []func() datasource.DataSource { return nil }

// configured takes the client the provider handed a resource (nil before Configure).
func configured(data any) (*client, error) {
	if data == nil {
		return nil, nil
	}
	c, ok := data.(*client)
	if !ok {
		return nil, fmt.Errorf("unexpected provider data %T", data)
	}
	return c, nil
}
