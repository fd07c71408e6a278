package s3

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/stretchr/testify/require"

	"gantry/models/environment"
	"gantry/models/identity"
	"gantry/runner/targets"
)

const (
	writeRole = "arn:aws:iam::123456789012:role/gantry-write"
	readRole  = "arn:aws:iam::123456789012:role/gantry-read"
	token     = "eyJhbGciOiJFUzI1NiJ9.WORKLOAD-TOKEN-SECRET.c2ln"
)

// phaseEnv gives the test process exactly the environment a phase of an AWS target gets
// from runner/targets (and no other AWS_ variable), with the token in its 0400 file, for
// a store at endpoint; it returns the token file's path.
func phaseEnv(t *testing.T, endpoint, scope, tok string) string {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, targets.TokenFile)
	require.NoError(t, os.WriteFile(file, []byte(tok), 0o400))
	in, err := targets.For(environment.Target{Kind: environment.TargetAWS, AWS: &environment.AWSTarget{
		ReadRoleARN: readRole, WriteRoleARN: writeRole, Region: "eu-west-1", STSEndpoint: endpoint, S3Endpoint: endpoint}})
	require.NoError(t, err)
	h, err := in.Handout(targets.Phase{Scope: scope, Session: "gantry-run1-" + scope, Dir: dir})
	require.NoError(t, err)
	require.Empty(t, h.Files)
	for _, kv := range h.Env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return file
}

func TestProviderTakesNoCredentialsFromConfiguration(t *testing.T) {
	h := newHarness(t)
	require.Empty(t, h.prov.Block.Attributes, "the provider block takes nothing: credentials come from the environment only")
	require.Empty(t, h.prov.Block.BlockTypes)
	var names []string
	for _, a := range h.res.Block.Attributes {
		names = append(names, a.Name)
		require.False(t, a.Sensitive, a.Name)
	}
	require.ElementsMatch(t, []string{"id", "arn", "bucket", "versioning", "tags", "force_destroy"}, names)
}

func TestConfigureNeedsARegion(t *testing.T) {
	store := newFakeStore(t)
	phaseEnv(t, store.srv.URL, identity.ScopeWrite, token)
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	require.Contains(t, errorsOf(newHarness(t).configure()), "Missing AWS region")
}

// TestBucketLifecycle creates, reads, changes, imports and destroys a bucket with only the
// variables Gantry's AWS target hands an apply: the SDK's chain exchanges the token file's
// token for the session the store signs with.
func TestBucketLifecycle(t *testing.T) {
	store := newFakeStore(t)
	phaseEnv(t, store.srv.URL, identity.ScopeWrite, token)
	h := newHarness(t)
	h.mustConfigure()

	const name = "gantry-ws-abc-logs"
	cfg := map[string]any{"bucket": name, "versioning": true, "tags": map[string]string{"team": "data"}}
	p := h.plan(tftypes.Value{}, cfg)
	require.Empty(t, errorsOf(p.diags))
	require.Equal(t, map[string]any{"id": "unknown", "arn": "unknown", "bucket": name, "versioning": true,
		"tags": map[string]string{"team": "data"}, "force_destroy": false}, h.attrs(p.state))
	require.Empty(t, store.callLog(), "planning a new bucket asks the store nothing")
	st, diags := h.apply(tftypes.Value{}, p, cfg)
	require.Empty(t, errorsOf(diags))
	require.Equal(t, map[string]any{"id": name, "arn": "arn:aws:s3:::" + name, "bucket": name, "versioning": true,
		"tags": map[string]string{"team": "data"}, "force_destroy": false}, h.attrs(st))
	b := store.bucket(name)
	require.NotNil(t, b)
	require.Equal(t, "Enabled", b.versioning)
	require.Equal(t, map[string]string{"team": "data"}, b.tags)
	require.Equal(t, []string{token}, store.tokens, "one exchange, of the token file's token")
	require.Equal(t, []string{writeRole}, store.roles, "an apply assumes the write role")
	require.Equal(t, []string{"900"}, store.duration, "sessions last 15 minutes")
	require.Equal(t, []string{"CreateBucket " + name, "PutBucketVersioning " + name, "PutBucketTagging " + name}, store.callLog())

	// Read finds what is there; nothing changed means no change planned.
	st, diags = h.read(st)
	require.Empty(t, errorsOf(diags))
	require.Equal(t, true, h.attrs(st)["versioning"])
	noop := h.plan(st, cfg)
	require.Empty(t, errorsOf(noop.diags))
	require.True(t, noop.state.Equal(st), "no change planned")

	// Changing the bucket's name replaces it; versioning and tags change in place.
	require.Equal(t, []string{`AttributeName("bucket")`}, h.plan(st, map[string]any{"bucket": name + "-2"}).replace)
	st = h.change(st, map[string]any{"bucket": name, "versioning": false, "tags": map[string]string{"team": "ml", "cost": "42"}})
	require.Equal(t, "Suspended", store.bucket(name).versioning)
	require.Equal(t, map[string]string{"team": "ml", "cost": "42"}, store.bucket(name).tags)
	st = h.change(st, map[string]any{"bucket": name, "force_destroy": false})
	require.Empty(t, store.bucket(name).tags)
	st, diags = h.read(st)
	require.Empty(t, errorsOf(diags))
	require.Equal(t, map[string]any{"id": name, "arn": "arn:aws:s3:::" + name, "bucket": name, "versioning": false,
		"tags": nil, "force_destroy": false}, h.attrs(st))

	// A change made outside OpenTofu is read back (drift).
	store.edit(name, func(b *fakeBucket) { b.versioning, b.tags = "Enabled", map[string]string{"owner": "someone"} })
	drift, diags := h.read(st)
	require.Empty(t, errorsOf(diags))
	require.Equal(t, true, h.attrs(drift)["versioning"])
	require.Equal(t, map[string]string{"owner": "someone"}, h.attrs(drift)["tags"])

	imported, diags := h.importState(name)
	require.Empty(t, errorsOf(diags))
	imported, diags = h.read(imported)
	require.Empty(t, errorsOf(diags))
	require.Equal(t, map[string]any{"id": name, "arn": "arn:aws:s3:::" + name, "bucket": name, "versioning": true,
		"tags": map[string]string{"owner": "someone"}, "force_destroy": false}, h.attrs(imported))

	// A bucket that holds objects is not destroyed unless force_destroy says so.
	store.edit(name, func(b *fakeBucket) { b.objects = []string{"a.txt", "b/c.txt"} })
	left, diags := h.destroy(st)
	require.Contains(t, errorsOf(diags), `S3 bucket "`+name+`" is not empty`)
	require.Contains(t, errorsOf(diags), "force_destroy = true")
	require.False(t, left.IsNull(), "the refused bucket stays in state")
	require.NotNil(t, store.bucket(name))
	st = h.change(st, map[string]any{"bucket": name, "force_destroy": true})
	gone, diags := h.destroy(st)
	require.Empty(t, errorsOf(diags))
	require.True(t, gone.IsNull())
	require.Nil(t, store.bucket(name))

	// A bucket deleted outside OpenTofu leaves state.
	removed, diags := h.read(st)
	require.Empty(t, errorsOf(diags))
	require.True(t, removed.IsNull())
}

