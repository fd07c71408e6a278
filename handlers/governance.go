package handlers

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/models/governance"
	"gantry/views"
	"gantry/views/paths"
)

// GovernanceReports builds the governance report.
type GovernanceReports interface {
	Report(ctx context.Context) (governance.Report, error)
}

// Governance serves the governance report as a page and as Markdown.
type Governance struct {
	Reports GovernanceReports
}

// Register adds the routes to g.
func (h Governance) Register(g *echo.Group) {
	g.GET(paths.Governance(), h.page)
	g.GET(paths.GovernanceMarkdown(), h.markdown)
}

func (h Governance) page(c echo.Context) error {
	rep, err := h.Reports.Report(c.Request().Context())
	if err != nil {
		return err
	}
	p := views.GovernanceProps{GeneratedAt: rep.GeneratedAt, MatrixVersion: rep.MatrixVersion, Matrix: rep.Matrix, Floors: rep.Floors,
		Rollback: rep.Rollback, ManualChange: rep.ManualChange, ManualChangeRecord: rep.ManualChangeRecord, DriftDetection: rep.DriftDetection,
		Handoff: rep.Handoff, MarkdownURL: paths.GovernanceMarkdown()}
	for _, e := range rep.Environments {
		ge := views.GovernanceEnvironment{Name: e.Name, Tier: e.Tier, ApplyIdentity: e.ApplyIdentity, Findings: e.Findings,
			Applied: e.Applies.Applied, Unevidenced: e.Applies.Unevidenced}
		for _, g := range e.Gates {
			ge.Gates = append(ge.Gates, views.GovernanceGate{Name: g.Name, Checks: g.Checks, Status: g.Status, EnforcedBy: g.EnforcedBy})
		}
		p.Environments = append(p.Environments, ge)
	}
	return render.Page(c, http.StatusOK, views.GovernanceReport(p))
}

func (h Governance) markdown(c echo.Context) error {
	ctx := c.Request().Context()
	rep, err := h.Reports.Report(ctx)
	if err != nil {
		return err
	}
	subject, _ := authz.SubjectFrom(ctx)
	c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf("attachment; filename=%q", "gantry-governance.md"))
	return c.Blob(http.StatusOK, "text/markdown; charset=utf-8", []byte(rep.Markdown(subject.OrganizationID)))
}
