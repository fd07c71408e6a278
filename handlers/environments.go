// Package handlers turns HTTP requests into service calls: bind and read the input,
// call one service method, render or redirect. Errors go to the central error handler
// in package web; authorization lives in the services.
package handlers

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/org"
	"gantry/views"
	"gantry/views/paths"
)

// EnvironmentService is what the environment pages need.
type EnvironmentService interface {
	List(ctx context.Context) ([]environment.Environment, error)
	Get(ctx context.Context, id string) (environment.Environment, error)
	Grants(ctx context.Context, id string) ([]string, error)
	Create(ctx context.Context, in environment.Input) (environment.Environment, error)
	Update(ctx context.Context, id string, in environment.Input) (environment.Environment, error)
}

// MemberLister lists the organization's members (for the grants checkboxes).
type MemberLister interface {
	Members(ctx context.Context) ([]org.MembershipView, error)
}

// EnvironmentCredentials is what the environment pages and API need of the static cloud
// credential store (environment.Credentials): the write credential applies use and the
// read credential plans and verifications use. They say whether and since when each is
// set, never what it is.
type EnvironmentCredentials interface {
	StaticCredentialStatus(ctx context.Context, envID string) (environment.Standing, error)
	StaticCredentialsOf(ctx context.Context) (map[string]environment.Standing, error)
	Check(ctx context.Context, envID string, chs environment.CredentialChanges) error
	Apply(ctx context.Context, envID string, chs environment.CredentialChanges) error
}

// Environments serves the environment administration pages.
type Environments struct {
	Service EnvironmentService
	Members MemberLister
	// Credentials is optional: without it the pages have no cloud credential section.
	Credentials EnvironmentCredentials
}

// Register adds the environment routes to g.
func (h Environments) Register(g *echo.Group) {
	g.GET(paths.Environments(), h.list)
	g.GET(paths.NewEnvironment(), h.new)
	g.POST(paths.Environments(), h.create)
	g.GET(paths.RouteEnvironment, h.edit)
	g.GET(paths.RouteEditEnvironment, h.edit)
	g.POST(paths.RouteEnvironment, h.update)
}

func (h Environments) list(c echo.Context) error {
	envs, err := h.Service.List(c.Request().Context())
	if err != nil {
		return err
	}
	static := map[string]environment.Standing{}
	if h.Credentials != nil {
		if static, err = h.Credentials.StaticCredentialsOf(c.Request().Context()); err != nil {
			return err
		}
	}
	rows := make([]views.EnvironmentRow, 0, len(envs))
	for _, e := range envs {
		hasStatic := static[e.ID].Any()
		rows = append(rows, views.EnvironmentRow{ID: e.ID, Name: e.Name, Tier: string(e.Tier),
			RequiresApproval: e.RequiresApproval, Restricted: e.Restricted, Executor: e.Executor,
			DecisionWindowHours: e.DecisionWindowHours, PromotionOrder: e.PromotionOrder, DriftSchedule: driftSchedule(e.DriftIntervalMinutes),
			StaticCredential: hasStatic})
	}
	return render.Page(c, http.StatusOK, views.Environments(views.EnvironmentsProps{Rows: rows}))
}

func (h Environments) new(c echo.Context) error {
	// No service call happens before the form is posted, so ask here: a viewer gets a
	// 403 page, not a form whose submission would be refused.
	if _, err := authz.Require(c.Request().Context(), authz.PermEnvironmentsManage); err != nil {
		return err
	}
	return h.form(c, http.StatusOK, views.EnvironmentFormProps{Tier: string(environment.TierDevelopment), Approval: "default",
		DecisionWindowHours: strconv.Itoa(environment.DefaultDecisionWindowHours)}, nil, nil)
}

func (h Environments) create(c echo.Context) error {
	in, approval := environmentInput(c, true)
	env, err := h.Service.Create(c.Request().Context(), in)
	if v, ok := errs.AsValidation(err); ok {
		return h.form(c, http.StatusUnprocessableEntity, views.EnvironmentFormProps{
			Name: in.Name, Tier: in.Tier, Approval: approval, Restricted: in.Restricted, Executor: in.Executor,
			DecisionWindowHours: c.FormValue("decision_window_hours"), PromotionOrder: c.FormValue("promotion_order"),
			DriftInterval: c.FormValue("drift_interval_minutes"), OwnerGroups: c.FormValue("owner_groups"), Errors: v.Fields,
		}, in.Grants, *in.Owners)
	}
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Environment "+env.Name+" created.")
	return render.Redirect(c, paths.Environments())
}

func (h Environments) edit(c echo.Context) error {
	ctx := c.Request().Context()
	env, err := h.Service.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	grants, err := h.Service.Grants(ctx, env.ID)
	if err != nil {
		return err
	}
	return h.form(c, http.StatusOK, views.EnvironmentFormProps{
		ID: env.ID, Name: env.Name, Tier: string(env.Tier), Approval: onOff(env.RequiresApproval), Restricted: env.Restricted,
		Executor: env.Executor, DecisionWindowHours: strconv.Itoa(env.DecisionWindowHours), PromotionOrder: strconv.Itoa(env.PromotionOrder),
		DriftInterval: strconv.Itoa(env.DriftIntervalMinutes), OwnerGroups: strings.Join(env.OwnerGroups, "\n"),
	}, grants, env.Owners)
}

