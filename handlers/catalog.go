package handlers

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/catalog"
	"gantry/models/pages"
	"gantry/models/promotion"
	"gantry/models/rollback"
	"gantry/views"
	"gantry/views/paths"
)

// CatalogReader reads the catalog's templates (the API's).
type CatalogReader interface {
	All() []catalog.Entry
	Get(name string) (catalog.Entry, error)
}

// CatalogPages reads the catalog and each template's page (pages.Catalog).
type CatalogPages interface {
	List(ctx context.Context) (pages.CatalogPage, error)
	Template(ctx context.Context, name string) (pages.TemplatePage, error)
}

// Catalog serves the catalog and template pages.
type Catalog struct {
	Pages CatalogPages
}

// Register adds the catalog routes to g.
func (h Catalog) Register(g *echo.Group) {
	g.GET(paths.Catalog(), h.list)
	g.GET(paths.RouteTemplate, h.show)
}

func (h Catalog) list(c echo.Context) error {
	page, err := h.Pages.List(c.Request().Context())
	if err != nil {
		return err
	}
	p := views.CatalogProps{CanRequest: page.CanRequest}
	card := func(e catalog.Entry) views.TemplateCard {
		return views.TemplateCard{Name: cmp.Or(e.Template.Name, "(unreadable manifest)"), Title: e.Template.Title, Version: e.Template.Version,
			Description: e.Template.Description, Owner: e.Template.Owner, Refused: e.Refused}
	}
	for _, e := range page.Templates {
		p.Templates = append(p.Templates, card(e))
	}
	for _, e := range page.Refused {
		p.Refused = append(p.Refused, card(e))
	}
	return render.Page(c, http.StatusOK, views.Catalog(p))
}

func (h Catalog) show(c echo.Context) error {
	page, err := h.Pages.Template(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.TemplatePage(templateProps(page.Entry, page.CanRequest)))
}

func templateProps(e catalog.Entry, canRequest bool) views.TemplateProps {
	t := e.Template
	p := views.TemplateProps{Name: t.Name, Title: t.Title, Version: t.Version, Description: t.Description, Owner: t.Owner,
		ModuleDigest: e.ModuleDigest, Irreversible: t.Irreversible, Rollback: t.Rollback, CanRequest: canRequest,
		Boundary: rollback.TemplateBoundary(t.Irreversible)}
	for _, in := range t.Inputs {
		p.Inputs = append(p.Inputs, views.InputRow{Name: in.Name, Type: in.Type, Required: in.Required, Default: defaultText(in),
			Constraint: constraintText(in), Help: in.Help, Sensitive: in.Sensitive, Divergence: promotion.DivergenceInWords(in.Divergence)})
	}
	for typ, price := range t.Prices {
		p.Prices = append(p.Prices, views.PriceRow{ResourceType: typ, Monthly: price})
	}
	sort.Slice(p.Prices, func(i, j int) bool { return p.Prices[i].ResourceType < p.Prices[j].ResourceType })
	return p
}

func defaultText(in catalog.Input) string {
	if in.Default == nil {
		return ""
	}
	if in.Sensitive {
		return "(sensitive)"
	}
	return fmt.Sprint(in.Default)
}

func constraintText(in catalog.Input) string {
	var parts []string
	if len(in.Enum) > 0 {
		parts = append(parts, "one of "+strings.Join(in.Enum, ", "))
	}
	if in.Min != nil && in.Max != nil {
		parts = append(parts, fmt.Sprintf("%g to %g", *in.Min, *in.Max))
	} else if in.Min != nil {
		parts = append(parts, fmt.Sprintf("at least %g", *in.Min))
	} else if in.Max != nil {
		parts = append(parts, fmt.Sprintf("at most %g", *in.Max))
	}
	if in.Pattern != "" {
		// The pattern in words, never in symbols: the API keeps the pattern.
		parts = append(parts, catalog.PatternInWords(in.Pattern))
	}
	return strings.Join(parts, "; ")
}
