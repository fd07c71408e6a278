// Package signin holds the rules of what an OpenID Provider's sign-in asserts about a
// person: which claims Gantry reads, from where (the ID token, else the UserInfo
// endpoint), in which shapes, and when an e-mail address counts as verified. It is pure:
// the web layer fetches, this package decides.
package signin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Where a claim came from.
const (
	FromIDToken  = "id_token"
	FromUserInfo = "userinfo"
)

// How an address counted as verified (Asserted.VerifiedBy).
const (
	ByEmailVerified = "email_verified"
	ByTrustedDomain = "trusted_domain"
	ByXMSEdov       = "xms_edov"
)

// DefaultGroupsClaim is the groups claim's name unless --oidc-groups-claim says otherwise.
const DefaultGroupsClaim = "groups"

// ErrUserInfoSubject refuses a sign-in whose UserInfo answer is about someone else
// (OIDC Core §5.3.2: its sub must equal the ID token's).
var ErrUserInfoSubject = errors.New("the identity provider's UserInfo answer is about another person: its sub differs from the ID token's")

// Rules are the deployment's settings for reading sign-ins.
type Rules struct {
	// GroupsClaim names the claim holding the person's groups (default "groups").
	GroupsClaim string
	// TrustedDomains are, per issuer, the e-mail domains whose addresses count as
	// verified when that issuer sends no email_verified at all.
	TrustedDomains map[string][]string
}

func (r Rules) groupsClaim() string {
	if r.GroupsClaim == "" {
		return DefaultGroupsClaim
	}
	return r.GroupsClaim
}

// Claims are one source's claims, undecoded: each is read on its own, so one claim of an
// unexpected shape never spoils the others.
type Claims map[string]json.RawMessage

// Asserted is what the provider asserted at a sign-in, and how Gantry read it: the
// snapshot kept per user for the members page's diagnostics. It never holds a token.
type Asserted struct {
	At          time.Time `json:"at"`
	Issuer      string    `json:"issuer"`
	Email       string    `json:"email,omitempty"`
	EmailFrom   string    `json:"email_from,omitempty"`
	Name        string    `json:"name,omitempty"`
	NameFrom    string    `json:"name_from,omitempty"`
	GroupsClaim string    `json:"groups_claim"`
	Groups      []string  `json:"groups,omitempty"`
	GroupsFrom  string    `json:"groups_from,omitempty"`
	// GroupsOverage: the provider said the person has too many groups to fit in the token
	// (Entra's _claim_names or hasgroups); Groups is then unknown, not empty.
	GroupsOverage bool `json:"groups_overage,omitempty"`
	// EmailVerified is the provider's email_verified: "true", "false", or "" when it sent
	// none it could be read as.
	EmailVerified     string `json:"email_verified,omitempty"`
	EmailVerifiedFrom string `json:"email_verified_from,omitempty"`
	// Verified: the address counts as verified, by VerifiedBy (ByEmailVerified,
	// ByTrustedDomain or ByXMSEdov).
	Verified   bool   `json:"verified"`
	VerifiedBy string `json:"verified_by,omitempty"`
	// UserInfo says whether the UserInfo endpoint was asked, and what came of it.
	UserInfo string `json:"userinfo,omitempty"`
	// Ignored lists the claims of an unexpected shape, left out (never a failed sign-in).
	Ignored []string `json:"ignored,omitempty"`
	// ObjectID is Microsoft Entra ID's oid claim, from the ID token only: the person's
	// object id in the directory, the same for every application, where the sub is
	// pairwise (one per application). A directory's SCIM externalId is that object id, so
	// it is what links a SCIM user to the person (models/scim/rules.go LinkedBy).
	ObjectID string `json:"oid,omitempty"`
}

// TrustedDomain is the domain of the address when a trusted domain verified it.
func (a Asserted) TrustedDomain() string {
	if a.VerifiedBy != ByTrustedDomain {
		return ""
	}
	return domainOf(a.Email)
}

