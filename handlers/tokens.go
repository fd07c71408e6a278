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
	"gantry/models/pages"
	"gantry/views"
	"gantry/views/paths"
)

// TokenService revokes API tokens (apitoken.Service).
type TokenService interface {
	Revoke(ctx context.Context, id string) error
}

// TokenPages reads the API tokens page and takes its forms (pages.Tokens).
type TokenPages interface {
	Page(ctx context.Context) (pages.TokensPage, error)
	Issue(ctx context.Context, in apitoken.Issue) (pages.TokensPage, error)
	AddServiceAccount(ctx context.Context, name string, role authz.Role) (org.User, *pages.TokensPage, error)
}

// Tokens serves the API tokens page (DESIGN §10): everyone's own personal tokens, and
// for admins the organization's service accounts and their tokens.
type Tokens struct {
	Pages  TokenPages
	Tokens TokenService
}

// Register adds the token routes to g.
func (h Tokens) Register(g *echo.Group) {
	g.GET(paths.Tokens(), h.show)
	g.POST(paths.Tokens(), h.issue)
	g.POST(paths.RouteTokenRevoke, h.revoke)
	g.POST(paths.ServiceAccounts(), h.addServiceAccount)
}

// defaultTokenForm is the token form as a page first draws it: a read token for the
// default lifetime.
func defaultTokenForm() views.TokenForm {
	return views.TokenForm{Days: strconv.Itoa(int(apitoken.DefaultLifetime.Hours() / 24)), Scopes: map[string]bool{"read": true}}
}

// defaultAccountForm is the service account form as a page first draws it.
var defaultAccountForm = views.ServiceAccountForm{Role: string(authz.RoleOperator)}

func (h Tokens) show(c echo.Context) error {
	page, err := h.Pages.Page(c.Request().Context())
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.TokensPage(tokensProps(c, page, defaultTokenForm(), defaultAccountForm)))
}

// tokensProps is the API tokens page as drawn with its forms holding form and account.
func tokensProps(c echo.Context, page pages.TokensPage, form views.TokenForm, account views.ServiceAccountForm) views.TokensProps {
	subject, _ := authz.SubjectFrom(c.Request().Context())
	p := views.TokensProps{Form: form, Account: account, CanManage: page.CanManage, SeesAll: page.SeesAll,
		MaxDays: int(apitoken.MaxLifetime.Hours() / 24)}
	p.Form.Errors, p.Account.Errors = page.IssueErrors, page.AccountErrors
	if t := page.Issued; t != nil {
		p.Issued = &views.IssuedToken{Name: t.Name, Secret: t.Secret, ExpiresAt: t.ExpiresAt}
	}
	for _, sc := range authz.Scopes {
		p.Scopes = append(p.Scopes, string(sc))
	}
	for _, m := range page.ServiceAccounts {
		p.ServiceAccounts = append(p.ServiceAccounts, views.KV{Key: m.UserID, Value: m.UserName + " (" + string(m.Role) + ")"})
	}
	for _, r := range authz.Roles {
		if page.CanManage && r != authz.RoleOwner {
			p.Roles = append(p.Roles, string(r))
		}
	}
	for _, t := range page.Tokens {
		p.Rows = append(p.Rows, tokenRow(t, subject.UserID, page.Now))
	}
	return p
}

// tokenRow is token t on the page of user id, its lifetime judged at now.
func tokenRow(t apitoken.View, userID string, now time.Time) views.TokenRow {
	row := views.TokenRow{ID: t.ID, Name: t.Name, Holder: t.Holder, ServiceAccount: t.ServiceAccount, Mine: t.UserID == userID,
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
	return row
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
	page, err := h.Pages.Issue(c.Request().Context(), in)
	if err != nil {
		return err
	}
	if page.Issued == nil {
		return render.Page(c, http.StatusUnprocessableEntity, views.TokensPage(tokensProps(c, page, typed, defaultAccountForm)))
	}
	// The secret is in this answer only: no redirect could carry it safely.
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return render.Page(c, http.StatusCreated, views.TokensPage(tokensProps(c, page,
		views.TokenForm{Days: typed.Days, Scopes: map[string]bool{"read": true}}, defaultAccountForm)))
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
	u, refused, err := h.Pages.AddServiceAccount(c.Request().Context(), account.Name, authz.Role(account.Role))
	if err != nil {
		return err
	}
	if refused != nil {
		return render.Page(c, http.StatusUnprocessableEntity, views.TokensPage(tokensProps(c, *refused, defaultTokenForm(), account)))
	}
	_ = render.Flash(c, "success", "Service account "+u.Name+" added as "+account.Role+": make it a token below.")
	return render.Redirect(c, paths.Tokens())
}