func TestBucketNameAndTagRules(t *testing.T) {
	h := newHarness(t)
	for name, problem := range map[string]string{
		"gantry-ws-abc-logs": "", "a.b-c": "", "abc": "",
		"ab": "3 to 63", strings.Repeat("a", 64): "3 to 63", "Logs": "lower-case", "-abc": "begins and ends", "abc-": "begins and ends",
		"a..b": "two dots", "10.0.0.1": "IP address", "xn--abc": "reserved", "logs-s3alias": "reserved", "a_b": "lower-case",
	} {
		d := errorsOf(h.validate(map[string]any{"bucket": name}))
		if problem == "" {
			require.Empty(t, d, name)
		} else {
			require.Contains(t, d, "Invalid bucket name", name)
			require.Contains(t, d, problem, name)
		}
	}
	require.Contains(t, errorsOf(h.validate(map[string]any{"bucket": "abc", "tags": map[string]string{"aws:x": "1"}})), "reserved")
	require.Contains(t, errorsOf(h.validate(map[string]any{"bucket": "abc", "tags": map[string]string{"k": strings.Repeat("v", 257)}})), "256")
	many := map[string]string{}
	for i := range MaxTags + 1 {
		many[strings.Repeat("k", i+1)] = ""
	}
	require.Contains(t, errorsOf(h.validate(map[string]any{"bucket": "abc", "tags": many})), "Too many tags")
}

// TestErrorsNameTheBucketAndTheCodeNeverTheToken: a refusal says which bucket, which call
// and S3's (or STS's) code, and neither diagnostics nor state hold the token, even from a
// store that echoes it.
func TestErrorsNameTheBucketAndTheCodeNeverTheToken(t *testing.T) {
	store := newFakeStore(t)
	phaseEnv(t, store.srv.URL, identity.ScopeRead, token)
	h := newHarness(t)
	h.mustConfigure()
	const name = "gantry-ws-abc-data"
	store.deny["CreateBucket "+name] = "AccessDenied"
	cfg := map[string]any{"bucket": name}
	st, diags := h.apply(tftypes.Value{}, h.plan(tftypes.Value{}, cfg), cfg)
	d := errorsOf(diags)
	require.Contains(t, d, `Cannot create S3 bucket "`+name+`"`)
	require.Contains(t, d, "S3 CreateBucket failed: AccessDenied (HTTP 403)")
	require.True(t, st.IsNull())
	require.Equal(t, []string{readRole}, store.roles, "a plan's scope assumes the read role")
	noLeak(t, d, st)

	// The exchange itself refused: the store echoes the token; the provider does not.
	store2 := newFakeStore(t)
	refused := "eyJhbGciOiJFUzI1NiJ9.REFUSED-TOKEN-SECRET.c2ln"
	store2.refuse = refused
	phaseEnv(t, store2.srv.URL, identity.ScopeWrite, refused)
	h2 := newHarness(t)
	h2.mustConfigure()
	st, diags = h2.read(h2.object(map[string]any{"id": name, "bucket": name, "versioning": false, "force_destroy": false}))
	d = errorsOf(diags)
	require.Contains(t, d, `Cannot read S3 bucket "`+name+`"`)
	require.Contains(t, d, "The web identity exchange (STS AssumeRoleWithWebIdentity) was refused: AccessDenied (HTTP 403)")
	require.Contains(t, d, "[redacted]", "the echoed token is replaced")
	require.NotContains(t, d, refused)
	noLeak(t, d, st)
}

// noLeak fails if the token or a session credential is in any of texts or states.
func noLeak(t *testing.T, diags string, states ...tftypes.Value) {
	t.Helper()
	for _, secret := range []string{"WORKLOAD-TOKEN-SECRET", "REFUSED-TOKEN-SECRET", fakeSecret, fakeSession} {
		require.NotContains(t, diags, secret)
		for _, st := range states {
			raw, err := tfprotov6.NewDynamicValue(st.Type(), st)
			require.NoError(t, err)
			require.NotContains(t, string(raw.MsgPack), secret)
		}
	}
}
