package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

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
	// The environment's settings are linked for who may change them (an auditor reads
	// the setting's name).
	subject, _ := authz.SubjectFrom(c.Request().Context())
	return render.Page(c, http.StatusOK, views.GovernanceReport(governanceProps(rep, subject.Can(authz.PermEnvironmentsManage))))
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

// governanceProps is the report as its page draws it, with the links of its findings.
func governanceProps(rep governance.Report, editsEnvironments bool) views.GovernanceProps {
	p := views.GovernanceProps{GeneratedAt: rep.GeneratedAt, MatrixVersion: rep.MatrixVersion, Matrix: rep.Matrix, Floors: rep.Floors,
		Rollback: rep.Rollback, ManualChange: rep.ManualChange, ManualChangeRecord: rep.ManualChangeRecord,
		Handoff: rep.Handoff, MarkdownURL: paths.GovernanceMarkdown()}
	for _, e := range rep.Environments {
		a := e.Applies
		ge := views.GovernanceEnvironment{Name: e.Name, Tier: e.Tier, ApplyIdentity: e.ApplyIdentity, Integration: targetSummary(e.Integration),
			Applied: a.Applied, Unevidenced: a.Unevidenced, SelfApproved: a.SelfApproved, SelfService: a.SelfService}
		for _, g := range e.Gates {
			ge.Gates = append(ge.Gates, views.GovernanceGate{ID: g.ID, Name: g.Name, Checks: g.Checks, Status: g.Status, EnforcedBy: g.EnforcedBy, Holds: g.Holds()})
		}
		for _, f := range e.Findings {
			gf := views.GovernanceFinding{Text: f.Text, Setting: f.Setting.Name, SettingURL: settingURL(f.Setting.Place, e.ID)}
			if place := f.Setting.Place; !editsEnvironments && (place == governance.PlaceEnvironment || place == governance.PlaceCredentials) {
				gf.SettingURL = ""
			}
			for _, r := range f.Runs {
				gf.Runs = append(gf.Runs, views.KV{Key: fmt.Sprintf("run #%d", r.Number), Value: paths.Run(r.ID)})
			}
			ge.Findings = append(ge.Findings, gf)
		}
		p.Environments = append(p.Environments, ge)
	}
	return p
}

// settingURL is where a finding's setting is changed, for environment envID.
func settingURL(place governance.Place, envID string) string {
	switch place {
	case governance.PlaceMatrix:
		return paths.ApprovalMatrix()
	case governance.PlaceEnvironment, governance.PlaceCredentials:
		return paths.EditEnvironment(envID)
	case governance.PlacePolicies:
		return paths.Policies()
	case governance.PlacePolicyModes:
		return paths.EnvironmentPolicies(envID)
	case governance.PlaceHistory:
		return paths.AuditFiltered(url.Values{"environment": {envID}, "action": {"run.running"}})
	}
	return ""
}
