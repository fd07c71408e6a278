package s3

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var bucketChars = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// BucketNameProblem says what is wrong with name as a general purpose S3 bucket name (""
// when nothing is): AWS's rules, which S3-compatible stores follow.
func BucketNameProblem(name string) string {
	switch {
	case len(name) < 3 || len(name) > 63:
		return fmt.Sprintf("a bucket name has 3 to 63 characters, this one %d", len(name))
	case !bucketChars.MatchString(name):
		return "a bucket name has only lower-case letters, digits, dots and hyphens, and begins and ends with a letter or digit"
	case strings.Contains(name, ".."):
		return "a bucket name has no two dots in a row"
	case isIPv4(name):
		return "a bucket name is not an IP address"
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return fmt.Sprintf("a bucket name does not begin with %q (reserved)", p)
		}
	}
	for _, s := range []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"} {
		if strings.HasSuffix(name, s) {
			return fmt.Sprintf("a bucket name does not end with %q (reserved)", s)
		}
	}
	return ""
}

func isIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}

// TagProblem says what is wrong with one bucket tag ("" when nothing is): keys of 1 to 128
// characters not beginning with "aws:", values of at most 256.
func TagProblem(key, value string) string {
	switch n := utf8.RuneCountInString(key); {
	case n == 0 || n > 128:
		return fmt.Sprintf("tag key %q: 1 to 128 characters", key)
	case strings.HasPrefix(strings.ToLower(key), "aws:"):
		return fmt.Sprintf("tag key %q: the aws: prefix is reserved", key)
	}
	if utf8.RuneCountInString(value) > 256 {
		return fmt.Sprintf("tag %q: a value has at most 256 characters", key)
	}
	return ""
}

// MaxTags is how many tags a bucket holds at most.
const MaxTags = 50

type bucketNameValidator struct{}

func (bucketNameValidator) Description(context.Context) string {
	return "a general purpose S3 bucket name"
}
func (v bucketNameValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (bucketNameValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if p := BucketNameProblem(req.ConfigValue.ValueString()); p != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid bucket name", fmt.Sprintf("%q: %s.", req.ConfigValue.ValueString(), p))
	}
}

type tagsValidator struct{}

func (tagsValidator) Description(context.Context) string {
	return fmt.Sprintf("at most %d tags, keys of 1 to 128 characters, values of at most 256", MaxTags)
}
func (v tagsValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (tagsValidator) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	elems := req.ConfigValue.Elements()
	if len(elems) > MaxTags {
		resp.Diagnostics.AddAttributeError(req.Path, "Too many tags", fmt.Sprintf("A bucket holds at most %d tags, not %d.", MaxTags, len(elems)))
	}
	for k, v := range elems {
		s, ok := v.(types.String)
		if !ok || s.IsUnknown() {
			continue
		}
		if s.IsNull() {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(k), "Invalid tag", fmt.Sprintf("tag %q has no value (use \"\").", k))
			continue
		}
		if p := TagProblem(k, s.ValueString()); p != "" {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(k), "Invalid tag", p+".")
		}
	}
}
