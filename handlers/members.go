package handlers

import (
	"context"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/org"
	"gantry/models/pages"
	"gantry/views"
	"gantry/views/paths"
)

// MemberAdmin is what the members page needs of the members service (org.Members).
type MemberAdmin interface {
	List(ctx context.Context) ([]org.MembershipView, error)
	Invitations(ctx context.Context) ([]org.Invitation, error)
	Invite(ctx context.Context, email string, role authz.Role) error
	RevokeInvitation(ctx context.Context, email string) error
	SetRole(ctx context.Context, userID string, role authz.Role) error
	SetCloudLive(ctx context.Context, userID string, on bool) error
	Remove(ctx context.Context, userID string) error
	AddServiceAccount(ctx context.Context, name string, role authz.Role) (org.User, error)
}

// MemberGrants is what the members page needs of environments: the restricted ones and
// who holds a grant on them.
type MemberGrants interface {
	RestrictedGrants(ctx context.Context) ([]environment.Environment, map[string][]string, error)
	SetMemberGrants(ctx context.Context, userID string, envIDs []string) error
}

// MemberPages reads the members page, sends invitations and adds or previews group
// rules (pages.Members).
type MemberPages interface {
	Page(ctx context.Context) (pages.MembersPage, error)
	Invite(ctx context.Context, email string, role authz.Role) (*pages.MembersPage, error)
	AddRule(ctx context.Context, in org.RuleInput) (*pages.MembersPage, error)
	PreviewRule(ctx context.Context, in org.RuleInput) (pages.MembersPage, error)
}

// Members serves the members page (admins and owners): roles, cloud.live, grants on
// restricted environments, invitations and removal.
type Members struct {
	Pages        MemberPages
	Members      MemberAdmin
	Environments MemberGrants
	Rules        GroupRuleAdmin
}

// Register adds the members routes to g.
func (h Members) Register(g *echo.Group) {
	g.GET(paths.Members(), h.show)
	g.POST(paths.InviteMember(), h.invite)
	g.POST(paths.RevokeInvitation(), h.revokeInvitation)
	g.GET(paths.RouteMemberAction, h.confirmRemove)
	g.POST(paths.RouteMemberAction, h.act)
	g.POST(paths.GroupRules(), h.addRule)
	g.POST(paths.PreviewGroupRule(), h.previewRule)
	g.POST(paths.RouteRemoveGroupRule, h.removeRule)
}

func (h Members) show(c echo.Context) error {
	page, err := h.Pages.Page(c.Request().Context())
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.MembersPage(membersProps(c, page, views.InviteForm{Role: string(authz.RoleOperator)}, ruleForm{})))
}

// membersProps is the members page as drawn with the invitation form holding invite.
func membersProps(c echo.Context, page pages.MembersPage, invite views.InviteForm, rule ruleForm) views.MembersProps {
	subject, _ := authz.SubjectFrom(c.Request().Context())
	p := views.MembersProps{CanEntitle: page.CanEntitle, CanManageSCIM: page.CanManageSCIM, Invite: invite, GroupRules: groupRulesProps(page, rule)}
	p.Invite.Errors = page.InviteErrors
	for _, r := range authz.Roles {
		if r != authz.RoleOwner || p.CanEntitle {
			p.Roles = append(p.Roles, string(r))
		}
	}
	for _, e := range page.Restricted {
		p.Restricted = append(p.Restricted, views.KV{Key: e.ID, Value: e.Name})
	}
	for _, m := range page.Members {
		p.Rows = append(p.Rows, views.MemberRow{UserID: m.UserID, Name: m.UserName, Email: m.UserEmail, Role: string(m.Role),
			CloudLive: m.CloudLive, Groups: m.Groups, Grants: page.Grants[m.UserID], Self: m.UserID == subject.UserID, ServiceAccount: m.ServiceAccount,
			Editable: m.Role != authz.RoleOwner || p.CanEntitle, LastSignIn: SignInClaims(m.LastSignIn), FromRule: m.Source == org.SourceRule})
	}
	for _, inv := range page.Invitations {
		p.Invitations = append(p.Invitations, views.KV{Key: inv.Email, Value: string(inv.Role)})
	}
	return p
}

func (h Members) invite(c echo.Context) error {
	email, role := c.FormValue("email"), c.FormValue("role")
	refused, err := h.Pages.Invite(c.Request().Context(), email, authz.Role(role))
	if err != nil {
		return err
	}
	if refused != nil {
		return render.Page(c, http.StatusUnprocessableEntity, views.MembersPage(membersProps(c, *refused, views.InviteForm{Email: email, Role: role}, ruleForm{})))
	}
	_ = render.Flash(c, "success", "Invited "+email+" as "+role+": the invitation becomes a membership at their first sign-in.")
	return render.Redirect(c, paths.Members())
}

func (h Members) revokeInvitation(c echo.Context) error {
	if err := h.Members.RevokeInvitation(c.Request().Context(), c.FormValue("email")); err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Invitation withdrawn.")
	return render.Redirect(c, paths.Members())
}

// confirmRemove asks before removing a member.
func (h Members) confirmRemove(c echo.Context) error {
	if c.Param("action") != "remove" {
		return errs.ErrNotFound
	}
	members, err := h.Members.List(c.Request().Context())
	if err != nil {
		return err
	}
	i := slices.IndexFunc(members, func(m org.MembershipView) bool { return m.UserID == c.Param("id") })
	if i < 0 {
		return errs.ErrNotFound
	}
	m := members[i]
	return render.Page(c, http.StatusOK, views.ConfirmRemoveMember(views.MemberRow{UserID: m.UserID, Name: m.UserName, Email: m.UserEmail, Role: string(m.Role)}))
}

// act changes one member: role, cloud.live, grants or removal.
func (h Members) act(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	var err error
	var msg string
	switch c.Param("action") {
	case "role":
		err, msg = h.Members.SetRole(ctx, id, authz.Role(c.FormValue("role"))), "Role saved."
	case "cloud-live":
		on := c.FormValue("cloud_live") == "on"
		err, msg = h.Members.SetCloudLive(ctx, id, on), "Live-cloud entitlement revoked: their approvals that had not started applying wait again."
		if on {
			msg = "Live-cloud entitlement granted."
		}
	case "grants":
		form, ferr := c.FormParams()
		if ferr != nil {
			return errs.ErrBadRequest
		}
		err, msg = h.Environments.SetMemberGrants(ctx, id, form["grants"]), "Grants saved."
	case "remove":
		if c.FormValue("confirm") != "yes" {
			return render.Redirect(c, paths.MemberAction(id, "remove"))
		}
		err, msg = h.Members.Remove(ctx, id), "Member removed: their approvals that had not started applying wait again."
	default:
		return errs.ErrNotFound
	}
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", msg)
	return render.Redirect(c, paths.Members())
}
