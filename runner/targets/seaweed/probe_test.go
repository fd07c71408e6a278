package seaweed_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"gantry/models/db/dbtest"
	"gantry/runner/targets/seaweed"
)

// The probe is this test binary run again as a phase's process would be: with nothing but the
// environment the AWS-style web identity integration hands a phase, the standard AWS SDK
// credential chain exchanges the token file's token at the STS endpoint itself, then tries the
// S3 operations it is given. It prints one JSON line per step and never a credential.
const probeEnv = "GANTRY_SEAWEED_PROBE"

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) != "" {
		os.Exit(probeMain(os.Getenv(probeEnv)))
	}
	os.Exit(dbtest.Main(m))
}

// step is what the probe saw of one step: "ok", or the error's code ("AccessDenied").
type step struct {
	Op      string `json:"op"`
	Result  string `json:"result"`
	Message string `json:"message,omitempty"`
	Source  string `json:"source,omitempty"` // the credentials' provider
}

// probeMain runs ops, separated by spaces: "create:<bucket>", "put:<bucket>/<key>",
// "head:<bucket>/<key>", "delete-object:<bucket>/<key>", "delete-bucket:<bucket>", after
// retrieving credentials ("creds"). A failed step does not stop the next ones.
func probeMain(ops string) int {
	ctx := context.Background()
	out := json.NewEncoder(os.Stdout)
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		_ = out.Encode(step{Op: "config", Result: "error", Message: err.Error()})
		return 0
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		_ = out.Encode(step{Op: "creds", Result: code(err), Message: err.Error()})
		return 0
	}
	source := creds.Source
	if creds.SessionToken == "" || !creds.CanExpire {
		source += " (not temporary)"
	}
	_ = out.Encode(step{Op: "creds", Result: "ok", Source: source})
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	for _, op := range strings.Fields(ops) {
		verb, arg, _ := strings.Cut(op, ":")
		bucket, key, _ := strings.Cut(arg, "/")
		var err error
		switch verb {
		case "create":
			_, err = client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
		case "put":
			_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader("hello")})
		case "head":
			_, err = client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
		case "delete-object":
			_, err = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key})
		case "delete-bucket":
			_, err = client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &bucket})
		default:
			err = fmt.Errorf("unknown probe op %q", op)
		}
		s := step{Op: op, Result: "ok"}
		if err != nil {
			s.Result, s.Message = code(err), err.Error()
		}
		_ = out.Encode(s)
	}
	return 0
}

// code is an AWS error's code ("AccessDenied", "InvalidParameterValue"), or "error".
func code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return "error"
}

// phaseEnv is the environment of a phase under the AWS-style web identity integration, and
// nothing else (no AWS_* of the developer's, no ~/.aws): the token in a 0600 file of its own.
func phaseEnv(t *testing.T, srv *seaweed.Server, roleARN, token string) []string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "web-identity-token")
	require.NoError(t, os.WriteFile(file, []byte(token), 0o600))
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"AWS_ROLE_ARN=" + roleARN,
		"AWS_WEB_IDENTITY_TOKEN_FILE=" + file,
		"AWS_ROLE_SESSION_NAME=gantry-phase",
		"AWS_REGION=" + seaweed.Region,
		"AWS_ENDPOINT_URL_STS=" + srv.URL,
		"AWS_ENDPOINT_URL_S3=" + srv.URL,
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none"),
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// probe runs the probe with env and ops and returns its steps by op.
func probe(t *testing.T, env []string, ops ...string) map[string]step {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(env, probeEnv+"="+strings.Join(ops, " "))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "probe: %s", stderr.String())
	steps := map[string]step{}
	lines := bufio.NewScanner(bytes.NewReader(out))
	for lines.Scan() {
		var s step
		require.NoError(t, json.Unmarshal(lines.Bytes(), &s), "probe line %q", lines.Text())
		steps[s.Op] = s
	}
	return steps
}

// results is steps as "op=result" in the order of ops, "creds" first: one string to compare.
func results(steps map[string]step, ops ...string) string {
	var out []string
	for _, op := range append([]string{"creds"}, ops...) {
		if s, ok := steps[op]; ok {
			out = append(out, op+"="+s.Result)
		}
	}
	return strings.Join(out, " ")
}
