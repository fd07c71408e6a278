package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/pages"
	"gantry/views"
	"gantry/views/paths"
)

// SCIMTokenPages reads the directory sync page and makes the SCIM token (pages.SCIM).
type SCIMTokenPages interface {
	Page(ctx context.Context) (pages.SCIMPage, error)
	Rotate(ctx context.Context) (pages.SCIMPage, error)
}

// SCIMToken serves the directory sync page: owners make or rotate the organization's
// SCIM token, shown once.
type SCIMToken struct {
	Pages SCIMTokenPages
}

// Register adds the directory sync routes to g.
func (h SCIMToken) Register(g *echo.Group) {
	g.GET(paths.SCIMSettings(), h.show)
	g.POST(paths.SCIMSettings(), h.rotate)
}

func (h SCIMToken) show(c echo.Context) error {
	page, err := h.Pages.Page(c.Request().Context())
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.SCIMPage(scimProps(page)))
}

func (h SCIMToken) rotate(c echo.Context) error {
	page, err := h.Pages.Rotate(c.Request().Context())
	if err != nil {
		return err
	}
	// The secret is in this answer only: no redirect could carry it safely.
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return render.Page(c, http.StatusCreated, views.SCIMPage(scimProps(page)))
}

func scimProps(page pages.SCIMPage) views.SCIMProps {
	p := views.SCIMProps{BaseURL: page.BaseURL, Exists: page.Status.Exists, CreatedAt: page.Status.CreatedAt,
		CreatedBy: page.Status.CreatedBy, CanManage: page.CanManage}
	if page.Issued != nil {
		p.Secret = page.Issued.Secret
	}
	return p
}
