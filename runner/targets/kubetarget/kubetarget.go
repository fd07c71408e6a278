// Package kubetarget is what a Kubernetes cluster needs to trust Gantry's workload tokens and
// to hold a Gantry session to what was reviewed: the one home of those rules. It renders
//
//   - the API server's JWT authenticator (an AuthenticationConfiguration): the token's claims
//     become a user named "gantry:<sub>", in the groups "gantry:ws:<workspace>:<scope>" and
//     "gantry:org:<organization>:<scope>", with the extras gantry.dev/org, gantry.dev/env,
//     gantry.dev/workspace, gantry.dev/scope and, on an apply, gantry.dev/approved (the change
//     classes the approved plan contains);
//   - the ClusterRoles a plan or verification (read) and an apply (write) get on what the team
//     namespace template manages, bound to the organization's read and write groups;
//   - a ValidatingAdmissionPolicy that confines a Gantry session's writes to the namespaces
//     labelled for its workspace and refuses a DELETE unless the approved plan contained one.
//
// Why one binding per organization and not one per workspace: RBAC cannot confine the
// creation of a namespace to a name or a label (create has no resourceNames, and the object
// does not exist yet), so a workspace's own ClusterRoleBinding would grant exactly the same
// cluster-wide verbs as the organization's and add only an onboarding step per workspace —
// one a platform team would have to repeat for every workspace people request in the portal.
// The workspace boundary is the admission policy's instead: it sees the object, the object it
// replaces and the namespace, and compares their gantry.dev/workspace label with the token's
// workspace. RBAC keeps what only RBAC can: other organizations' tokens, and every verb and
// resource the templates do not need. The per-workspace groups are in every token all the
// same, for a platform team that prefers to bind workspaces one by one (Grant.Workspaces).
//
// deploy/targets/kubernetes holds these files rendered for a platform team, with a README
// that says how to install them.
package kubetarget

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
)

// The names a cluster sees; the templates write the same.
const (
	// UserPrefix starts the username of every Gantry session: "gantry:" + the token's sub.
	UserPrefix = "gantry:"
	// WorkspaceLabel is the label a namespace carries for the workspace that owns it: a
	// template sets it (to the workspace's id) on every namespace it makes, and the admission
	// policy lets a session write only where it equals the session's workspace.
	WorkspaceLabel = "gantry.dev/workspace"

	// The user extras the authenticator maps from the token's claims.
	ExtraOrganization = "gantry.dev/org"
	ExtraEnvironment  = "gantry.dev/env"
	ExtraWorkspace    = "gantry.dev/workspace"
	ExtraScope        = "gantry.dev/scope"
	ExtraApproved     = "gantry.dev/approved"

	// The ClusterRoles, the admission policy and its binding.
	ReadRole   = "gantry-read"
	WriteRole  = "gantry-write"
	PolicyName = "gantry-workspace-guard"
)

// DefaultBindableRoles are the ClusterRoles a write session may bind in its namespaces (the
// team namespace template binds a team to "edit").
var DefaultBindableRoles = []string{"edit", "view"}

// WorkspaceGroup is the group a token of workspace ws with scope ("read" or "write") puts
// its session in; OrganizationGroup the one of its organization.
func WorkspaceGroup(ws, scope string) string { return "gantry:ws:" + ws + ":" + scope }

// OrganizationGroup is the group every token of organization org with scope carries.
func OrganizationGroup(org, scope string) string { return "gantry:org:" + org + ":" + scope }

// Trust is what an API server needs to know of a Gantry to trust its workload tokens.
type Trust struct {
	// IssuerURL is Gantry's workload issuer, exactly as its tokens' iss say (an https URL: the
	// API server fetches IssuerURL/.well-known/openid-configuration and the keys it names).
	IssuerURL string
	// CAPEM is the CA certificate (PEM) that signed the issuer's TLS certificate; empty
	// trusts the API server's system roots (a publicly trusted issuer).
	CAPEM []byte
	// Audience is the audience Gantry mints this cluster's tokens for (the integration's).
	Audience string
	// Environments, when set, are the only Gantry environments whose tokens authenticate: a
	// production cluster names the production environment, so a development apply cannot
	// reach it whatever RBAC says.
	Environments []string
}

// Grant is what the cluster lets Gantry sessions do.
type Grant struct {
	// Organization's read and write groups are bound to the read and write roles.
	Organization string
	// Workspaces, when set, are bound instead of the organization: only these workspaces'
	// sessions get the roles (the admission policy confines each to its namespaces still).
	Workspaces []string
	// BindableRoles are the ClusterRoles a write session may reference in a RoleBinding;
	// default DefaultBindableRoles.
	BindableRoles []string
}

// ErrInvalid means a Trust or Grant cannot be rendered.
var ErrInvalid = errors.New("invalid Kubernetes trust settings")

// idRe is a Gantry id (org-..., env-..., ws-...) or a ClusterRole name: it goes into
// object names, label values, group names and CEL strings, so nothing that could escape
// any of them is allowed.
var idRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$`)

func checkIDs(what string, ids ...string) error {
	for _, id := range ids {
		if !idRe.MatchString(id) {
			return fmt.Errorf("%s %q is not a lower-case name of letters, digits, '-' and '.': %w", what, id, ErrInvalid)
		}
	}
	return nil
}

// Validate refuses what the API server would refuse, or what would not say what it means.
func (t Trust) Validate() error {
	u, err := url.Parse(t.IssuerURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.RawPath != "" ||
		!regexp.MustCompile(`^[A-Za-z0-9._~:/-]*$`).MatchString(t.IssuerURL) {
		return fmt.Errorf("issuer %q is not an https URL without query or escapes (the API server fetches its keys over https only): %w", t.IssuerURL, ErrInvalid)
	}
	if !regexp.MustCompile(`^[A-Za-z0-9._:/-]{1,200}$`).MatchString(t.Audience) {
		return fmt.Errorf("audience %q is empty or holds characters other than letters, digits and ._:/-: %w", t.Audience, ErrInvalid)
	}
	if len(t.CAPEM) > 0 && !isPEMCertificates(t.CAPEM) {
		return fmt.Errorf("the issuer's CA is not PEM certificates: %w", ErrInvalid)
	}
	return checkIDs("environment", t.Environments...)
}

// Validate refuses ids that could not be written where the manifests put them.
func (g Grant) Validate() error {
	if g.Organization == "" && len(g.Workspaces) == 0 {
		return fmt.Errorf("a grant names an organization or workspaces: %w", ErrInvalid)
	}
	if g.Organization != "" && len(g.Workspaces) > 0 {
		return fmt.Errorf("a grant binds an organization or its workspaces, not both: %w", ErrInvalid)
	}
	if g.Organization != "" {
		if err := checkIDs("organization", g.Organization); err != nil {
			return err
		}
	}
	if err := checkIDs("workspace", g.Workspaces...); err != nil {
		return err
	}
	return checkIDs("bindable ClusterRole", g.bindable()...)
}

func (g Grant) bindable() []string {
	if len(g.BindableRoles) == 0 {
		return DefaultBindableRoles
	}
	return slices.Clone(g.BindableRoles)
}
