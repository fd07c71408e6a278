package handlers

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/models/catalog"
	"gantry/models/rollback"
	"gantry/views"
	"gantry/views/paths"
)

// CatalogReader is what the catalog pages need.
type CatalogReader interface {
	All() []catalog.Entry
	Get(name string) (catalog.Entry, error)
}

// Catalog serves the catalog and template pages.
type Catalog struct {
	Catalog CatalogReader
}

// Register adds the catalog routes to g.
func (h Catalog) Register(g *echo.Group) {
	g.GET(paths.Catalog(), h.list)
	g.GET(paths.RouteTemplate, h.show)
}

func (h Catalog) list(c echo.Context) error {
	subject, _ := authz.SubjectFrom(c.Request().Context())
	var p views.CatalogProps
	for _, e := range h.Catalog.All() {
		card := views.TemplateCard{Name: e.Template.Name, Title: e.Template.Title, Version: e.Template.Version,
			Description: e.Template.Description, Owner: e.Template.Owner, Refused: e.Refused}
		switch {
		case e.Usable():
			p.Templates = append(p.Templates, card)
		case subject.Can(authz.PermEnvironmentsManage): // admins and owners see why a template is refused
			if card.Name == "" {
				card.Name = "(unreadable manifest)"
			}
			p.Refused = append(p.Refused, card)
		}
	}
	return render.Page(c, http.StatusOK, views.Catalog(p))
}

func (h Catalog) show(c echo.Context) error {
	e, err := h.Catalog.Get(c.Param("name"))
	if err != nil {
		return err
	}
	subject, _ := authz.SubjectFrom(c.Request().Context())
	return render.Page(c, http.StatusOK, views.TemplatePage(templateProps(e, subject.Can(authz.PermProvisioningPlan))))
}

func templateProps(e catalog.Entry, canRequest bool) views.TemplateProps {
	t := e.Template
	p := views.TemplateProps{Name: t.Name, Title: t.Title, Version: t.Version, Description: t.Description, Owner: t.Owner,
		ModuleDigest: e.ModuleDigest, Irreversible: t.Irreversible, Rollback: t.Rollback, CanRequest: canRequest,
		Boundary: rollback.TemplateBoundary(t.Irreversible)}
	for _, in := range t.Inputs {
		p.Inputs = append(p.Inputs, views.InputRow{Name: in.Name, Type: in.Type, Required: in.Required, Default: defaultText(in),
			Constraint: constraintText(in), Help: in.Help, Sensitive: in.Sensitive, Divergence: in.Divergence})
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
		parts = append(parts, "matches "+in.Pattern)
	}
	return strings.Join(parts, "; ")
}