// NeedsUserInfo reports whether the ID token lacks a claim Gantry needs (email,
// email_verified, name, the groups claim), so the UserInfo endpoint is worth asking,
// once. An Entra group overage counts as a groups claim: UserInfo holds no more.
func (r Rules) NeedsUserInfo(id Claims) bool {
	a := Asserted{GroupsClaim: r.groupsClaim()}
	if v, ok := a.str(id, FromIDToken, "email"); ok {
		a.Email, a.EmailFrom = v, FromIDToken
	}
	_, hasName := a.str(id, FromIDToken, "name")
	a.readGroups(id, FromIDToken)
	a.readVerified(id, nil)
	return a.EmailFrom == "" || !hasName || a.GroupsFrom == "" || (a.EmailVerified != "true" && a.EmailVerified != "false")
}

// Read reads the sign-in of subject at issuer from the ID token's claims and, when it
// was asked (userInfo non-nil), the UserInfo answer's; userInfoNote says what came of
// asking (e.g. why it could not be read). The ID token wins where both have a claim. A
// UserInfo answer about another subject is ErrUserInfoSubject.
func (r Rules) Read(issuer, subject string, id, userInfo Claims, userInfoNote string, at time.Time) (Asserted, error) {
	a := Asserted{At: at.UTC(), Issuer: issuer, GroupsClaim: r.groupsClaim(), UserInfo: userInfoNote}
	if userInfo != nil {
		var sub string
		if json.Unmarshal(userInfo["sub"], &sub) != nil || sub != subject {
			return Asserted{}, ErrUserInfoSubject
		}
	}
	sources := []struct {
		from   string
		claims Claims
	}{{FromIDToken, id}, {FromUserInfo, userInfo}}
	for _, s := range sources {
		if s.claims == nil {
			continue
		}
		if a.EmailFrom == "" {
			if v, ok := a.str(s.claims, s.from, "email"); ok {
				a.Email, a.EmailFrom = strings.TrimSpace(v), s.from
			}
		}
		if a.NameFrom == "" {
			if v, ok := a.str(s.claims, s.from, "name"); ok {
				a.Name, a.NameFrom = strings.TrimSpace(v), s.from
			}
		}
		if a.GroupsFrom == "" {
			a.readGroups(s.claims, s.from)
		}
	}
	if v, ok := a.str(id, FromIDToken, "oid"); ok {
		a.ObjectID = strings.TrimSpace(v)
	}
	a.readVerified(sources[0].claims, sources[1].claims)
	a.decide(r.TrustedDomains[issuer], id, userInfo)
	return a, nil
}

// readVerified reads email_verified from the source the e-mail address came from, or
// from the other one when that one asserts the same address: a verification is about
// one address, never a neighbour's.
func (a *Asserted) readVerified(id, userInfo Claims) {
	for _, s := range []struct {
		from   string
		claims Claims
	}{{FromIDToken, id}, {FromUserInfo, userInfo}} {
		if s.claims == nil || !present(s.claims, "email_verified") {
			continue
		}
		if s.from != a.EmailFrom {
			var other string
			if json.Unmarshal(s.claims["email"], &other) != nil || !strings.EqualFold(strings.TrimSpace(other), a.Email) {
				continue
			}
		}
		v, ok := boolClaim(s.claims["email_verified"])
		if !ok {
			a.ignore(s.from, "email_verified", s.claims["email_verified"])
			a.EmailVerified, a.EmailVerifiedFrom = "unreadable", s.from
			return
		}
		a.EmailVerified, a.EmailVerifiedFrom = fmt.Sprint(v), s.from
		return
	}
}

