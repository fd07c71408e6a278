package targets_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"gantry/models/environment"
	"gantry/models/identity"
	"gantry/runner/targets"
)

const dir = "/run/secrets"

func handout(t *testing.T, target environment.Target, scope string) (targets.Integration, targets.Handout) {
	t.Helper()
	in, err := targets.For(target)
	require.NoError(t, err)
	h, err := in.Handout(targets.Phase{Scope: scope, Session: "gantry-run-1-" + scope, Dir: dir})
	require.NoError(t, err)
	return in, h
}

// The exact files and variables each target's phase gets; the token is in none of
// them, only its file's path.
func TestSandboxAndAWS(t *testing.T) {
	t.Parallel()
	in, h := handout(t, environment.Target{}, identity.ScopeWrite)
	require.Equal(t, "sandbox", in.Audience())
	require.Equal(t, targets.Handout{Env: []string{"SANDBOX_TOKEN_FILE=/run/secrets/cloud-token"}}, h)

	aws := environment.Target{Kind: environment.TargetAWS, AWS: &environment.AWSTarget{
		ReadRoleARN: "arn:aws:iam::123456789012:role/gantry-read", WriteRoleARN: "arn:aws:iam::123456789012:role/gantry-write",
		Region: "eu-west-1", STSEndpoint: "http://127.0.0.1:8333", S3Endpoint: "http://127.0.0.1:8333"}}
	for scope, role := range map[string]string{identity.ScopeRead: "gantry-read", identity.ScopeWrite: "gantry-write", "": "gantry-read"} {
		in, h = handout(t, aws, scope)
		require.Equal(t, "sts.amazonaws.com", in.Audience())
		require.Empty(t, h.Files)
		require.Equal(t, []string{
			"AWS_CONFIG_FILE=/dev/null",
			"AWS_DEFAULT_REGION=eu-west-1",
			"AWS_EC2_METADATA_DISABLED=true",
			"AWS_ENDPOINT_URL_S3=http://127.0.0.1:8333",
			"AWS_ENDPOINT_URL_STS=http://127.0.0.1:8333",
			"AWS_REGION=eu-west-1",
			"AWS_ROLE_ARN=arn:aws:iam::123456789012:role/" + role,
			"AWS_ROLE_SESSION_NAME=gantry-run-1-" + scope,
			"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
			"AWS_STS_REGIONAL_ENDPOINTS=regional",
			"AWS_WEB_IDENTITY_TOKEN_FILE=/run/secrets/cloud-token",
		}, h.Env, "scope %q", scope)
	}
	aws.AWS.STSEndpoint, aws.AWS.S3Endpoint, aws.Audience = "", "", "sts.gantry"
	in, h = handout(t, aws, identity.ScopeRead)
	require.Equal(t, "sts.gantry", in.Audience())
	require.NotContains(t, h.Env, "AWS_ENDPOINT_URL_S3=", "an unset override is not set empty")
	require.Len(t, h.Env, 9)
}

func TestKubernetes(t *testing.T) {
	t.Parallel()
	target := environment.Target{Kind: environment.TargetKubernetes,
		Kubernetes: &environment.KubernetesTarget{Server: "https://10.0.0.1:6443", CA: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}}
	in, h := handout(t, target, identity.ScopeRead)
	require.Equal(t, "kubernetes", in.Audience())
	require.Equal(t, []string{"KUBECONFIG=/run/secrets/kubeconfig", "KUBE_CONFIG=/run/secrets/kubeconfig",
		"KUBE_CONFIG_PATH=/run/secrets/kubeconfig", "KUBE_CTX=gantry", "KUBE_LOAD_CONFIG_FILE=true"}, h.Env)
	cfg, err := clientcmd.Load(h.Files[targets.KubeconfigFile]) // as client-go reads it
	require.NoError(t, err)
	require.Len(t, h.Files, 1)
	require.Equal(t, "gantry", cfg.CurrentContext)
	require.Equal(t, "https://10.0.0.1:6443", cfg.Clusters["target"].Server)
	require.Equal(t, target.Kubernetes.CA, string(cfg.Clusters["target"].CertificateAuthorityData))
	user := cfg.AuthInfos["gantry"]
	require.Equal(t, "/run/secrets/cloud-token", user.TokenFile, "the token file")
	require.Empty(t, user.Token, "never the token")

	// A server URL cannot break out of its quoted value.
	target.Kubernetes.Server = "https://x\"\n  insecure-skip-tls-verify: true"
	_, h = handout(t, target, identity.ScopeWrite)
	cfg, err = clientcmd.Load(h.Files[targets.KubeconfigFile])
	require.NoError(t, err)
	require.Equal(t, target.Kubernetes.Server, cfg.Clusters["target"].Server)
	require.False(t, cfg.Clusters["target"].InsecureSkipTLSVerify)
}

