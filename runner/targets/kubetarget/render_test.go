package kubetarget_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"gantry/runner/targets/kubetarget"
)

func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now(),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// authnConfig is the part of an AuthenticationConfiguration the test reads.
type authnConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	JWT        []struct {
		Issuer struct {
			URL                  string   `json:"url"`
			Audiences            []string `json:"audiences"`
			CertificateAuthority string   `json:"certificateAuthority"`
		} `json:"issuer"`
		ClaimValidationRules []struct{ Expression, Message string } `json:"claimValidationRules"`
		ClaimMappings        struct {
			Username struct{ Expression string } `json:"username"`
			Groups   struct{ Expression string } `json:"groups"`
			Extra    []struct {
				Key             string `json:"key"`
				ValueExpression string `json:"valueExpression"`
			} `json:"extra"`
		} `json:"claimMappings"`
	} `json:"jwt"`
}

// TestAuthenticationConfigSaysWhatItWasGiven: the issuer, its CA (byte for byte), the
// audience and the environments land where the API server reads them; the claim mappings
// name the claims Gantry's tokens carry; the jwt entry alone is the same entry.
func TestAuthenticationConfigSaysWhatItWasGiven(t *testing.T) {
	t.Parallel()
	ca := testCA(t)
	trust := kubetarget.Trust{IssuerURL: "https://gantry.example.com/workload", CAPEM: ca, Audience: "kubernetes",
		Environments: []string{"env-prod", "env-dr"}}
	out, err := kubetarget.AuthenticationConfig(trust)
	require.NoError(t, err)
	var cfg authnConfig
	require.NoError(t, yaml.UnmarshalStrict(out, &cfg), string(out))
	require.Equal(t, "apiserver.config.k8s.io/v1", cfg.APIVersion)
	require.Equal(t, "AuthenticationConfiguration", cfg.Kind)
	require.Len(t, cfg.JWT, 1)
	jwt := cfg.JWT[0]
	require.Equal(t, trust.IssuerURL, jwt.Issuer.URL)
	require.Equal(t, []string{"kubernetes"}, jwt.Issuer.Audiences)
	require.Equal(t, string(ca), jwt.Issuer.CertificateAuthority)
	var rules []string
	for _, r := range jwt.ClaimValidationRules {
		rules = append(rules, r.Expression)
	}
	require.Contains(t, rules, "claims.scope in ['read', 'write']")
	require.Contains(t, rules, "claims.gantry_env in ['env-prod', 'env-dr']")
	require.Equal(t, "'gantry:' + claims.sub", jwt.ClaimMappings.Username.Expression)
	require.Equal(t, "['gantry:ws:' + claims.gantry_ws + ':' + claims.scope, 'gantry:org:' + claims.gantry_org + ':' + claims.scope]",
		jwt.ClaimMappings.Groups.Expression)
	extras := map[string]string{}
	for _, e := range jwt.ClaimMappings.Extra {
		extras[e.Key] = e.ValueExpression
	}
	require.Equal(t, map[string]string{
		kubetarget.ExtraOrganization: "claims.gantry_org", kubetarget.ExtraEnvironment: "claims.gantry_env",
		kubetarget.ExtraWorkspace: "claims.gantry_ws", kubetarget.ExtraScope: "claims.scope",
		kubetarget.ExtraApproved: "has(claims.gantry_approved) ? claims.gantry_approved : []",
	}, extras)
	require.Equal(t, "gantry:ws:ws-1:write", kubetarget.WorkspaceGroup("ws-1", "write"))
	require.Equal(t, "gantry:org:org-1:read", kubetarget.OrganizationGroup("org-1", "read"))

	entry, err := kubetarget.JWTAuthenticator(trust)
	require.NoError(t, err)
	var alone []any
	require.NoError(t, yaml.Unmarshal(entry, &alone))
	var whole struct{ JWT []any }
	require.NoError(t, yaml.Unmarshal(out, &whole))
	require.Equal(t, whole.JWT, alone)

	// Without a CA (a publicly trusted issuer) or environments, neither is written.
	out, err = kubetarget.AuthenticationConfig(kubetarget.Trust{IssuerURL: "https://gantry.example.com", Audience: "kubernetes"})
	require.NoError(t, err)
	cfg = authnConfig{}
	require.NoError(t, yaml.UnmarshalStrict(out, &cfg))
	require.Empty(t, cfg.JWT[0].Issuer.CertificateAuthority)
	require.Len(t, cfg.JWT[0].ClaimValidationRules, 2)
}

