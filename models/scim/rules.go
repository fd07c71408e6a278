package scim

import (
	"gantry/models/authz"
)

// CanManageToken is who makes and rotates an organization's SCIM token: a signed-in
// owner (a directory can end anyone's access, so the token is the owners'), never a
// request made with an API token.
func CanManageToken(s authz.Subject) bool {
	return s.TokenID == "" && !s.System && s.Can(authz.PermEntitlementsManage)
}

// LinkedBy is the rule that links a directory user to a Gantry person, to end their
// access and to give the group rules its groups: the directory's externalId equals the
// subject the person signs in with (Okta's externalId is the user id its ID tokens carry
// as sub) or the object id their last sign-in asserted (Entra's oid: its sub is pairwise,
// one per application, and its provisioning app sends the objectId as externalId); never
// a service account. Deprovisioning ends the access of the linked members of the
// directory's organization; the rules reach every linked person. An e-mail address or a
// userName never links: they name an address, not an identity (docs/scim.md).
const LinkedBy = "externalId = subject, or the oid of the last sign-in"
