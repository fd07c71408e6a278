package s3

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// bucketResource is s3_bucket: one general purpose bucket, its versioning and its tags.
type bucketResource struct{ c *client }

var (
	_ resource.Resource                = (*bucketResource)(nil)
	_ resource.ResourceWithConfigure   = (*bucketResource)(nil)
	_ resource.ResourceWithImportState = (*bucketResource)(nil)
)

// bucketModel is the resource's state.
type bucketModel struct {
	ID           types.String `tfsdk:"id"`
	Bucket       types.String `tfsdk:"bucket"`
	ARN          types.String `tfsdk:"arn"`
	Versioning   types.Bool   `tfsdk:"versioning"`
	Tags         types.Map    `tfsdk:"tags"`
	ForceDestroy types.Bool   `tfsdk:"force_destroy"`
}

func (r *bucketResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_bucket"
}

func (r *bucketResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "A general purpose S3 bucket. Destroying it refuses a bucket that still holds objects unless force_destroy is true.",
		Attributes: map[string]schema.Attribute{
			"id":  schema.StringAttribute{Computed: true, Description: "The bucket's name.", PlanModifiers: keep},
			"arn": schema.StringAttribute{Computed: true, Description: "arn:aws:s3:::<bucket>.", PlanModifiers: keep},
			"bucket": schema.StringAttribute{Required: true,
				Description:   "The bucket's name (3 to 63 lower-case letters, digits, dots and hyphens). Changing it replaces the bucket.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{bucketNameValidator{}}},
			"versioning": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "Keep every version of every object. Turning it off suspends versioning: versions kept so far stay."},
			"tags": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				Description: "The bucket's tags.", Validators: []validator.Map{tagsValidator{}}},
			"force_destroy": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "Delete every object (and object version) when the bucket is destroyed. Default false: destroying a bucket that holds objects fails."},
		},
	}
}

func (r *bucketResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	c, err := configured(req.ProviderData)
	if err != nil {
		resp.Diagnostics.AddError("Provider not configured", err.Error())
		return
	}
	r.c = c
}

// ready reports (as an error) a resource used before the provider was configured.
func (r *bucketResource) ready(d *diag.Diagnostics) bool {
	if r.c == nil {
		d.AddError("Provider not configured", "The s3 provider was not configured before use.")
		return false
	}
	return true
}

func (r *bucketResource) fail(d *diag.Diagnostics, bucket, action string, err error) {
	summary, detail := describe(bucket, action, err)
	d.AddError(summary, detail)
}

func (r *bucketResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan bucketModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics) {
		return
	}
	name := plan.Bucket.ValueString()
	in := &awss3.CreateBucketInput{Bucket: aws.String(name)}
	if r.c.region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(r.c.region)}
	}
	if _, err := r.c.s3.CreateBucket(ctx, in); err != nil {
		r.fail(&resp.Diagnostics, name, "create", err)
		return
	}
	// The bucket exists from here on: whatever fails next, state records it (tainted),
	// so the next run replaces or destroys it instead of losing track of it.
	created := plan
	created.ID, created.ARN = types.StringValue(name), types.StringValue("arn:aws:s3:::"+name)
	created.Versioning, created.Tags = types.BoolValue(false), types.MapNull(types.StringType)
	if plan.Versioning.ValueBool() {
		if err := r.setVersioning(ctx, name, true); err != nil {
			r.fail(&resp.Diagnostics, name, "turn on versioning of", err)
			resp.Diagnostics.Append(resp.State.Set(ctx, &created)...)
			return
		}
		created.Versioning = types.BoolValue(true)
	}
	tags, d := tagsOf(ctx, plan.Tags)
	resp.Diagnostics.Append(d...)
	if len(tags) > 0 && !resp.Diagnostics.HasError() {
		if err := r.putTags(ctx, name, tags); err != nil {
			r.fail(&resp.Diagnostics, name, "tag", err)
			resp.Diagnostics.Append(resp.State.Set(ctx, &created)...)
			return
		}
	}
	created.Tags = plan.Tags
	resp.Diagnostics.Append(resp.State.Set(ctx, &created)...)
}