// TestManifestsAreTheTrustObjects: the stream decodes into the two roles, the grant's
// bindings and the admission policy with its binding; the write role binds only the roles
// named; a workspace grant binds each workspace's groups instead of the organization's.
func TestManifestsAreTheTrustObjects(t *testing.T) {
	t.Parallel()
	stream, err := kubetarget.Manifests(kubetarget.Grant{Organization: "org-1"})
	require.NoError(t, err)
	objs, err := kubetarget.Objects(stream)
	require.NoError(t, err)
	var roles, bindings []string
	var policy *admissionv1.ValidatingAdmissionPolicy
	var policyBinding *admissionv1.ValidatingAdmissionPolicyBinding
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			roles = append(roles, o.Name)
			if o.Name == kubetarget.WriteRole {
				require.Equal(t, []string{"edit", "view"}, o.Rules[2].ResourceNames)
				require.Equal(t, []string{"bind"}, o.Rules[2].Verbs)
			}
			if o.Name == kubetarget.ReadRole {
				for _, r := range o.Rules {
					require.Equal(t, []string{"get", "list", "watch"}, r.Verbs, "a plan only reads")
				}
			}
		case *rbacv1.ClusterRoleBinding:
			bindings = append(bindings, o.Name+" "+o.RoleRef.Name+" "+o.Subjects[0].Kind+" "+o.Subjects[0].Name)
		case *admissionv1.ValidatingAdmissionPolicy:
			policy = o
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			policyBinding = o
		}
	}
	require.Equal(t, []string{kubetarget.ReadRole, kubetarget.WriteRole}, roles)
	require.Equal(t, []string{"gantry-read-org-1 gantry-read Group gantry:org:org-1:read",
		"gantry-write-org-1 gantry-write Group gantry:org:org-1:write"}, bindings)
	require.NotNil(t, policy)
	require.Equal(t, kubetarget.PolicyName, policy.Name)
	require.Equal(t, admissionv1.Fail, *policy.Spec.FailurePolicy)
	require.Len(t, policy.Spec.Validations, 6)
	require.NotNil(t, policyBinding)
	require.Equal(t, kubetarget.PolicyName, policyBinding.Spec.PolicyName)
	require.Contains(t, policyBinding.Spec.ValidationActions, admissionv1.Deny)

	stream, err = kubetarget.Manifests(kubetarget.Grant{Workspaces: []string{"ws-1", "ws-2"}, BindableRoles: []string{"view"}})
	require.NoError(t, err)
	objs, err = kubetarget.Objects(stream)
	require.NoError(t, err)
	bindings = nil
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			bindings = append(bindings, o.Subjects[0].Name)
		case *rbacv1.ClusterRole:
			if o.Name == kubetarget.WriteRole {
				require.Equal(t, []string{"view"}, o.Rules[2].ResourceNames)
			}
		}
	}
	require.Equal(t, []string{"gantry:ws:ws-1:read", "gantry:ws:ws-1:write", "gantry:ws:ws-2:read", "gantry:ws:ws-2:write"}, bindings)

	_, err = kubetarget.Objects([]byte("apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n"))
	require.ErrorContains(t, err, "not an object of Gantry's trust")
}

// TestInvalidTrustIsRefused: nothing that could escape a YAML string, a CEL string, a group
// name or an object name is rendered, and an issuer the API server would not fetch over
// https is refused up front.
func TestInvalidTrustIsRefused(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	good := kubetarget.Trust{IssuerURL: "https://gantry.example.com/workload", Audience: "kubernetes", CAPEM: testCA(t)}
	for name, mutate := range map[string]func(*kubetarget.Trust){
		"http issuer":          func(tr *kubetarget.Trust) { tr.IssuerURL = "http://gantry.example.com/workload" },
		"issuer with a query":  func(tr *kubetarget.Trust) { tr.IssuerURL = "https://gantry.example.com/?a=b" },
		"issuer with a quote":  func(tr *kubetarget.Trust) { tr.IssuerURL = `https://gantry.example.com/"x` },
		"issuer with a user":   func(tr *kubetarget.Trust) { tr.IssuerURL = "https://u:p@gantry.example.com" },
		"no audience":          func(tr *kubetarget.Trust) { tr.Audience = "" },
		"audience with quote":  func(tr *kubetarget.Trust) { tr.Audience = `k8s"]` },
		"audience with spaces": func(tr *kubetarget.Trust) { tr.Audience = "k8s\n  x: y" },
		"a key as CA":          func(tr *kubetarget.Trust) { tr.CAPEM = keyPEM },
		"CA and junk":          func(tr *kubetarget.Trust) { tr.CAPEM = append(testCA(t), "x: y\n"...) },
		"environment quote":    func(tr *kubetarget.Trust) { tr.Environments = []string{"env-1', 'env-2"} },
		"environment upper":    func(tr *kubetarget.Trust) { tr.Environments = []string{"Env-1"} },
	} {
		tr := good
		mutate(&tr)
		_, err := kubetarget.AuthenticationConfig(tr)
		require.ErrorIs(t, err, kubetarget.ErrInvalid, name)
	}
	_, err = kubetarget.AuthenticationConfig(good)
	require.NoError(t, err)

	for name, g := range map[string]kubetarget.Grant{
		"nothing":          {},
		"both":             {Organization: "org-1", Workspaces: []string{"ws-1"}},
		"org with a colon": {Organization: "org:1"},
		"workspace quote":  {Workspaces: []string{`ws-1"`}},
		"bindable admin+":  {Organization: "org-1", BindableRoles: []string{"edit, cluster-admin"}},
		"bindable upper":   {Organization: "org-1", BindableRoles: []string{"Edit"}},
	} {
		_, err := kubetarget.Manifests(g)
		require.ErrorIs(t, err, kubetarget.ErrInvalid, name)
	}
}
