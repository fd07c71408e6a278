package environment

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"gantry/models/errs"
	"gantry/models/identity"
)

// TargetKind names where an environment's runs provision, and so which integration hands
// a phase its credentials (runner/targets): each kind trusts Gantry's workload tokens its
// own way (docs/targets.md).
type TargetKind string

const (
	// TargetSandbox is Gantry's own sandbox cloud: the default.
	TargetSandbox TargetKind = "sandbox"
	// TargetKubernetes is a Kubernetes API server that trusts Gantry's issuer (a JWT
	// authenticator): the token file is the phase's bearer token.
	TargetKubernetes TargetKind = "kubernetes"
	// TargetAWS is AWS (or an S3-compatible store with STS): the standard credential
	// chain exchanges the token with AssumeRoleWithWebIdentity.
	TargetAWS TargetKind = "aws"
	// TargetGCP is Google Cloud workload identity federation (an external_account
	// credential configuration reading the token file).
	TargetGCP TargetKind = "gcp"
	// TargetAzure is Azure workload identity federation (ARM_USE_OIDC with the token file).
	TargetAzure TargetKind = "azure"
)

// TargetKinds in the order shown to people.
var TargetKinds = []TargetKind{TargetSandbox, TargetKubernetes, TargetAWS, TargetGCP, TargetAzure}

// Exercised reports whether Gantry's own tests drive this kind against a real system
// here (a Kubernetes API server, an S3-compatible store with STS, the sandbox cloud).
// GCP and Azure produce the files their SDKs read, checked by unit tests, but no test
// reaches the real clouds: pages say so.
func (k TargetKind) Exercised() bool { return k != TargetGCP && k != TargetAzure }

// Federated reports whether the kind's credentials are exchanged workload tokens (all
// of them: a static credential is the environment's, not the target's; see
// Credentials).
func (k TargetKind) Federated() bool { return slices.Contains(TargetKinds, k) }

// Target is where an environment's runs provision and how a phase is let in: no secret,
// only addresses, identities to assume and the audience tokens are minted for. A plan or
// verification assumes the Read identity, an apply the Write one.
type Target struct {
	Kind TargetKind `json:"kind"`
	// Audience is the aud of the tokens minted for this target; empty: the kind's
	// default (DefaultAudience).
	Audience   string            `json:"audience,omitempty"`
	Kubernetes *KubernetesTarget `json:"kubernetes,omitempty"`
	AWS        *AWSTarget        `json:"aws,omitempty"`
	GCP        *GCPTarget        `json:"gcp,omitempty"`
	Azure      *AzureTarget      `json:"azure,omitempty"`
}

// KubernetesTarget is an API server: its URL and the CA that signed its certificate
// (PEM). Who a phase is there follows from the token's claims (the API server's claim
// mappings and RBAC, deploy/targets/kubernetes).
type KubernetesTarget struct {
	Server string `json:"server"`
	CA     string `json:"ca"`
}

// AWSTarget is an AWS account (or an S3-compatible store with STS): the roles a read
// and a write phase assume, the region, and optional endpoint overrides (an
// S3-compatible store's STS and S3 URLs).
type AWSTarget struct {
	ReadRoleARN  string `json:"read_role_arn"`
	WriteRoleARN string `json:"write_role_arn"`
	Region       string `json:"region"`
	STSEndpoint  string `json:"sts_endpoint,omitempty"`
	S3Endpoint   string `json:"s3_endpoint,omitempty"`
}

// GCPTarget is a workload identity pool provider ("projects/<number>/locations/global/
// workloadIdentityPools/<pool>/providers/<provider>") and the service accounts a read
// and a write phase impersonate (empty: the federated identity acts itself).
type GCPTarget struct {
	Provider            string `json:"provider"`
	ReadServiceAccount  string `json:"read_service_account,omitempty"`
	WriteServiceAccount string `json:"write_service_account,omitempty"`
}

// AzureTarget is an Entra ID tenant, the subscription, and the application (client)
// ids whose federated credentials trust Gantry, one for reading and one for writing.
type AzureTarget struct {
	TenantID       string `json:"tenant_id"`
	SubscriptionID string `json:"subscription_id"`
	ReadClientID   string `json:"read_client_id"`
	WriteClientID  string `json:"write_client_id"`
}

// DefaultAudience is the audience tokens for t are minted with unless t names one: what
// each system expects by default (docs/targets.md).
func (t Target) DefaultAudience() string {
	switch t.Kind {
	case TargetKubernetes:
		return "kubernetes"
	case TargetAWS:
		return "sts.amazonaws.com"
	case TargetGCP:
		if t.GCP != nil {
			return "https://iam.googleapis.com/" + t.GCP.Provider
		}
	case TargetAzure:
		return "api://AzureADTokenExchange"
	}
	return identity.DefaultAudience
}

// TokenAudience is the audience of the tokens minted for t.
func (t Target) TokenAudience() string {
	if t.Audience != "" {
		return t.Audience
	}
	return t.DefaultAudience()
}

// OrSandbox is t, or the sandbox target when t names no kind (an environment created
// before targets existed).
func (t Target) OrSandbox() Target {
	if t.Kind == "" {
		return Target{Kind: TargetSandbox}
	}
	return t
}

