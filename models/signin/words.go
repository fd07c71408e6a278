package signin

import (
	"fmt"
	"strings"
)

// Words are a sign-in's claims in plain words, for the members page's diagnostics and
// the "not a member" page: what the provider asserted, whether and how the address
// counted as verified, and where each claim came from. The rule's one wording.
type Words struct {
	Email        string // the address and where it came from, or that none was sent
	Name         string
	Verified     bool
	Verification string
	Groups       string
	UserInfo     string
	Ignored      []string
}

var sourceWords = map[string]string{FromIDToken: "ID token", FromUserInfo: "UserInfo endpoint"}

// Words describes a.
func (a Asserted) Words() Words {
	w := Words{Verified: a.Verified, Verification: a.verification(), UserInfo: "UserInfo endpoint " + a.UserInfo, Ignored: a.Ignored}
	if a.UserInfo == "" {
		w.UserInfo = ""
	}
	w.Email = "no e-mail address"
	if a.Email != "" {
		w.Email = fmt.Sprintf("%s (from the %s)", a.Email, sourceWords[a.EmailFrom])
	}
	w.Name = "no name"
	if a.Name != "" {
		w.Name = fmt.Sprintf("%s (from the %s)", a.Name, sourceWords[a.NameFrom])
	}
	switch {
	case a.GroupsOverage:
		w.Groups = fmt.Sprintf("the provider sent too many groups to fit in the token (from the %s): groups unknown", sourceWords[a.GroupsFrom])
	case a.GroupsFrom == "":
		w.Groups = fmt.Sprintf("no %q claim", a.GroupsClaim)
	case len(a.Groups) == 0:
		w.Groups = fmt.Sprintf("an empty %q claim (from the %s)", a.GroupsClaim, sourceWords[a.GroupsFrom])
	default:
		w.Groups = fmt.Sprintf("%s (claim %q, from the %s)", strings.Join(a.Groups, ", "), a.GroupsClaim, sourceWords[a.GroupsFrom])
	}
	return w
}

func (a Asserted) verification() string {
	if a.Email == "" {
		return "not verified: the provider asserted no e-mail address"
	}
	from := sourceWords[a.EmailVerifiedFrom]
	switch {
	case a.VerifiedBy == ByEmailVerified:
		return "verified: the provider said email_verified true (in the " + from + ")"
	case a.VerifiedBy == ByTrustedDomain:
		return "verified: the provider sent no email_verified, and " + domainOf(a.Email) + " is a trusted domain of this provider"
	case a.VerifiedBy == ByXMSEdov:
		return "verified: the provider sent no email_verified, and Entra ID's xms_edov says the domain's owner verified it"
	case a.EmailVerified == "false":
		return "not verified: the provider said email_verified false (in the " + from + ")"
	case a.EmailVerified == "unreadable":
		return "not verified: the provider's email_verified (in the " + from + ") is neither true nor false"
	}
	return "not verified: the provider sent no email_verified, and " + domainOf(a.Email) + " is not a trusted domain of this provider"
}