// decide is the verification rule: email_verified true; or, when the provider sent no
// email_verified at all (never when it says false, nor when it sent one Gantry cannot
// read), a trusted domain of this issuer or Entra's xms_edov.
func (a *Asserted) decide(trusted []string, id, userInfo Claims) {
	if a.Email == "" || !strings.Contains(a.Email, "@") {
		return
	}
	switch a.EmailVerified {
	case "true":
		a.Verified, a.VerifiedBy = true, ByEmailVerified
		return
	case "":
	default:
		return
	}
	if d := domainOf(a.Email); d != "" && slices.Contains(trusted, d) {
		a.Verified, a.VerifiedBy = true, ByTrustedDomain
		return
	}
	for _, c := range []Claims{id, userInfo} {
		if c == nil || !present(c, "xms_edov") {
			continue
		}
		if v, ok := boolClaim(c["xms_edov"]); ok && v {
			a.Verified, a.VerifiedBy = true, ByXMSEdov
		}
		return
	}
}

// readGroups reads the groups claim: a list of strings or one string; an Entra overage
// marker is recorded instead.
func (a *Asserted) readGroups(c Claims, from string) {
	name := a.GroupsClaim
	if overage(c, name) && !present(c, name) {
		a.GroupsOverage, a.GroupsFrom = true, from
		return
	}
	raw, ok := c[name]
	if !ok || isNull(raw) {
		return
	}
	var list []any
	if json.Unmarshal(raw, &list) == nil {
		groups := []string{}
		for _, g := range list {
			if s, ok := g.(string); ok {
				groups = append(groups, s)
			} else {
				a.Ignored = append(a.Ignored, fmt.Sprintf("%s: %s holds a %s, not a string", from, name, kind(g)))
			}
		}
		a.Groups, a.GroupsFrom = groups, from
		return
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		a.Groups, a.GroupsFrom = []string{one}, from
		return
	}
	a.ignore(from, name, raw)
}

// str reads claim name of c as a string; another shape is ignored and noted.
func (a *Asserted) str(c Claims, from, name string) (string, bool) {
	raw, ok := c[name]
	if !ok || isNull(raw) {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		a.ignore(from, name, raw)
		return "", false
	}
	return s, s != ""
}

func (a *Asserted) ignore(from, name string, raw json.RawMessage) {
	var v any
	_ = json.Unmarshal(raw, &v)
	a.Ignored = append(a.Ignored, fmt.Sprintf("%s: %s is a %s, not the shape Gantry reads", from, name, kind(v)))
}

// boolClaim reads a boolean sent as a JSON boolean or as the string "true" or "false"
// in any case.
func boolClaim(raw json.RawMessage) (value, ok bool) {
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	return false, false
}

// overage reports Entra's group overage: _claim_names naming the groups claim (or
// "groups"), or hasgroups true.
func overage(c Claims, groupsClaim string) bool {
	var names map[string]any
	if json.Unmarshal(c["_claim_names"], &names) == nil {
		if _, ok := names[groupsClaim]; ok {
			return true
		}
		if _, ok := names["groups"]; ok {
			return true
		}
	}
	v, ok := boolClaim(c["hasgroups"])
	return ok && v
}

func present(c Claims, name string) bool {
	raw, ok := c[name]
	return ok && !isNull(raw)
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func kind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return "value"
}

// domainOf is the lower-cased domain of an e-mail address ("" when it has none).
func domainOf(email string) string {
	at := strings.LastIndex(email, "@")
	if at < 1 || at == len(email)-1 {
		return ""
	}
	return strings.ToLower(email[at+1:])
}

// ParseDomains reads --oidc-verified-domains: comma-separated e-mail domains (e.g.
// "acme.example,acme.co.uk"), lower-cased; a domain is a name with a dot, without "@",
// wildcard or scheme.
func ParseDomains(s string) ([]string, error) {
	var out []string
	for _, d := range strings.Split(s, ",") {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "" {
			continue
		}
		if !strings.Contains(d, ".") || strings.ContainsAny(d, "@*/: \t") || strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") {
			return nil, fmt.Errorf("%q is not an e-mail domain (write acme.example, without @ or *)", d)
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out, nil
}
