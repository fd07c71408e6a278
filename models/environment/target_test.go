package environment_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"maps"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/environment"
	"gantry/models/errs"
)

func testCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func targetErrors(t environment.Target) []string {
	v := &errs.Validation{}
	t.Validate(v)
	return slices.Sorted(maps.Keys(v.Fields))
}

// Every target setting a person types is checked field by field; the sandbox needs none.
func TestTargetValidation(t *testing.T) {
	t.Parallel()
	ca := testCA(t)
	kube := func(server, ca string) environment.Target {
		return environment.Target{Kind: environment.TargetKubernetes, Kubernetes: &environment.KubernetesTarget{Server: server, CA: ca}}
	}
	aws := func(read, write, region, sts string) environment.Target {
		return environment.Target{Kind: environment.TargetAWS, AWS: &environment.AWSTarget{ReadRoleARN: read, WriteRoleARN: write, Region: region, STSEndpoint: sts}}
	}
	const readARN, writeARN = "arn:aws:iam::123456789012:role/gantry-read", "arn:aws:iam::123456789012:role/gantry-write"
	const g1, g2 = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"
	key := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("x")}))
	for name, tc := range map[string]struct {
		target environment.Target
		fields []string
	}{
		"sandbox":                 {environment.Target{Kind: environment.TargetSandbox}, nil},
		"no kind":                 {environment.Target{}, []string{"target_kind"}},
		"unknown kind":            {environment.Target{Kind: "ftp"}, []string{"target_kind"}},
		"audience with a space":   {environment.Target{Kind: environment.TargetSandbox, Audience: "a b"}, []string{"target_audience"}},
		"kubernetes":              {kube("https://10.0.0.1:6443", ca), nil},
		"kubernetes empty":        {environment.Target{Kind: environment.TargetKubernetes}, []string{"target_kubernetes_ca", "target_kubernetes_server"}},
		"kubernetes over http":    {kube("http://k8s.example.com", ca), []string{"target_kubernetes_server"}},
		"kubernetes with a user":  {kube("https://admin:pw@k8s.example.com", ca), []string{"target_kubernetes_server"}},
		"a private key as CA":     {kube("https://k8s.example.com", key), []string{"target_kubernetes_ca"}},
		"CA and trailing junk":    {kube("https://k8s.example.com", ca+"junk"), []string{"target_kubernetes_ca"}},
		"CA with NUL":             {kube("https://k8s.example.com", "\x00"), []string{"target_kubernetes_ca"}},
		"aws":                     {aws(readARN, writeARN, "eu-west-1", ""), nil},
		"aws store on loopback":   {aws(readARN, writeARN, "us-east-1", "http://127.0.0.1:8333"), nil},
		"seaweedfs role arns":     {aws("arn:aws:iam::role/ws-read", "arn:aws:iam::role/ws-write", "us-east-1", "http://127.0.0.1:8333"), nil},
		"arn with an empty acct":  {aws("arn:aws:iam:::role/r", writeARN, "us-east-1", ""), []string{"target_aws_read_role_arn"}},
		"aws store over http":     {aws(readARN, writeARN, "us-east-1", "http://store.example.com"), []string{"target_aws_sts_endpoint"}},
		"aws one role for both":   {aws(writeARN, writeARN, "eu-west-1", ""), []string{"target_aws_read_role_arn"}},
		"aws bad arn and region":  {aws("arn:aws:iam::1:user/x", writeARN, "Europe", ""), []string{"target_aws_read_role_arn", "target_aws_region"}},
		"aws without settings":    {environment.Target{Kind: environment.TargetAWS}, []string{"target_aws_read_role_arn", "target_aws_region", "target_aws_write_role_arn"}},
		"gcp":                     {environment.Target{Kind: environment.TargetGCP, GCP: &environment.GCPTarget{Provider: "projects/1/locations/global/workloadIdentityPools/pool1/providers/prov1"}}, nil},
		"gcp bad provider":        {environment.Target{Kind: environment.TargetGCP, GCP: &environment.GCPTarget{Provider: "pool1"}}, []string{"target_gcp_provider"}},
		"gcp one account for all": {environment.Target{Kind: environment.TargetGCP, GCP: &environment.GCPTarget{Provider: "projects/1/locations/global/workloadIdentityPools/pool1/providers/prov1", ReadServiceAccount: "tofu-all@p1.iam.gserviceaccount.com", WriteServiceAccount: "tofu-all@p1.iam.gserviceaccount.com"}}, []string{"target_gcp_read_service_account"}},
		"azure":                   {environment.Target{Kind: environment.TargetAzure, Azure: &environment.AzureTarget{TenantID: g1, SubscriptionID: g1, ReadClientID: g1, WriteClientID: g2}}, nil},
		"azure one app for both":  {environment.Target{Kind: environment.TargetAzure, Azure: &environment.AzureTarget{TenantID: g1, SubscriptionID: g1, ReadClientID: g2, WriteClientID: strings.ToUpper(g2)}}, []string{"target_azure_read_client_id"}},
		"azure bad ids":           {environment.Target{Kind: environment.TargetAzure, Azure: &environment.AzureTarget{TenantID: "x", SubscriptionID: g1, ReadClientID: g2, WriteClientID: g1}}, []string{"target_azure_tenant_id"}},
	} {
		require.Equal(t, tc.fields, targetErrors(tc.target), name)
	}
	require.Equal(t, []string{"target_kubernetes_ca"}, targetErrors(kube("https://k8s.example.com", strings.Repeat(ca, environment.MaxTargetCA/len(ca)+1))))
}

func TestTargetDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, environment.Target{Kind: environment.TargetSandbox}, environment.Target{}.OrSandbox())
	for kind, aud := range map[environment.TargetKind]string{environment.TargetSandbox: "sandbox", environment.TargetKubernetes: "kubernetes",
		environment.TargetAWS: "sts.amazonaws.com", environment.TargetAzure: "api://AzureADTokenExchange"} {
		require.Equal(t, aud, environment.Target{Kind: kind}.TokenAudience())
	}
	require.Equal(t, "custom", environment.Target{Kind: environment.TargetAWS, Audience: "custom"}.TokenAudience())
	gcp := environment.Target{Kind: environment.TargetGCP, GCP: &environment.GCPTarget{Provider: "projects/1/locations/global/workloadIdentityPools/p/providers/q"}}
	require.Equal(t, "https://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q", gcp.TokenAudience())
	require.False(t, environment.TargetGCP.Exercised())
	require.False(t, environment.TargetAzure.Exercised())
	require.True(t, environment.TargetKubernetes.Exercised())
	// Normal keeps only the chosen kind's settings.
	mixed := environment.Target{Kind: environment.TargetAWS, AWS: &environment.AWSTarget{Region: "eu-west-1"}, GCP: gcp.GCP}
	require.Nil(t, mixed.Normal().GCP)
	require.NotNil(t, mixed.Normal().AWS)
}
