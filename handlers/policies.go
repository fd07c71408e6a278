package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/listing"
	"gantry/models/policy"
	"gantry/policies"
	"gantry/views"
	"gantry/views/paths"
)

// PolicyStore is what the policy pages need (policy.Store).
type PolicyStore interface {
	Versions(ctx context.Context, q policy.VersionQuery) (listing.Result[policy.Version], int64, error)
	Bundle(ctx context.Context, orgID string) (*policies.Bundle, error)
	EnvironmentModes(ctx context.Context, environmentID string) ([]policy.RuleMode, error)
	SetModes(ctx context.Context, environmentID string, modes map[string]string) error
	Upload(ctx context.Context, name, rego, tests string) (policy.OrgPolicy, error)
	SetActive(ctx context.Context, name string, active bool) error
}

// PolicyEnvironments lists environments for the policy pages: admins see all of them
// (List), operators those they may request runs in (Choices).
type PolicyEnvironments interface {
	List(ctx context.Context) ([]environment.Environment, error)
	Choices(ctx context.Context) ([]environment.Environment, error)
}

// Policies serves the organization's policy bundle, its own policies and each
// environment's enforcement modes: every member reads them, admins and owners change
// them (the store checks).
type Policies struct {
	Store        PolicyStore
	Environments PolicyEnvironments
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
	return h.page(c, http.StatusOK, views.PolicyUpload{}, nil)
}

