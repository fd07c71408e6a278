package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/errs"
	"gantry/models/listing"
	"gantry/models/pages"
	"gantry/models/policy"
	"gantry/policies"
	"gantry/views"
	"gantry/views/paths"
)

// PolicyStore is what the policy pages change beyond their forms (policy.Store).
type PolicyStore interface {
	SetActive(ctx context.Context, name string, active bool) error
}

// PolicyChanges are the policy store's changes the API makes (policy.Store).
type PolicyChanges interface {
	PolicyStore
	Upload(ctx context.Context, name, rego, tests string) (policy.OrgPolicy, error)
	SetModes(ctx context.Context, environmentID string, modes map[string]string) error
}

// PolicyPages reads the policy pages and submits their forms (pages.Policies): a
// refused submission answers the page to draw again.
type PolicyPages interface {
	Page(ctx context.Context, q pages.PolicyQuery) (pages.PolicyPage, error)
	Upload(ctx context.Context, name, rego, tests string, q pages.PolicyQuery) (policy.OrgPolicy, *pages.PolicyPage, error)
	Modes(ctx context.Context, environmentID string) (pages.ModesPage, error)
	SaveModes(ctx context.Context, environmentID string, modes map[string]string) (*pages.ModesPage, error)
}

// Policies serves the organization's policy bundle, its own policies and each
// environment's enforcement modes: every member reads them, admins and owners change
// them (the store checks).
type Policies struct {
	Pages PolicyPages
	Store PolicyStore
}

// Register adds the policy routes to g.
func (h Policies) Register(g *echo.Group) {
	g.GET(paths.Policies(), h.show)
	g.POST(paths.UploadPolicy(), h.upload)
	g.POST(paths.RoutePolicyActive, h.setActive)
	g.GET(paths.RouteEnvironmentPolicies, h.modes)
	g.POST(paths.RouteEnvironmentPolicies, h.saveModes)
}

func (h Policies) show(c echo.Context) error {
	l, q, err := readPolicyList(c)
	if err != nil {
		return err
	}
	page, err := h.Pages.Page(c.Request().Context(), q)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if l.refused() {
		status = http.StatusUnprocessableEntity
	}
	return render.Page(c, status, views.Policies(policiesProps(l, page, views.PolicyUpload{})))
}

func (h Policies) upload(c echo.Context) error {
	l, q, err := readPolicyList(c)
	if err != nil {
		return err
	}
	// Browsers send textarea lines ending in CRLF; store the source as written.
	in := views.PolicyUpload{Name: strings.TrimSpace(c.FormValue("name")),
		Rego: lf(c.FormValue("rego")), Tests: lf(c.FormValue("tests"))}
	p, refused, err := h.Pages.Upload(c.Request().Context(), in.Name, in.Rego, in.Tests, q)
	if err != nil {
		return err
	}
	if refused != nil {
		return render.Page(c, http.StatusUnprocessableEntity, views.Policies(policiesProps(l, *refused, in)))
	}
	_ = render.Flash(c, "success", "Uploaded "+p.Name+" version "+strconv.Itoa(p.Version)+".")
	return render.Redirect(c, paths.Policies())
}

func (h Policies) setActive(c echo.Context) error {
	active, err := strconv.ParseBool(c.FormValue("active"))
	if err != nil {
		return &errs.Validation{Fields: map[string]string{"active": "Choose true or false."}}
	}
	name := c.Param("name")
	if err := h.Store.SetActive(c.Request().Context(), name, active); err != nil {
		return err
	}
	msg := "Deactivated " + name + ": its rule is no longer evaluated."
	if active {
		msg = "Activated " + name + "."
	}
	_ = render.Flash(c, "success", msg)
	return render.Redirect(c, paths.Policies())
}

var (
	ruleColumns = []sortColumn{{label: "Rule", key: pages.SortRule}, {label: "Id and description", class: "hide-narrow"}, {label: "Origin", key: pages.SortOrigin},
		{label: "Default mode", key: pages.SortMode, descFirst: true}, {label: "Version", class: "hide-narrow"}}
	versionColumns = []sortColumn{{label: "Name", key: policy.SortName}, {label: "Version"}, {label: "Title", class: "hide-narrow"},
		{label: "Enforcement", class: "hide-narrow"}, {label: "Uploaded", key: policy.SortUploaded, descFirst: true, class: "hide-narrow"}, {label: "Status"}}
	policyModes = []views.ListChoice{{Value: string(policies.Advisory), Label: "advisory"}, {Value: string(policies.SoftMandatory), Label: "soft-mandatory"},
		{Value: string(policies.HardMandatory), Label: "hard-mandatory"}}
	policyOrigins  = []views.ListChoice{{Value: policies.OriginBuiltin, Label: "built in"}, {Value: policies.OriginOrg, Label: "this organization"}}
	policyStatuses = []views.ListChoice{{Value: policy.StatusActive, Label: "active"}, {Value: policy.StatusInactive, Label: "inactive"},
		{Value: policy.StatusSuperseded, Label: "superseded"}}
)

// policyFilters are the policies page's filters, as l selects them.
func policyFilters(l listRequest) []views.ListFilter {
	return []views.ListFilter{{Name: "mode", Label: "Enforcement", Any: "Any enforcement", Choices: policyModes, Selected: choice(l, "mode", policyModes)},
		{Name: "origin", Label: "Origin", Any: "Any origin", Choices: policyOrigins, Selected: choice(l, "origin", policyOrigins)},
		{Name: "status", Label: "Status", Any: "Any status", Choices: policyStatuses, Selected: choice(l, "status", policyStatuses)}}
}