func TestGCP(t *testing.T) {
	t.Parallel()
	target := environment.Target{Kind: environment.TargetGCP, GCP: &environment.GCPTarget{
		Provider:           "projects/123456/locations/global/workloadIdentityPools/gantry/providers/gantry-portal",
		ReadServiceAccount: "tofu-read@acme-prod.iam.gserviceaccount.com", WriteServiceAccount: "tofu-write@acme-prod.iam.gserviceaccount.com"}}
	in, h := handout(t, target, identity.ScopeWrite)
	require.Equal(t, "https://iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/gantry/providers/gantry-portal", in.Audience())
	require.Equal(t, []string{"CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE=/run/secrets/gcp-credentials.json",
		"GOOGLE_APPLICATION_CREDENTIALS=/run/secrets/gcp-credentials.json"}, h.Env)
	require.JSONEq(t, `{
	  "type": "external_account",
	  "audience": "//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/gantry/providers/gantry-portal",
	  "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
	  "token_url": "https://sts.googleapis.com/v1/token",
	  "service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/tofu-write@acme-prod.iam.gserviceaccount.com:generateAccessToken",
	  "credential_source": {"file": "/run/secrets/cloud-token", "format": {"type": "text"}},
	  "universe_domain": "googleapis.com"
	}`, string(h.Files[targets.GCPCredentialsFile]))

	// A read phase impersonates the reader; without accounts the federated identity acts.
	_, h = handout(t, target, identity.ScopeRead)
	require.Contains(t, string(h.Files[targets.GCPCredentialsFile]), "tofu-read@acme-prod")
	target.GCP.ReadServiceAccount, target.GCP.WriteServiceAccount = "", ""
	_, h = handout(t, target, identity.ScopeWrite)
	var c map[string]any
	require.NoError(t, json.Unmarshal(h.Files[targets.GCPCredentialsFile], &c))
	require.NotContains(t, c, "service_account_impersonation_url")
}

func TestAzure(t *testing.T) {
	t.Parallel()
	target := environment.Target{Kind: environment.TargetAzure, Azure: &environment.AzureTarget{
		TenantID: "11111111-1111-1111-1111-111111111111", SubscriptionID: "22222222-2222-2222-2222-222222222222",
		ReadClientID: "33333333-3333-3333-3333-333333333333", WriteClientID: "44444444-4444-4444-4444-444444444444"}}
	for scope, client := range map[string]string{identity.ScopeRead: "33333333-3333-3333-3333-333333333333", identity.ScopeWrite: "44444444-4444-4444-4444-444444444444"} {
		in, h := handout(t, target, scope)
		require.Equal(t, "api://AzureADTokenExchange", in.Audience())
		require.Empty(t, h.Files)
		require.Equal(t, []string{
			"ARM_CLIENT_ID=" + client,
			"ARM_OIDC_TOKEN_FILE_PATH=/run/secrets/cloud-token",
			"ARM_SUBSCRIPTION_ID=22222222-2222-2222-2222-222222222222",
			"ARM_TENANT_ID=11111111-1111-1111-1111-111111111111",
			"ARM_USE_CLI=false",
			"ARM_USE_MSI=false",
			"ARM_USE_OIDC=true",
			"AZURE_CLIENT_ID=" + client,
			"AZURE_FEDERATED_TOKEN_FILE=/run/secrets/cloud-token",
			"AZURE_TENANT_ID=11111111-1111-1111-1111-111111111111",
		}, h.Env, scope)
	}
}

func TestForRefusesATargetWithoutSettings(t *testing.T) {
	t.Parallel()
	for _, k := range []environment.TargetKind{environment.TargetKubernetes, environment.TargetAWS, environment.TargetGCP, environment.TargetAzure, "ftp"} {
		_, err := targets.For(environment.Target{Kind: k})
		require.Error(t, err, k)
	}
}
