package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/apitoken"
	"gantry/models/authz"
	"gantry/models/errs"
	"gantry/models/org"
	"gantry/views"
	"gantry/views/paths"
)

// TokenService is what the tokens page needs of API tokens (apitoken.Service).
type TokenService interface {
	List(ctx context.Context) ([]apitoken.View, error)
	Issue(ctx context.Context, in apitoken.Issue) (apitoken.Issued, error)
	Revoke(ctx context.Context, id string) error
}

// ServiceAccounts is what the tokens page needs of members (org.Members): the service
// accounts a token may be made for, and adding one.
type ServiceAccounts interface {
	List(ctx context.Context) ([]org.MembershipView, error)
	AddServiceAccount(ctx context.Context, name string, role authz.Role) (org.User, error)
}

// Tokens serves the API tokens page (DESIGN §10): everyone's own personal tokens, and
// for admins the organization's service accounts and their tokens.
type Tokens struct {
	Tokens  TokenService
	Members ServiceAccounts
}

// Register adds the token routes to g.
func (h Tokens) Register(g *echo.Group) {
	g.GET(paths.Tokens(), h.show)
	g.POST(paths.Tokens(), h.issue)
	g.POST(paths.RouteTokenRevoke, h.revoke)
	g.POST(paths.ServiceAccounts(), h.addServiceAccount)
}

func (h Tokens) show(c echo.Context) error {
	return h.page(c, http.StatusOK, views.TokenForm{Days: strconv.Itoa(int(apitoken.DefaultLifetime.Hours() / 24)), Scopes: map[string]bool{"read": true}},
		views.ServiceAccountForm{Role: string(authz.RoleOperator)}, nil)
}

func (h Tokens) page(c echo.Context, status int, form views.TokenForm, account views.ServiceAccountForm, issued *views.IssuedToken) error {
	ctx := c.Request().Context()
	tokens, err := h.Tokens.List(ctx)
	if err != nil {
		return err
	}
	subject, _ := authz.SubjectFrom(ctx)
	p := views.TokensProps{Form: form, Account: account, Issued: issued, CanManage: subject.Can(authz.PermMembersManage),
		SeesAll: subject.Can(authz.PermMembersManage) || subject.Can(authz.PermAuditRead),
		MaxDays: int(apitoken.MaxLifetime.Hours() / 24)}
	for _, sc := range authz.Scopes {
		p.Scopes = append(p.Scopes, string(sc))
	}
	if p.CanManage {
		members, err := h.Members.List(ctx)
		if err != nil {
			return err
		}
		for _, m := range members {
			if m.ServiceAccount {
				p.ServiceAccounts = append(p.ServiceAccounts, views.KV{Key: m.UserID, Value: m.UserName + " (" + string(m.Role) + ")"})
			}
		}
		for _, r := range authz.Roles {
			if r != authz.RoleOwner {
				p.Roles = append(p.Roles, string(r))
			}
		}
	}
	now := time.Now()
	for _, t := range tokens {
		row := views.TokenRow{ID: t.ID, Name: t.Name, Holder: t.Holder, ServiceAccount: t.ServiceAccount, Mine: t.UserID == subject.UserID,
			ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt, CreatedAt: t.CreatedAt}
		for _, sc := range t.Scopes {
			row.Scopes = append(row.Scopes, string(sc))
		}
		switch {
		case t.RevokedAt != nil:
			row.State = "revoked"
		case !t.ExpiresAt.After(now):
			row.State = "expired"
		default:
			row.State = "active"
		}
		p.Rows = append(p.Rows, row)
	}
	return render.Page(c, status, views.TokensPage(p))
}

func (h Tokens) issue(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return errs.Explain(errs.ErrBadRequest, "The form could not be read.")
	}
	typed := views.TokenForm{Name: form.Get("name"), Days: form.Get("days"), Holder: form.Get("holder"), Scopes: map[string]bool{}}
	for _, sc := range form["scopes"] {
		typed.Scopes[sc] = true
	}
	in := apitoken.Issue{Name: typed.Name, Scopes: form["scopes"], HolderID: typed.Holder}
	// Days the token lives; what is no whole number is refused by the service's
	// lifetime check, with the other fields' messages.
	in.Lifetime = -1
	if days, err := strconv.Atoi(strings.TrimSpace(typed.Days)); err == nil && days > 0 && days <= 10000 {
		in.Lifetime = time.Duration(days) * 24 * time.Hour
	}
	issued, err := h.Tokens.Issue(c.Request().Context(), in)
	if v, ok := errs.AsValidation(err); ok {
		typed.Errors = v.Fields
		return h.page(c, http.StatusUnprocessableEntity, typed, views.ServiceAccountForm{Role: string(authz.RoleOperator)}, nil)
	}
	if err != nil {
		return err
	}
	// The secret is in this answer only: no redirect could carry it safely.
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return h.page(c, http.StatusCreated, views.TokenForm{Days: typed.Days, Scopes: map[string]bool{"read": true}},
		views.ServiceAccountForm{Role: string(authz.RoleOperator)}, &views.IssuedToken{Name: issued.Name, Secret: issued.Secret, ExpiresAt: issued.ExpiresAt})
}

func (h Tokens) revoke(c echo.Context) error {
	if err := h.Tokens.Revoke(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Token revoked: it no longer works.")
	return render.Redirect(c, paths.Tokens())
}

func (h Tokens) addServiceAccount(c echo.Context) error {
	account := views.ServiceAccountForm{Name: c.FormValue("name"), Role: c.FormValue("role")}
	u, err := h.Members.AddServiceAccount(c.Request().Context(), account.Name, authz.Role(account.Role))
	if v, ok := errs.AsValidation(err); ok {
		account.Errors = v.Fields
		return h.page(c, http.StatusUnprocessableEntity, views.TokenForm{Days: strconv.Itoa(int(apitoken.DefaultLifetime.Hours() / 24)), Scopes: map[string]bool{"read": true}}, account, nil)
	}
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Service account "+u.Name+" added as "+account.Role+": make it a token below.")
	return render.Redirect(c, paths.Tokens())
}
