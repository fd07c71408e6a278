package seaweed

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"
)

// SessionDuration is how long the temporary credentials of an exchange last: the longest a
// workload token lives (identity.MaxLifetime), and the shortest session AWS allows.
const SessionDuration = 15 * time.Minute

// Provider is an OpenID Connect issuer whose tokens the STS service exchanges.
type Provider struct {
	// Name is what a role's trust names (its trust policy's Principal.Federated): SeaweedFS
	// resolves a token's iss to the name of the provider configured with that issuer.
	Name string
	// Issuer is the issuer URL, the token's iss byte for byte; discovery is fetched from
	// <Issuer>/.well-known/openid-configuration. http is accepted; an https issuer's
	// certificate must chain to CAPEM (or the system roots without it).
	Issuer string
	// Audiences are the aud values accepted (SeaweedFS's clientIds): a token for another
	// audience is refused before any role is considered.
	Audiences []string
	// CAPEM is the PEM of the CA an https issuer's certificate chains to; Start writes it to a
	// file of the server's directory (tlsCaCert).
	CAPEM []byte
	// PrincipalTagKeys opts session tags in (allowedPrincipalTagKeys): the keys of the tokens'
	// tag claim that become aws:PrincipalTag/<key>. NOTE: SeaweedFS reads them from a claim
	// named "https://aws.amazon.com/tags/principal_tags", not from AWS's nested
	// {"https://aws.amazon.com/tags": {"principal_tags": ...}} that Gantry's tokens carry, so
	// with Gantry's tokens no tag arrives (TestSessionTagsOfGantryTokens).
	PrincipalTagKeys []string
}

// Conditions is an IAM policy's Condition block: operator ("StringEquals", "StringLike",
// "ForAnyValue:StringEquals", ...) to condition key to the values any of which matches. In a
// trust policy SeaweedFS offers every claim of the token as "oidc:<claim>" ("oidc:gantry_ws",
// "oidc:scope", "oidc:sub", "oidc:aud"); in a role's policy as "jwt:<claim>", and as the policy
// variable "${jwt:<claim>}" in resources.
type Conditions map[string]map[string][]string

// Statement is one statement of a role's permission policy.
type Statement struct {
	Effect     string   // "Allow" or "Deny"
	Actions    []string // "s3:*", "s3:PutObject", ...
	Resources  []string // "arn:aws:s3:::gantry-${jwt:gantry_ws}-*", ...
	Conditions Conditions
}

// Role is a role a token may assume (AssumeRoleWithWebIdentity with its ARN, RoleARN(Name)).
type Role struct {
	Name string
	// Provider is the name of the Provider whose tokens the role trusts; empty: the only one.
	Provider string
	// Trust is the trust policy's condition: what the token's claims must say.
	Trust Conditions
	// Policy is what a session of the role may do; anything else is denied.
	Policy []Statement
}

// RoleARN is the ARN of the role named name, as SeaweedFS spells it (no account).
func RoleARN(name string) string { return "arn:aws:iam::role/" + name }

// nameRe is what a provider's or role's name may be: it becomes part of an ARN and of a
// file name.
var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// iamConfig is SeaweedFS's -s3.iam.config for these providers and roles, signing session
// tokens with signingKey; caFiles names, per provider, the file holding its CAPEM.
func iamConfig(providers []Provider, roles []Role, signingKey []byte, caFiles map[string]string) ([]byte, error) {
	if err := validate(providers, roles, signingKey); err != nil {
		return nil, err
	}
	type doc = map[string]any
	var provs []doc
	for _, p := range providers {
		cfg := doc{"issuer": p.Issuer, "clientIds": p.Audiences}
		if f := caFiles[p.Name]; f != "" {
			cfg["tlsCaCert"] = f
		}
		if len(p.PrincipalTagKeys) > 0 {
			cfg["allowedPrincipalTagKeys"] = p.PrincipalTagKeys
		}
		provs = append(provs, doc{"name": p.Name, "type": "oidc", "enabled": true, "config": cfg})
	}
	var policies, roleDocs []doc
	for _, r := range roles {
		provider := r.Provider
		if provider == "" {
			provider = providers[0].Name
		}
		trust := doc{"Effect": "Allow", "Principal": doc{"Federated": provider},
			"Action": []string{"sts:AssumeRoleWithWebIdentity"}}
		if len(r.Trust) > 0 {
			trust["Condition"] = r.Trust
		}
		var stmts []doc
		for _, s := range r.Policy {
			st := doc{"Effect": s.Effect, "Action": s.Actions, "Resource": s.Resources}
			if len(s.Conditions) > 0 {
				st["Condition"] = s.Conditions
			}
			stmts = append(stmts, st)
		}
		policies = append(policies, doc{"name": r.Name + "-policy",
			"document": doc{"Version": "2012-10-17", "Statement": stmts}})
		roleDocs = append(roleDocs, doc{"roleName": r.Name, "roleArn": RoleARN(r.Name),
			"attachedPolicies": []string{r.Name + "-policy"},
			"trustPolicy":      doc{"Version": "2012-10-17", "Statement": []doc{trust}}})
	}
	return json.MarshalIndent(doc{
		"sts": doc{"tokenDuration": SessionDuration.String(), "maxSessionLength": SessionDuration.String(),
			"issuer": "gantry-seaweedfs-sts", "signingKey": signingKey},
		// Nothing is allowed that no role's policy allows; no static identity exists.
		"policy":    doc{"defaultEffect": "Deny", "storeType": "memory"},
		"providers": provs,
		"policies":  policies,
		"roles":     roleDocs,
	}, "", "  ")
}

func validate(providers []Provider, roles []Role, signingKey []byte) error {
	if len(signingKey) < 32 {
		return errors.New("the STS signing key must have at least 32 bytes")
	}
	if len(providers) == 0 {
		return errors.New("no OpenID Connect provider to trust")
	}
	names := map[string]bool{}
	for _, p := range providers {
		if !nameRe.MatchString(p.Name) || names[p.Name] {
			return fmt.Errorf("provider name %q is invalid or repeated", p.Name)
		}
		names[p.Name] = true
		if u, err := url.Parse(p.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("provider %s: issuer %q is not an http(s) URL", p.Name, p.Issuer)
		}
		if len(p.Audiences) == 0 {
			return fmt.Errorf("provider %s accepts no audience", p.Name)
		}
	}
	roleNames := map[string]bool{}
	for _, r := range roles {
		if !nameRe.MatchString(r.Name) || roleNames[r.Name] {
			return fmt.Errorf("role name %q is invalid or repeated", r.Name)
		}
		roleNames[r.Name] = true
		if r.Provider == "" && len(providers) > 1 {
			return fmt.Errorf("role %s names no provider among several", r.Name)
		}
		if r.Provider != "" && !names[r.Provider] {
			return fmt.Errorf("role %s trusts unknown provider %q", r.Name, r.Provider)
		}
		if len(r.Policy) == 0 {
			return fmt.Errorf("role %s allows nothing", r.Name)
		}
		for _, s := range r.Policy {
			if (s.Effect != "Allow" && s.Effect != "Deny") || len(s.Actions) == 0 || len(s.Resources) == 0 {
				return fmt.Errorf("role %s: a statement needs Allow or Deny, actions and resources", r.Name)
			}
		}
	}
	return nil
}
