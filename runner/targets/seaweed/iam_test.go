package seaweed

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The IAM configuration Start writes for a workspace's roles: one OIDC provider with its
// audience and CA file, fifteen-minute sessions signed with the given key, nothing allowed by
// default, and each role trusting the provider's tokens of its workspace and scope.
func TestIAMConfigOfWorkspaceRoles(t *testing.T) {
	write, read := GantryRoles("ws1", "gantry", map[string]string{"gantry_ws": "ws1"})
	key := []byte(strings.Repeat("k", 32))
	got, err := iamConfig([]Provider{{Name: "gantry", Issuer: "https://127.0.0.1:9702", Audiences: []string{Audience},
		CAPEM: []byte("pem"), PrincipalTagKeys: []string{"gantry_deletes"}}},
		[]Role{write, read}, key, map[string]string{"gantry": "/srv/ca-gantry.pem"})
	require.NoError(t, err)
	want := `{
  "policies": [
    {"name": "ws1-write-policy", "document": {"Version": "2012-10-17", "Statement": [
      {"Effect": "Allow", "Action": ["s3:*"],
       "Resource": ["arn:aws:s3:::gantry-${jwt:gantry_ws}-*", "arn:aws:s3:::gantry-${jwt:gantry_ws}-*/*"]},
      {"Effect": "Deny", "Action": ["s3:DeleteBucket"],
       "Resource": ["arn:aws:s3:::gantry-${jwt:gantry_ws}-*", "arn:aws:s3:::gantry-${jwt:gantry_ws}-*/*"],
       "Condition": {"StringNotLike": {"jwt:gantry_approved": ["*\"delete\"*"]}}}]}},
    {"name": "ws1-read-policy", "document": {"Version": "2012-10-17", "Statement": [
      {"Effect": "Allow", "Action": ["s3:GetObject", "s3:HeadObject", "s3:ListBucket", "s3:GetBucketLocation",
         "s3:GetObjectVersion", "s3:ListBucketVersions", "s3:GetBucketVersioning", "s3:GetBucketTagging",
         "s3:GetObjectTagging", "s3:GetBucketPolicy", "s3:GetBucketAcl", "s3:GetObjectAcl"],
       "Resource": ["arn:aws:s3:::gantry-${jwt:gantry_ws}-*", "arn:aws:s3:::gantry-${jwt:gantry_ws}-*/*"]}]}}],
  "policy": {"defaultEffect": "Deny", "storeType": "memory"},
  "providers": [{"name": "gantry", "type": "oidc", "enabled": true, "config": {
    "issuer": "https://127.0.0.1:9702", "clientIds": ["sts.gantry"], "tlsCaCert": "/srv/ca-gantry.pem",
    "allowedPrincipalTagKeys": ["gantry_deletes"]}}],
  "roles": [
    {"roleName": "ws1-write", "roleArn": "arn:aws:iam::role/ws1-write", "attachedPolicies": ["ws1-write-policy"],
     "trustPolicy": {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Federated": "gantry"},
       "Action": ["sts:AssumeRoleWithWebIdentity"],
       "Condition": {"StringEquals": {"oidc:gantry_ws": ["ws1"], "oidc:scope": ["write"]}}}]}},
    {"roleName": "ws1-read", "roleArn": "arn:aws:iam::role/ws1-read", "attachedPolicies": ["ws1-read-policy"],
     "trustPolicy": {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Federated": "gantry"},
       "Action": ["sts:AssumeRoleWithWebIdentity"],
       "Condition": {"StringEquals": {"oidc:gantry_ws": ["ws1"], "oidc:scope": ["read"]}}}]}}],
  "sts": {"tokenDuration": "15m0s", "maxSessionLength": "15m0s", "issuer": "gantry-seaweedfs-sts",
    "signingKey": "a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2s="}
}`
	require.JSONEq(t, want, string(got))
}