// readPolicyList reads the policies page's list form: one search and one set of filters
// for both tables, each sorted and paged on its own. A refused form reads the page
// without its tables.
func readPolicyList(c echo.Context) (listRequest, pages.PolicyQuery, error) {
	l, err := readList(c, paths.Policies(), pages.RuleSortKeys(), listing.Sort{Key: pages.SortRule}, 50)
	if err != nil {
		return l, pages.PolicyQuery{}, err
	}
	q := pages.PolicyQuery{Text: l.text, Mode: choice(l, "mode", policyModes), Origin: choice(l, "origin", policyOrigins),
		Status: choice(l, "status", policyStatuses), Tables: !l.refused()}
	if q.Rules, err = l.pageOf("rules_"); err != nil {
		return l, q, err
	}
	if q.Versions, err = l.pageOf("versions_"); err != nil {
		return l, q, err
	}
	q.Versions.Sort = l.sortOf("versions_sort", []string{policy.SortName, policy.SortUploaded}, listing.Sort{Key: policy.SortName})
	return l, q, nil
}

// policiesProps is the policies page as drawn, its upload form holding in.
func policiesProps(l listRequest, page pages.PolicyPage, in views.PolicyUpload) views.PoliciesProps {
	p := views.PoliciesProps{BundleDigest: page.BundleDigest, EnvironmentsListed: page.Listed, CanManage: page.CanManage,
		Upload: in, Errors: page.Errors, VersionsTotal: page.VersionsTotal,
		Controls:       l.controls("policies", "Search policies", "A rule's id, title or description, or a policy's name.", policyFilters(l), nil),
		RuleHeaders:    l.headers(ruleColumns),
		VersionHeaders: l.headersFor("versions_sort", page.VersionsSort, versionColumns),
		RulesPager:     pager(l, "rules_", page.Rules, "Pages of rules"), VersionsPager: pager(l, "versions_", page.Versions, "Pages of uploaded versions")}
	if s := l.query.Get("versions_sort"); s != "" {
		p.Controls.Keep = append(p.Controls.Keep, views.KV{Key: "versions_sort", Value: page.VersionsSort.String()})
	}
	p.Controls.Noun, p.Controls.Nouns, p.Controls.Total = "rule", "rules", page.RulesTotal
	p.Controls.Note = "· " + strconv.FormatInt(p.VersionsTotal, 10) + " uploaded versions"
	if p.VersionsTotal == 1 {
		p.Controls.Note = "· 1 uploaded version"
	}
	for _, e := range page.Environments {
		p.Environments = append(p.Environments, views.PolicyEnvironment{ID: e.ID, Name: e.Name, Tier: string(e.Tier)})
	}
	for _, r := range page.Rules.Rows {
		p.Rules = append(p.Rules, views.PolicyRuleRow{ID: r.ID, Title: r.Title, Description: r.Description, Origin: r.Origin,
			Enforcement: string(r.Enforcement), Version: r.Version})
	}
	for _, o := range page.Versions.Rows {
		p.OrgPolicies = append(p.OrgPolicies, views.OrgPolicyRow{Name: o.Name, Version: o.Version, Title: o.Title, Enforcement: o.Enforcement,
			Digest: o.Digest, UploadedBy: o.UploadedByName, UploadedAt: o.CreatedAt, Active: o.Active, Latest: o.Latest})
	}
	return p
}

func (h Policies) modes(c echo.Context) error {
	page, err := h.Pages.Modes(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.EnvironmentPolicies(modesProps(page)))
}

func (h Policies) saveModes(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read.")
	}
	modes := map[string]string{}
	for k, v := range form {
		if id, ok := strings.CutPrefix(k, "mode."); ok && len(v) > 0 {
			modes[id] = v[0]
		}
	}
	refused, err := h.Pages.SaveModes(c.Request().Context(), c.Param("id"), modes)
	if err != nil {
		return err
	}
	if refused != nil {
		return render.Page(c, http.StatusUnprocessableEntity, views.EnvironmentPolicies(modesProps(*refused)))
	}
	_ = render.Flash(c, "success", "Policy enforcement saved.")
	return render.Redirect(c, paths.EnvironmentPolicies(c.Param("id")))
}

// modesProps is an environment's enforcement page as drawn, the modes a refused save
// sent over those in force.
func modesProps(page pages.ModesPage) views.EnvironmentPoliciesProps {
	p := views.EnvironmentPoliciesProps{EnvironmentID: page.EnvironmentID, EnvironmentName: page.EnvironmentName, CanManage: page.CanManage,
		Errors: page.Errors}
	for _, r := range page.Rules {
		mode, ok := page.Submitted[r.Rule.ID]
		if !ok {
			mode = string(r.Enforcement)
		}
		p.Rules = append(p.Rules, views.PolicyModeRow{ID: r.Rule.ID, Title: r.Rule.Title, Description: r.Rule.Description,
			Origin: r.Rule.Origin, Default: string(r.Rule.Enforcement), Mode: mode})
	}
	return p
}

// lf turns CRLF line endings into LF.
func lf(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
