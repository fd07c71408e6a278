package s3

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// failure is what went wrong with one call, as a person reads it: the S3 (or STS) error
// code and HTTP status, never a credential.
type failure struct {
	service string // "S3", or "STS" when the web identity exchange failed
	op      string // the failing operation: "CreateBucket", "AssumeRoleWithWebIdentity"
	code    string // the API error code: "AccessDenied", "NoSuchBucket"; "" for a transport error
	status  int    // the HTTP status; 0 when no response came
	message string // the error message, redacted
}

// inspect takes err apart: the innermost operation (an S3 call fails with the STS
// exchange it needed inside it), its API error code and HTTP status.
func inspect(err error) failure {
	var f failure
	for e := err; e != nil; e = errors.Unwrap(e) {
		if oe, ok := e.(*smithy.OperationError); ok {
			f.service, f.op = oe.ServiceID, oe.OperationName
		}
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		f.code, f.message = api.ErrorCode(), api.ErrorMessage()
	} else {
		f.message = err.Error()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		f.status = re.HTTPStatusCode()
	}
	f.message = redact(f.message)
	return f
}

// notFound reports whether S3 itself (not the credential exchange) answered that the
// bucket does not exist.
func (f failure) notFound() bool {
	return f.service == "S3" && (f.code == "NotFound" || f.code == "NoSuchBucket" || (f.code == "" && f.status == http.StatusNotFound))
}

// noTags reports whether S3 answered that the bucket has no tags.
func (f failure) noTags() bool {
	return f.service == "S3" && f.code == "NoSuchTagSet"
}

// describe is the diagnostic of a failed call on bucket: summary and detail.
func describe(bucket, action string, err error) (string, string) {
	f := inspect(err)
	summary := fmt.Sprintf("Cannot %s S3 bucket %q", action, bucket)
	var what string
	switch {
	case f.code != "" && f.status != 0:
		what = fmt.Sprintf("%s (HTTP %d)", f.code, f.status)
	case f.code != "":
		what = f.code
	case f.status != 0:
		what = fmt.Sprintf("HTTP %d", f.status)
	}
	var b strings.Builder
	switch {
	case f.service == "STS":
		fmt.Fprintf(&b, "The web identity exchange (STS %s) was refused", f.op)
	case f.op != "":
		fmt.Fprintf(&b, "%s %s failed", f.service, f.op)
	default:
		b.WriteString("The request failed")
	}
	if what != "" {
		fmt.Fprintf(&b, ": %s", what)
	}
	if msg := strings.TrimRight(f.message, ". "); msg != "" && msg != f.code {
		fmt.Fprintf(&b, ": %s", msg)
	}
	b.WriteString(".")
	switch {
	case f.service == "STS":
		b.WriteString(" The role's trust policy decides which workload tokens may assume it (docs/targets.md).")
	case f.code == "AccessDenied" || f.status == http.StatusForbidden:
		b.WriteString(" The role this phase assumed is not allowed to do this (a plan's role only reads; a delete needs an approval that covered it).")
	}
	return summary, b.String()
}

// redact removes from s whatever secret the environment holds for the SDK: the web
// identity token (the file's content) and static keys. The SDK puts none of them into its
// errors, and this keeps it so should a store echo one.
func redact(s string) string {
	secrets := []string{os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN")}
	if f := os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE"); f != "" {
		if data, err := os.ReadFile(f); err == nil && len(data) <= 64<<10 {
			secrets = append(secrets, strings.TrimSpace(string(data)))
		}
	}
	for _, v := range secrets {
		if len(v) >= 8 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}