func (h Environments) update(c echo.Context) error {
	ctx := c.Request().Context()
	in, approval := environmentInput(c, false)
	cred := h.credentialInput(c)
	// The credentials are checked before anything is saved, so a refused form saved nothing.
	var err error
	if h.Credentials != nil {
		err = h.Credentials.Check(ctx, c.Param("id"), cred)
	}
	var env environment.Environment
	if err == nil {
		env, err = h.Service.Update(ctx, c.Param("id"), in)
	}
	if v, ok := errs.AsValidation(err); ok {
		return h.form(c, http.StatusUnprocessableEntity, views.EnvironmentFormProps{
			ID: c.Param("id"), Name: in.Name, Tier: in.Tier, Approval: approval, Restricted: in.Restricted, Executor: in.Executor,
			DecisionWindowHours: c.FormValue("decision_window_hours"), PromotionOrder: c.FormValue("promotion_order"),
			DriftInterval: c.FormValue("drift_interval_minutes"), OwnerGroups: c.FormValue("owner_groups"), Errors: v.Fields,
		}, in.Grants, *in.Owners)
	}
	if err != nil {
		return err
	}
	if h.Credentials != nil {
		if err := h.Credentials.Apply(ctx, env.ID, cred); err != nil {
			return err
		}
	}
	_ = render.Flash(c, "success", "Environment "+env.Name+" saved.")
	return render.Redirect(c, paths.Environments())
}

// credentialInput reads the cloud credential fields of the edit form; without a
// credential store they are ignored (the form does not show them).
func (h Environments) credentialInput(c echo.Context) environment.CredentialChanges {
	if h.Credentials == nil {
		return environment.CredentialChanges{}
	}
	field := func(k environment.Kind) environment.CredentialChange {
		return environment.CredentialChange{
			Secret: strings.TrimSpace(c.FormValue(k.Field())),
			Remove: c.FormValue(k.Field()+"_remove") == "on",
		}
	}
	return environment.CredentialChanges{Write: field(environment.Write), Read: field(environment.Read)}
}

// form renders the create/edit form with the organization's members as grant choices
// and, when editing, whether each static cloud credential is set (never a credential).
func (h Environments) form(c echo.Context, status int, p views.EnvironmentFormProps, granted, owners []string) error {
	members, err := h.Members.Members(c.Request().Context())
	if err != nil {
		return err
	}
	if h.Credentials != nil && p.ID != "" {
		st, err := h.Credentials.StaticCredentialStatus(c.Request().Context(), p.ID)
		if err != nil {
			return err
		}
		p.CredentialsManaged = true
		p.CredentialSetAt, p.ReadCredentialSetAt = st.WriteSetAt, st.ReadSetAt
	}
	p.Tiers, p.MaxPromotionOrder = tierChoices(), environment.MaxPromotionOrder
	p.Window = views.WindowBounds{Default: environment.DefaultDecisionWindowHours, Min: environment.MinDecisionWindowHours,
		Max: environment.MaxDecisionWindowHours}
	for _, m := range members {
		p.Members = append(p.Members, views.MemberChoice{UserID: m.UserID, Name: m.UserName, Email: m.UserEmail,
			Role: string(m.Role), Granted: slices.Contains(granted, m.UserID), Owner: slices.Contains(owners, m.UserID)})
	}
	return render.Page(c, status, views.EnvironmentForm(p))
}

// tierChoices are the tiers the environment form offers, with their defaults.
func tierChoices() []views.TierChoice {
	out := make([]views.TierChoice, len(environment.Tiers))
	for i, t := range environment.Tiers {
		drift := "never"
		if m := t.DefaultDriftIntervalMinutes(); m > 0 {
			drift = driftSchedule(m)
		}
		out[i] = views.TierChoice{Name: string(t), RequiresApproval: t.DefaultRequiresApproval(), PromotionOrder: t.DefaultPromotionOrder(),
			Drift: drift}
	}
	return out
}

// environmentInput reads the form. On create, requires_approval is a three-way choice
// (tier default, on, off); on edit a checkbox with a hidden "off" fallback.
func environmentInput(c echo.Context, creating bool) (environment.Input, string) {
	form, _ := c.FormParams()
	in := environment.Input{
		Name:       c.FormValue("name"),
		Tier:       c.FormValue("tier"),
		Restricted: c.FormValue("restricted") == "on",
		Grants:     form["grants"],
		Executor:   c.FormValue("executor"),
	}
	// The form always sends its owners (an empty list when none is ticked).
	owners, groups := append([]string{}, form["owners"]...), []string{}
	for _, g := range strings.Split(c.FormValue("owner_groups"), "\n") {
		if g = strings.TrimSpace(g); g != "" {
			groups = append(groups, g)
		}
	}
	in.Owners, in.OwnerGroups = &owners, &groups
	in.DecisionWindowHours = formWhole(c.FormValue("decision_window_hours"))
	in.PromotionOrder = formWhole(c.FormValue("promotion_order"))
	// Absent or "default" is the tier's schedule on create and unchanged on edit; 0 is off.
	if d := strings.TrimSpace(c.FormValue("drift_interval_minutes")); d != "" && d != "default" {
		minutes, err := strconv.Atoi(d)
		if err != nil {
			minutes = -1 // refused with the field's message
		}
		in.DriftIntervalMinutes = &minutes
	}
	approval := approvalChoice(form["requires_approval"], creating)
	if approval != "default" {
		on := approval == "on"
		in.RequiresApproval = &on
	}
	return in, approval
}

// approvalChoice is the requires-approval field as sent (values of its radio and
// checkbox): "default" (the tier's, on create only), "on" or "off".
func approvalChoice(values []string, creating bool) string {
	switch {
	case creating && (len(values) == 0 || values[0] == "default"):
		return "default"
	case slices.Contains(values, "on"):
		return "on"
	}
	return "off"
}

// formWhole reads a whole-number field (the decision window, the promotion order):
// empty is 0 (the default on create, unchanged on edit). A typed 0, or anything that is
// not a whole number, is -1, which the service refuses with the field's message
// alongside any other field's; only the API's absent field means the default.
func formWhole(s string) int {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n == 0 {
		return -1
	}
	return n
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