func TestIAMConfigRefusals(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	p := Provider{Name: "gantry", Issuer: "http://127.0.0.1:1", Audiences: []string{Audience}}
	write, _ := GantryRoles("ws1", "", nil)
	for name, c := range map[string]struct {
		providers []Provider
		roles     []Role
		key       []byte
		want      string
	}{
		"a short key":           {[]Provider{p}, nil, key[:31], "at least 32 bytes"},
		"no provider":           {nil, nil, key, "no OpenID Connect provider"},
		"an issuer not a URL":   {[]Provider{{Name: "x", Issuer: "issuer", Audiences: []string{"a"}}}, nil, key, "not an http(s) URL"},
		"no audience":           {[]Provider{{Name: "x", Issuer: "http://h"}}, nil, key, "accepts no audience"},
		"a name with a slash":   {[]Provider{{Name: "a/b", Issuer: "http://h", Audiences: []string{"a"}}}, nil, key, "invalid or repeated"},
		"a repeated role":       {[]Provider{p}, []Role{write, write}, key, "invalid or repeated"},
		"an unknown provider":   {[]Provider{p}, []Role{{Name: "r", Provider: "other", Policy: write.Policy}}, key, "unknown provider"},
		"a role allowing none":  {[]Provider{p}, []Role{{Name: "r"}}, key, "allows nothing"},
		"a statement of no act": {[]Provider{p}, []Role{{Name: "r", Policy: []Statement{{Effect: "Allow", Resources: []string{"*"}}}}}, key, "needs Allow or Deny"},
		"a provider among several unnamed": {[]Provider{p, {Name: "p2", Issuer: "http://h2", Audiences: []string{"a"}}},
			[]Role{write}, key, "names no provider among several"},
	} {
		_, err := iamConfig(c.providers, c.roles, c.key, nil)
		require.ErrorContains(t, err, c.want, name)
	}
}

// The cache key follows the pin: another go.sum is another directory, named by the pinned commit.
func TestCacheDirFollowsThePin(t *testing.T) {
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	version, err := PinnedVersion(root)
	require.NoError(t, err)
	commit, err := pinnedCommit(version)
	require.NoError(t, err)
	require.Len(t, commit, 12)
	require.True(t, strings.HasSuffix(version, "-"+commit), version)
	dir, err := CacheDir(root)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(filepath.Base(dir), commit+"-"), dir)

	other := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(other, "tools", "seaweedfs"), 0o755))
	for _, name := range []string{"go.mod", "go.sum", "tools.go"} {
		b, err := os.ReadFile(filepath.Join(root, "tools", "seaweedfs", name))
		require.NoError(t, err)
		if name == "go.sum" {
			b = append(b, "example.com/x v1.0.0 h1:x=\n"...)
		}
		require.NoError(t, os.WriteFile(filepath.Join(other, "tools", "seaweedfs", name), b, 0o644))
	}
	otherDir, err := CacheDir(other)
	require.NoError(t, err)
	require.NotEqual(t, dir, otherDir)
	require.Equal(t, filepath.Dir(dir), filepath.Dir(otherDir))

	_, err = pinnedCommit("v1.2.3")
	require.ErrorContains(t, err, "not a pseudo-version")
}

// BinaryVersion reads the stamped commit from `weed version`; an unstamped build (upstream's
// `go install`) or another program reports none.
func TestBinaryVersionReadsTheStampedCommit(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ out, want string }{
		"stamped":   {"version 30GB 4.53 7506e5f91cd6 linux amd64\n\nFor enterprise users...", "7506e5f91cd6"},
		"unstamped": {"version 30GB 4.53  linux amd64\n", ""},
		"other":     {"tofu v1.10.10\n", ""},
	} {
		script := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\nprintf '"+c.out+"'\n"), 0o755))
		require.Equal(t, c.want, BinaryVersion(t.Context(), script), name)
	}
	require.Empty(t, BinaryVersion(t.Context(), filepath.Join(dir, "missing")))
}

// GantryRoles' two roles differ in scope alone: a read token never gets the write role's policy.
func TestGantryRolesSplitByScope(t *testing.T) {
	write, read := GantryRoles("env1", "gantry", map[string]string{"gantry_env": "env1"})
	require.Equal(t, Conditions{"StringEquals": {"oidc:gantry_env": {"env1"}, "oidc:scope": {"write"}}}, write.Trust)
	require.Equal(t, Conditions{"StringEquals": {"oidc:gantry_env": {"env1"}, "oidc:scope": {"read"}}}, read.Trust)
	b, err := json.Marshal(read.Policy)
	require.NoError(t, err)
	for _, verb := range []string{"Put", "Delete", "Create", `s3:*`} {
		require.NotContains(t, string(b), verb)
	}
}