func (r *bucketResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st bucketModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics) {
		return
	}
	name := st.Bucket.ValueString()
	if name == "" {
		name = st.ID.ValueString()
	}
	if _, err := r.c.s3.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(name)}); err != nil {
		if inspect(err).notFound() {
			resp.State.RemoveResource(ctx)
			return
		}
		r.fail(&resp.Diagnostics, name, "read", err)
		return
	}
	v, err := r.c.s3.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String(name)})
	if err != nil {
		r.fail(&resp.Diagnostics, name, "read the versioning of", err)
		return
	}
	tags, err := r.tags(ctx, name)
	if err != nil {
		r.fail(&resp.Diagnostics, name, "read the tags of", err)
		return
	}
	st.ID, st.Bucket, st.ARN = types.StringValue(name), types.StringValue(name), types.StringValue("arn:aws:s3:::"+name)
	st.Versioning = types.BoolValue(v.Status == s3types.BucketVersioningStatusEnabled)
	if st.ForceDestroy.IsNull() {
		st.ForceDestroy = types.BoolValue(false)
	}
	// No tags read back as the configuration said them: null stays null, {} stays {}.
	if len(tags) > 0 || (!st.Tags.IsNull() && !st.Tags.IsUnknown()) {
		m, d := types.MapValueFrom(ctx, types.StringType, tags)
		resp.Diagnostics.Append(d...)
		st.Tags = m
	} else {
		st.Tags = types.MapNull(types.StringType)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *bucketResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, prior bucketModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics) {
		return
	}
	name := prior.Bucket.ValueString()
	next := prior
	next.ForceDestroy = plan.ForceDestroy
	if !plan.Versioning.Equal(prior.Versioning) {
		if err := r.setVersioning(ctx, name, plan.Versioning.ValueBool()); err != nil {
			r.fail(&resp.Diagnostics, name, "change the versioning of", err)
			resp.Diagnostics.Append(resp.State.Set(ctx, &next)...)
			return
		}
		next.Versioning = plan.Versioning
	}
	want, d := tagsOf(ctx, plan.Tags)
	resp.Diagnostics.Append(d...)
	have, d := tagsOf(ctx, prior.Tags)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !maps.Equal(want, have) {
		var err error
		if len(want) == 0 {
			_, err = r.c.s3.DeleteBucketTagging(ctx, &awss3.DeleteBucketTaggingInput{Bucket: aws.String(name)})
		} else {
			err = r.putTags(ctx, name, want)
		}
		if err != nil {
			r.fail(&resp.Diagnostics, name, "change the tags of", err)
			resp.Diagnostics.Append(resp.State.Set(ctx, &next)...)
			return
		}
	}
	next.Tags = plan.Tags
	resp.Diagnostics.Append(resp.State.Set(ctx, &next)...)
}

func (r *bucketResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st bucketModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics) {
		return
	}
	name := st.Bucket.ValueString()
	if st.ForceDestroy.ValueBool() {
		if err := r.empty(ctx, name); err != nil {
			r.fail(&resp.Diagnostics, name, "empty", err)
			return
		}
	}
	_, err := r.c.s3.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String(name)})
	if err == nil || inspect(err).notFound() {
		return
	}
	if f := inspect(err); f.service == "S3" && f.code == "BucketNotEmpty" {
		resp.Diagnostics.AddError("S3 bucket "+strconv.Quote(name)+" is not empty",
			"S3 refused to delete it (BucketNotEmpty): it still holds objects or object versions. Empty it, or set force_destroy = true "+
				"and apply that before destroying: the objects are then deleted with it.")
		return
	}
	r.fail(&resp.Diagnostics, name, "delete", err)
}

func (r *bucketResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("bucket"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("force_destroy"), false)...)
}

func (r *bucketResource) setVersioning(ctx context.Context, name string, on bool) error {
	status := s3types.BucketVersioningStatusSuspended
	if on {
		status = s3types.BucketVersioningStatusEnabled
	}
	_, err := r.c.s3.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String(name),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: status}})
	return err
}

func (r *bucketResource) putTags(ctx context.Context, name string, tags map[string]string) error {
	set := make([]s3types.Tag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		set = append(set, s3types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	_, err := r.c.s3.PutBucketTagging(ctx, &awss3.PutBucketTaggingInput{Bucket: aws.String(name), Tagging: &s3types.Tagging{TagSet: set}})
	return err
}

// tags reads the bucket's tags (none: an empty map).
func (r *bucketResource) tags(ctx context.Context, name string) (map[string]string, error) {
	out, err := r.c.s3.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: aws.String(name)})
	if err != nil {
		if inspect(err).noTags() {
			return map[string]string{}, nil
		}
		return nil, err
	}
	tags := make(map[string]string, len(out.TagSet))
	for _, t := range out.TagSet {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return tags, nil
}

// empty deletes every object version and delete marker of the bucket (every object, for
// a bucket that never had versioning), a thousand at a time.
func (r *bucketResource) empty(ctx context.Context, name string) error {
	pages := awss3.NewListObjectVersionsPaginator(r.c.s3, &awss3.ListObjectVersionsInput{Bucket: aws.String(name)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return err
		}
		var ids []s3types.ObjectIdentifier
		for _, v := range page.Versions {
			ids = append(ids, s3types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		}
		for _, m := range page.DeleteMarkers {
			ids = append(ids, s3types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
		}
		if len(ids) == 0 {
			continue
		}
		out, err := r.c.s3.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: aws.String(name),
			Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			return err
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return &objectError{key: aws.ToString(e.Key), code: aws.ToString(e.Code), n: len(out.Errors)}
		}
	}
	return nil
}

// objectError is a DeleteObjects answer that left objects behind.
type objectError struct {
	key, code string
	n         int
}

func (e *objectError) Error() string {
	return fmt.Sprintf("S3 DeleteObjects left %d object(s), the first %q: %s", e.n, e.key, e.code)
}

// tagsOf is a tags attribute as a Go map (null or unknown: none).
func tagsOf(ctx context.Context, m types.Map) (map[string]string, diag.Diagnostics) {
	out := map[string]string{}
	if m.IsNull() || m.IsUnknown() {
		return out, nil
	}
	d := m.ElementsAs(ctx, &out, false)
	return out, d
}
