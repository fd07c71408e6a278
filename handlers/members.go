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

// Members serves the members page (admins and owners): roles, cloud.live, grants on
// restricted environments, invitations and removal.
type Members struct {
	Members      MemberAdmin
	Environments MemberGrants
}

// Register adds the members routes to g.
func (h Members) Register(g *echo.Group) {
	g.GET(paths.Members(), h.show)
	g.POST(paths.InviteMember(), h.invite)
	g.POST(paths.RevokeInvitation(), h.revokeInvitation)
	g.GET(paths.RouteMemberAction, h.confirmRemove)
	g.POST(paths.RouteMemberAction, h.act)
}

func (h Members) show(c echo.Context) error {
	return h.page(c, http.StatusOK, views.InviteForm{Role: string(authz.RoleOperator)})
}

// page draws the members page with the invitation form as given.
func (h Members) page(c echo.Context, status int, invite views.InviteForm) error {
	ctx := c.Request().Context()
	members, err := h.Members.List(ctx)
	if err != nil {
		return err
	}
	invitations, err := h.Members.Invitations(ctx)
	if err != nil {
		return err
	}
	restricted, grants, err := h.Environments.RestrictedGrants(ctx)
	if err != nil {
		return err
	}
	subject, _ := authz.SubjectFrom(ctx)
	p := views.MembersProps{CanEntitle: subject.Can(authz.PermEntitlementsManage), Invite: invite}
	for _, r := range authz.Roles {
		if r != authz.RoleOwner || p.CanEntitle {
			p.Roles = append(p.Roles, string(r))
		}
	}
	for _, e := range restricted {
		p.Restricted = append(p.Restricted, views.KV{Key: e.ID, Value: e.Name})
	}
	for _, m := range members {
		p.Rows = append(p.Rows, views.MemberRow{UserID: m.UserID, Name: m.UserName, Email: m.UserEmail, Role: string(m.Role),
			CloudLive: m.CloudLive, Groups: m.Groups, Grants: grants[m.UserID], Self: m.UserID == subject.UserID, ServiceAccount: m.ServiceAccount,
			Editable: m.Role != authz.RoleOwner || p.CanEntitle})
	}
	for _, inv := range invitations {
		p.Invitations = append(p.Invitations, views.KV{Key: inv.Email, Value: string(inv.Role)})
	}
	return render.Page(c, status, views.MembersPage(p))
}

func (h Members) invite(c echo.Context) error {
	email, role := c.FormValue("email"), c.FormValue("role")
	err := h.Members.Invite(c.Request().Context(), email, authz.Role(role))
	if v, ok := errs.AsValidation(err); ok {
		return h.page(c, http.StatusUnprocessableEntity, views.InviteForm{Email: email, Role: role, Errors: v.Fields})
	}
	if err != nil {
		return err
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
		err, msg = h.Members.SetCloudLive(ctx, id, on), "cloud.live revoked: their approvals that had not started applying wait again."
		if on {
			msg = "cloud.live granted."
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
