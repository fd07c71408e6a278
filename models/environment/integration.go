package environment

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"reflect"
	"strings"
)

// How targets are shown and audited: each kind's name and what it must trust, the
// identity a read and a write phase is there, and whether the environment's phases use
// those federated identities or the static credentials it holds. The environment pages
// and the governance report both ask IntegrationOf, so they cannot disagree.

// Label is the kind as people read it.
func (k TargetKind) Label() string {
	switch k {
	case TargetKubernetes:
		return "Kubernetes"
	case TargetAWS:
		return "AWS / S3-compatible"
	case TargetGCP:
		return "Google Cloud"
	case TargetAzure:
		return "Azure"
	}
	return "Sandbox cloud"
}

// Trust says in one line what the target must be set up to trust (docs/targets.md has
// the steps).
func (k TargetKind) Trust() string {
	switch k {
	case TargetKubernetes:
		return "The API server trusts Gantry's issuer with a JWT authenticator for the audience below, mapping each token to the groups of its workspace and scope (" +
			KubernetesGroups("<organization>", "<workspace>", "read")[0] + " or …:write); RBAC grants each group its access."
	case TargetAWS:
		return "An IAM OIDC identity provider for Gantry's issuer, and two roles whose trust policy lets tokens for the audience below assume them " +
			"(sts:AssumeRoleWithWebIdentity): the read role for plans and verifications, the write role for applies."
	case TargetGCP:
		return "A workload identity pool provider trusting Gantry's issuer and the audience below; the service accounts (if any) let the pool's principals impersonate them."
	case TargetAzure:
		return "Two app registrations, each with a federated identity credential trusting Gantry's issuer and the audience below: one that can only read, one that writes."
	}
	return "The sandbox cloud trusts Gantry's issuer already: nothing to set up."
}

// OpenAPIEnum lists the kinds for the API's description.
func (TargetKind) OpenAPIEnum() []string {
	out := make([]string, len(TargetKinds))
	for i, k := range TargetKinds {
		out[i] = string(k)
	}
	return out
}

// KubernetesUser is who a phase's token is on a Kubernetes target, and KubernetesGroups
// its groups: the API server's claim mappings (deploy/targets/kubernetes/
// authentication-config.yaml) name the user after the token's subject and give it a
// group per workspace and scope and one per organization and scope, which RBAC binds to
// what that scope may do.
func KubernetesUser(subject string) string { return "gantry:" + subject }

// KubernetesGroups: see KubernetesUser.
func KubernetesGroups(orgID, workspace, scope string) []string {
	return []string{"gantry:ws:" + workspace + ":" + scope, "gantry:org:" + orgID + ":" + scope}
}

// TakesStaticCredential reports whether a static credential an environment holds can
// stand in for the workload token on a target of kind k: it is handed over as the token
// file, a bearer token, which the sandbox cloud and a Kubernetes API server take; AWS,
// Google Cloud and Azure exchange a web identity token, and a phase holding a static
// credential is refused there.
func (k TargetKind) TakesStaticCredential() bool {
	return k == TargetSandbox || k == TargetKubernetes || k == ""
}

// Same reports whether a and b are the same target as stored.
func (t Target) Same(b Target) bool {
	return reflect.DeepEqual(t.OrSandbox().Normal(), b.OrSandbox().Normal())
}

// Audited is t as the audit records it: as stored, but the Kubernetes CA (up to 64 KiB
// of PEM) as the SHA-256 fingerprints of its certificates. A target holds no secret.
func (t Target) Audited() map[string]any {
	n := t.OrSandbox().Normal()
	raw, err := json.Marshal(n)
	if err != nil {
		return map[string]any{"kind": string(n.Kind)}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return map[string]any{"kind": string(n.Kind)}
	}
	if k, ok := m["kubernetes"].(map[string]any); ok && n.Kubernetes != nil {
		delete(k, "ca")
		k["ca_sha256"] = CAFingerprints(n.Kubernetes.CA)
	}
	return m
}

// CAFingerprints are the SHA-256 fingerprints (hex) of the certificates of a PEM bundle.
func CAFingerprints(ca string) []string {
	out := []string{}
	rest := []byte(ca)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		sum := sha256.Sum256(b.Bytes)
		out = append(out, hex.EncodeToString(sum[:]))
	}
}

// Integration is an environment's target as auditors read it: the system, the audience
// of its tokens, who a read phase (plan, verification) and a write phase (apply) is
// there, and whether those are the federated identities or static credentials.
type Integration struct {
	Kind TargetKind
	// Where is the system: the API server, the region and endpoints, the workload
	// identity provider, the tenant and subscription.
	Where    string
	Audience string
	// Read and Write are the identities a read and a write phase uses.
	Read, Write string
	// Static: the environment holds static credentials, which its phases get instead of
	// the federated identity (the write one for applies, the read one for plans and
	// verifications); federated otherwise.
	Static bool
}

// Credentials is "static" or "federated".
func (i Integration) Credentials() string {
	if i.Static {
		return "static"
	}
	return "federated"
}

// IntegrationOf is env's integration, given the static credentials it holds.
func IntegrationOf(env Environment, st Standing) Integration {
	t := env.Target.OrSandbox()
	i := Integration{Kind: t.Kind, Audience: t.TokenAudience(), Static: st.Any()}
	subject := "org:" + env.OrganizationID + ":env:" + env.ID + ":ws:<workspace>:run:<run>:phase:<phase>"
	switch t.Kind {
	case TargetKubernetes:
		k := deref0(t.Kubernetes)
		i.Where = k.Server
		as := func(scope string) string {
			return "groups " + strings.Join(KubernetesGroups(env.OrganizationID, "<workspace>", scope), ", ") + " (user " + KubernetesUser(subject) + ")"
		}
		i.Read, i.Write = as("read"), as("write")
	case TargetAWS:
		a := deref0(t.AWS)
		i.Where = "region " + a.Region
		if a.STSEndpoint != "" {
			i.Where += ", STS " + a.STSEndpoint
		}
		if a.S3Endpoint != "" {
			i.Where += ", S3 " + a.S3Endpoint
		}
		i.Read, i.Write = "role "+a.ReadRoleARN, "role "+a.WriteRoleARN
	case TargetGCP:
		g := deref0(t.GCP)
		i.Where = g.Provider
		pool, _, _ := strings.Cut(g.Provider, "/providers/")
		principal := "the federated principal principal://iam.googleapis.com/" + pool + "/subject/" + subject
		i.Read, i.Write = principal, principal
		if g.ReadServiceAccount != "" {
			i.Read = "service account " + g.ReadServiceAccount
		}
		if g.WriteServiceAccount != "" {
			i.Write = "service account " + g.WriteServiceAccount
		}
	case TargetAzure:
		z := deref0(t.Azure)
		i.Where = "tenant " + z.TenantID + ", subscription " + z.SubscriptionID
		i.Read, i.Write = "application "+z.ReadClientID, "application "+z.WriteClientID
	default:
		i.Read, i.Write = "a workload token of scope read", "a workload token of scope write"
	}
	static := func(which string) string {
		if !t.Kind.TakesStaticCredential() {
			return "none: the environment holds a static " + which + " credential, which this target cannot use, so its phases are refused until it is removed"
		}
		return "the environment's static " + which + " credential (standing access)"
	}
	if st.ReadSetAt != nil {
		i.Read = static("read")
	}
	if st.WriteSetAt != nil {
		i.Write = static("write")
	}
	return i
}