func (h Policies) upload(c echo.Context) error {
	// Browsers send textarea lines ending in CRLF; store the source as written.
	in := views.PolicyUpload{Name: strings.TrimSpace(c.FormValue("name")),
		Rego: lf(c.FormValue("rego")), Tests: lf(c.FormValue("tests"))}
	p, err := h.Store.Upload(c.Request().Context(), in.Name, in.Rego, in.Tests)
	if v, ok := errs.AsValidation(err); ok {
		return h.page(c, http.StatusUnprocessableEntity, in, v.Fields)
	}
	if err != nil {
		return err
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

// Sort keys of the policies page's rules.
const (
	sortRule   = "rule"
	sortOrigin = "origin"
	sortMode   = "mode"
)

// modeRank orders enforcement modes by strength.
var modeRank = map[string]int{string(policies.Advisory): 1, string(policies.SoftMandatory): 2, string(policies.HardMandatory): 3}

// ruleOrders are the orders of the bundle's rules, paged in memory (the bundle is).
var ruleOrders = []listing.Order[views.PolicyRuleRow]{
	{Key: sortRule, Columns: []listing.Column[views.PolicyRuleRow]{
		{SQL: "title", Value: func(r views.PolicyRuleRow) string { return r.Title }},
		{SQL: "id", Value: func(r views.PolicyRuleRow) string { return r.ID }}}},
	{Key: sortOrigin, Columns: []listing.Column[views.PolicyRuleRow]{
		{SQL: "origin", Value: func(r views.PolicyRuleRow) string { return r.Origin }},
		{SQL: "title", Value: func(r views.PolicyRuleRow) string { return r.Title }},
		{SQL: "id", Value: func(r views.PolicyRuleRow) string { return r.ID }}}},
	{Key: sortMode, Columns: []listing.Column[views.PolicyRuleRow]{
		{SQL: "mode", Kind: listing.Int, Value: func(r views.PolicyRuleRow) string { return strconv.Itoa(modeRank[r.Enforcement]) }},
		{SQL: "title", Value: func(r views.PolicyRuleRow) string { return r.Title }},
		{SQL: "id", Value: func(r views.PolicyRuleRow) string { return r.ID }}}},
}

var (
	ruleColumns = []sortColumn{{label: "Rule", key: sortRule}, {label: "Id and description", class: "hide-narrow"}, {label: "Origin", key: sortOrigin},
		{label: "Default mode", key: sortMode, descFirst: true}, {label: "Version", class: "hide-narrow"}}
	versionColumns = []sortColumn{{label: "Name", key: policy.SortName}, {label: "Version"}, {label: "Title", class: "hide-narrow"},
		{label: "Enforcement", class: "hide-narrow"}, {label: "Uploaded", key: policy.SortUploaded, descFirst: true, class: "hide-narrow"}, {label: "Status"}}
	policyModes = []views.ListChoice{{Value: string(policies.Advisory), Label: "advisory"}, {Value: string(policies.SoftMandatory), Label: "soft-mandatory"},
		{Value: string(policies.HardMandatory), Label: "hard-mandatory"}}
	policyOrigins  = []views.ListChoice{{Value: policies.OriginBuiltin, Label: "built in"}, {Value: policies.OriginOrg, Label: "this organization"}}
	policyStatuses = []views.ListChoice{{Value: policy.StatusActive, Label: "active"}, {Value: policy.StatusInactive, Label: "inactive"},
		{Value: policy.StatusSuperseded, Label: "superseded"}}
)

// page renders the policies page with the upload form holding in: the bundle's rules
// and the uploaded versions, both searched and filtered by one form (a filter that
// cannot hold for a table empties it: built-in rules have no uploaded versions, and
// every rule of the bundle is in force), each sorted and paged on its own.
func (h Policies) page(c echo.Context, status int, in views.PolicyUpload, fieldErrors map[string]string) error {
	ctx := c.Request().Context()
	l, err := readList(c, paths.Policies(), []string{sortRule, sortOrigin, sortMode}, listing.Sort{Key: sortRule}, 50)
	if err != nil {
		return err
	}
	rulesPage, err := l.pageOf("rules_")
	if err != nil {
		return err
	}
	versionsPage, err := l.pageOf("versions_")
	if err != nil {
		return err
	}
	versionsPage.Sort = l.sortOf("versions_sort", []string{policy.SortName, policy.SortUploaded}, listing.Sort{Key: policy.SortName})
	// Every member reads the policies; the bundle is read for the subject's organization.
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return err
	}
	b, err := h.Store.Bundle(ctx, subject.OrganizationID)
	if err != nil {
		return err
	}
	envs, listed, err := h.environments(ctx, subject)
	if err != nil {
		return err
	}
	filters := []views.ListFilter{{Name: "mode", Label: "Enforcement", Any: "Any enforcement", Choices: policyModes, Selected: choice(l, "mode", policyModes)},
		{Name: "origin", Label: "Origin", Any: "Any origin", Choices: policyOrigins, Selected: choice(l, "origin", policyOrigins)},
		{Name: "status", Label: "Status", Any: "Any status", Choices: policyStatuses, Selected: choice(l, "status", policyStatuses)}}
	mode, origin, state := filters[0].Selected, filters[1].Selected, filters[2].Selected
	p := views.PoliciesProps{BundleDigest: b.Digest(), EnvironmentsListed: listed, CanManage: subject.Can(authz.PermPoliciesManage),
		Upload: in, Errors: fieldErrors,
		Controls:       l.controls("policies", "Search policies", "A rule's id, title or description, or a policy's name.", filters, nil),
		RuleHeaders:    l.headers(ruleColumns),
		VersionHeaders: l.headersFor("versions_sort", versionsPage.Sort, versionColumns)}
	if s := l.query.Get("versions_sort"); s != "" {
		p.Controls.Keep = append(p.Controls.Keep, views.KV{Key: "versions_sort", Value: versionsPage.Sort.String()})
	}
	p.Controls.Noun, p.Controls.Nouns = "rule", "rules"
	for _, e := range envs {
		p.Environments = append(p.Environments, views.PolicyEnvironment{ID: e.ID, Name: e.Name, Tier: string(e.Tier)})
	}
	if l.refused() {
		return render.Page(c, http.StatusUnprocessableEntity, views.Policies(p))
	}
	var rules []views.PolicyRuleRow
	text := strings.ToLower(l.text)
	for _, r := range b.Rules() {
		row := views.PolicyRuleRow{ID: r.ID, Title: r.Title, Description: r.Description, Origin: r.Origin,
			Enforcement: string(r.Enforcement), Version: r.Version}
		found := text == "" || strings.Contains(strings.ToLower(r.ID+"\n"+r.Title+"\n"+r.Description), text)
		if found && (mode == "" || row.Enforcement == mode) && (origin == "" || row.Origin == origin) && (state == "" || state == policy.StatusActive) {
			rules = append(rules, row)
		}
	}
	shown, err := listing.Slice(rules, ruleOrders, rulesPage)
	if err != nil {
		return err
	}
	p.Rules, p.Controls.Total = shown.Rows, int64(len(rules))
	p.RulesPager = pager(l, "rules_", shown, "Pages of rules")
	if origin != policies.OriginBuiltin {
		versions, total, err := h.Store.Versions(ctx, policy.VersionQuery{Text: l.text, Enforcement: mode, Status: state, Page: versionsPage})
		if err != nil {
			return err
		}
		for _, o := range versions.Rows {
			p.OrgPolicies = append(p.OrgPolicies, views.OrgPolicyRow{Name: o.Name, Version: o.Version, Title: o.Title,
				Enforcement: o.Enforcement, Digest: o.Digest, UploadedBy: o.UploadedByName, UploadedAt: o.CreatedAt, Active: o.Active,
				Latest: o.Latest})
		}
		p.VersionsTotal = total
		p.VersionsPager = pager(l, "versions_", versions, "Pages of uploaded versions")
	}
	p.Controls.Note = "· " + strconv.FormatInt(p.VersionsTotal, 10) + " uploaded versions"
	if p.VersionsTotal == 1 {
		p.Controls.Note = "· 1 uploaded version"
	}
	return render.Page(c, status, views.Policies(p))
}

func (h Policies) modes(c echo.Context) error {
	return h.modesPage(c, http.StatusOK, nil, nil)
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
	err = h.Store.SetModes(c.Request().Context(), c.Param("id"), modes)
	if v, ok := errs.AsValidation(err); ok {
		return h.modesPage(c, http.StatusUnprocessableEntity, modes, v.Fields)
	}
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Policy enforcement saved.")
	return render.Redirect(c, paths.EnvironmentPolicies(c.Param("id")))
}

// modesPage renders an environment's modes, with the submitted ones over the stored.
func (h Policies) modesPage(c echo.Context, status int, submitted map[string]string, fieldErrors map[string]string) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	rules, err := h.Store.EnvironmentModes(ctx, id) // 404 for another organization's environment
	if err != nil {
		return err
	}
	subject, _ := authz.SubjectFrom(ctx)
	p := views.EnvironmentPoliciesProps{EnvironmentID: id, EnvironmentName: id, CanManage: subject.Can(authz.PermPoliciesManage),
		Errors: fieldErrors}
	envs, _, err := h.environments(ctx, subject)
	if err != nil {
		return err
	}
	for _, e := range envs {
		if e.ID == id {
			p.EnvironmentName = e.Name
		}
	}
	for _, r := range rules {
		mode, ok := submitted[r.Rule.ID]
		if !ok {
			mode = string(r.Enforcement)
		}
		p.Rules = append(p.Rules, views.PolicyModeRow{ID: r.Rule.ID, Title: r.Rule.Title, Description: r.Rule.Description,
			Origin: r.Rule.Origin, Default: string(r.Rule.Enforcement), Mode: mode})
	}
	return render.Page(c, status, views.EnvironmentPolicies(p))
}

// environments lists what the subject's role may see of the organization's
// environments; viewers and auditors are listed none (listed is false).
func (h Policies) environments(ctx context.Context, s authz.Subject) (envs []environment.Environment, listed bool, err error) {
	switch {
	case s.Can(authz.PermEnvironmentsManage):
		envs, err = h.Environments.List(ctx)
	case s.Can(authz.PermProvisioningPlan):
		envs, err = h.Environments.Choices(ctx)
	default:
		return nil, false, nil
	}
	return envs, err == nil, err
}

// lf turns CRLF line endings into LF.
func lf(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