var (
	// AWS names the account (arn:aws:iam::123456789012:role/name); SeaweedFS has none
	// (arn:aws:iam::role/name).
	roleARN     = regexp.MustCompile(`^arn:[a-z-]+:iam::([0-9]{12}:)?role/[A-Za-z0-9+=,.@_/-]{1,512}$`)
	awsRegion   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)
	gcpProvider = regexp.MustCompile(`^projects/[0-9]{1,20}/locations/global/workloadIdentityPools/[a-z0-9-]{4,32}/providers/[a-z0-9-]{4,32}$`)
	gcpAccount  = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z0-9.-]+\.iam\.gserviceaccount\.com$`)
	azureID     = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// MaxTargetCA bounds a Kubernetes CA bundle.
const MaxTargetCA = 64 << 10

// Validate adds a field error to v for every setting of t that is missing or wrong, with
// the form's field names (target_<kind>_<setting>). Only the chosen kind's settings are
// checked; the others are dropped by Normal.
func (t Target) Validate(v *errs.Validation) {
	if !slices.Contains(TargetKinds, t.Kind) {
		v.Add("target_kind", "Choose sandbox, Kubernetes, AWS, Google Cloud or Azure.")
		return
	}
	if a := t.Audience; a != "" && (len(a) > 512 || strings.ContainsFunc(a, unicode.IsSpace) || strings.ContainsFunc(a, unicode.IsControl)) {
		v.Add("target_audience", "One word of at most 512 characters, or empty for the default.")
	}
	switch t.Kind {
	case TargetKubernetes:
		k := deref0(t.Kubernetes)
		httpsURL(v, "target_kubernetes_server", k.Server, true)
		if msg := pemCertificates(k.CA); msg != "" {
			v.Add("target_kubernetes_ca", msg)
		}
	case TargetAWS:
		a := deref0(t.AWS)
		for field, arn := range map[string]string{"target_aws_read_role_arn": a.ReadRoleARN, "target_aws_write_role_arn": a.WriteRoleARN} {
			if !roleARN.MatchString(arn) {
				v.Add(field, "A role ARN: arn:aws:iam::123456789012:role/name.")
			}
		}
		if a.ReadRoleARN != "" && a.ReadRoleARN == a.WriteRoleARN {
			v.Add("target_aws_read_role_arn", "Use a role that can only read: a plan must never get the write role.")
		}
		if !awsRegion.MatchString(a.Region) {
			v.Add("target_aws_region", "A region such as eu-west-1.")
		}
		httpsURL(v, "target_aws_sts_endpoint", a.STSEndpoint, false)
		httpsURL(v, "target_aws_s3_endpoint", a.S3Endpoint, false)
	case TargetGCP:
		g := deref0(t.GCP)
		if !gcpProvider.MatchString(g.Provider) {
			v.Add("target_gcp_provider", "projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>.")
		}
		for field, sa := range map[string]string{"target_gcp_read_service_account": g.ReadServiceAccount, "target_gcp_write_service_account": g.WriteServiceAccount} {
			if sa != "" && !gcpAccount.MatchString(sa) {
				v.Add(field, "A service account email (name@project.iam.gserviceaccount.com), or empty.")
			}
		}
		if g.WriteServiceAccount != "" && g.ReadServiceAccount == g.WriteServiceAccount {
			v.Add("target_gcp_read_service_account", "Use an account that can only read: a plan must never act as the writer.")
		}
	case TargetAzure:
		z := deref0(t.Azure)
		for field, id := range map[string]string{"target_azure_tenant_id": z.TenantID, "target_azure_subscription_id": z.SubscriptionID,
			"target_azure_read_client_id": z.ReadClientID, "target_azure_write_client_id": z.WriteClientID} {
			if !azureID.MatchString(id) {
				v.Add(field, "A GUID such as 00000000-0000-0000-0000-000000000000.")
			}
		}
		if z.ReadClientID != "" && strings.EqualFold(z.ReadClientID, z.WriteClientID) {
			v.Add("target_azure_read_client_id", "Use an application that can only read: a plan must never act as the writer.")
		}
	}
}

// Normal is t with only its kind's settings (what is stored).
func (t Target) Normal() Target {
	n := Target{Kind: t.Kind, Audience: strings.TrimSpace(t.Audience)}
	switch t.Kind {
	case TargetKubernetes:
		n.Kubernetes = t.Kubernetes
	case TargetAWS:
		n.AWS = t.AWS
	case TargetGCP:
		n.GCP = t.GCP
	case TargetAzure:
		n.Azure = t.Azure
	}
	return n
}

func deref0[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// httpsURL adds field's error unless s is an https URL without credentials, query or
// fragment (or empty, when not required). Plain http is accepted only for a loopback
// address (a store on the portal's own machine, as in development): anywhere else a
// temporary credential would cross the network in clear.
func httpsURL(v *errs.Validation, field, s string, required bool) {
	if s == "" && !required {
		return
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || len(s) > 2048 ||
		(u.Scheme != "https" && (u.Scheme != "http" || !loopback(u.Hostname()))) {
		v.Add(field, "An https URL without credentials or query, such as https://api.example.com:6443 (http only on this machine's loopback).")
	}
}

func loopback(host string) bool {
	ip, err := netip.ParseAddr(host)
	return host == "localhost" || (err == nil && ip.IsLoopback())
}

// pemCertificates says what is wrong with ca as a PEM bundle of CA certificates ("":
// nothing).
func pemCertificates(ca string) string {
	if strings.TrimSpace(ca) == "" {
		return "Paste the PEM certificate of the CA that signed the API server's certificate."
	}
	if len(ca) > MaxTargetCA {
		return fmt.Sprintf("At most %d KiB.", MaxTargetCA>>10)
	}
	rest, n := []byte(ca), 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return "Only CERTIFICATE blocks: never paste a private key."
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return "A certificate in it does not parse."
		}
		n++
	}
	if n == 0 || strings.TrimSpace(string(rest)) != "" {
		return "PEM certificates only (-----BEGIN CERTIFICATE----- ...)."
	}
	return ""
}
