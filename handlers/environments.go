// Package handlers turns HTTP requests into service calls: bind and read the input,
// make one call (a page's read model in models/pages, or a service method), map the
// answer to a view's props, render or redirect. Errors go to the central error handler
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
	"gantry/models/environment"
	"gantry/models/pages"
	"gantry/views"
	"gantry/views/paths"
)

// EnvironmentPages reads the environment administration pages and saves environments
// with their static credentials (pages.Environments).
type EnvironmentPages interface {
	List(ctx context.Context) ([]pages.EnvironmentLine, error)
	Get(ctx context.Context, id string) (pages.EnvironmentLine, error)
	New(ctx context.Context) (pages.EnvironmentForm, error)
	Edit(ctx context.Context, id string) (pages.EnvironmentForm, error)
	Save(ctx context.Context, id string, in environment.Input, creds environment.CredentialChanges, form bool) (pages.EnvironmentLine, *pages.EnvironmentForm, error)
}

// Environments serves the environment administration pages.
type Environments struct {
	Pages EnvironmentPages
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
	envs, err := h.Pages.List(c.Request().Context())
	if err != nil {
		return err
	}
	rows := make([]views.EnvironmentRow, 0, len(envs))
	for _, e := range envs {
		rows = append(rows, views.EnvironmentRow{ID: e.ID, Name: e.Name, Tier: string(e.Tier),
			RequiresApproval: e.RequiresApproval, Restricted: e.Restricted, Executor: e.Executor,
			DecisionWindowHours: e.DecisionWindowHours, PromotionOrder: e.PromotionOrder, DriftSchedule: driftSchedule(e.DriftIntervalMinutes),
			StaticCredential: e.Standing.Any(), Target: targetSummary(e.Integration)})
	}
	return render.Page(c, http.StatusOK, views.Environments(views.EnvironmentsProps{Rows: rows}))
}

func (h Environments) new(c echo.Context) error {
	f, err := h.Pages.New(c.Request().Context())
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.EnvironmentForm(formProps(views.EnvironmentFormProps{Tier: string(environment.TierDevelopment),
		Approval: "default", DecisionWindowHours: strconv.Itoa(environment.DefaultDecisionWindowHours),
		Target: targetForm(environment.Target{Kind: environment.TargetSandbox})}, f, nil)))
}

func (h Environments) edit(c echo.Context) error {
	f, err := h.Pages.Edit(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	env := f.Environment
	return render.Page(c, http.StatusOK, views.EnvironmentForm(formProps(views.EnvironmentFormProps{
		ID: env.ID, Name: env.Name, Tier: string(env.Tier), Approval: onOff(env.RequiresApproval), Restricted: env.Restricted,
		Executor: env.Executor, DecisionWindowHours: strconv.Itoa(env.DecisionWindowHours), PromotionOrder: strconv.Itoa(env.PromotionOrder),
		DriftInterval: strconv.Itoa(env.DriftIntervalMinutes), OwnerGroups: strings.Join(env.OwnerGroups, "\n"),
		Target: targetForm(env.Target.OrSandbox()),
	}, f, env.Owners)))
}

func (h Environments) create(c echo.Context) error { return h.save(c, "") }

func (h Environments) update(c echo.Context) error { return h.save(c, c.Param("id")) }

// save creates (id "") or updates an environment from the form; a refused form comes
// back with what was typed and the messages beside its fields, nothing saved.
func (h Environments) save(c echo.Context, id string) error {
	in, approval := environmentInput(c, id == "")
	env, refused, err := h.Pages.Save(c.Request().Context(), id, in, credentialInput(c), true)
	if err != nil {
		return err
	}
	if refused != nil {
		target := environment.Target{Kind: environment.TargetSandbox}
		if in.Target != nil {
			target = *in.Target
		} else if refused.Environment != nil {
			target = refused.Environment.Target.OrSandbox()
		}
		return render.Page(c, http.StatusUnprocessableEntity, views.EnvironmentForm(formProps(views.EnvironmentFormProps{
			ID: id, Name: in.Name, Tier: in.Tier, Approval: approval, Restricted: in.Restricted, Executor: in.Executor,
			DecisionWindowHours: c.FormValue("decision_window_hours"), PromotionOrder: c.FormValue("promotion_order"),
			DriftInterval: c.FormValue("drift_interval_minutes"), OwnerGroups: c.FormValue("owner_groups"), Target: targetForm(target),
		}, *refused, *in.Owners)))
	}
	verb := " saved."
	if id == "" {
		verb = " created."
	}
	_ = render.Flash(c, "success", "Environment "+env.Name+verb)
	return render.Redirect(c, paths.Environments())
}

// credentialInput reads the cloud credential fields of the edit form (absent on create
// and without a credential store, whose read model ignores them).
func credentialInput(c echo.Context) environment.CredentialChanges {
	field := func(k environment.Kind) environment.CredentialChange {
		return environment.CredentialChange{
			Secret: strings.TrimSpace(c.FormValue(k.Field())),
			Remove: c.FormValue(k.Field()+"_remove") == "on",
		}
	}
	return environment.CredentialChanges{Write: field(environment.Write), Read: field(environment.Read)}
}

// formProps completes p, the create/edit form with what was stored or typed, from form
// f: the organization's members as grant and owner choices (owners ticked), and when
// editing whether each static cloud credential is set (never a credential).
func formProps(p views.EnvironmentFormProps, f pages.EnvironmentForm, owners []string) views.EnvironmentFormProps {
	p.Errors, p.CredentialsManaged = f.Errors, f.CredentialsManaged
	if f.Environment != nil {
		summary := targetSummary(f.Environment.Integration)
		p.Summary = &summary
	}
	if f.CredentialsManaged {
		p.CredentialSetAt, p.ReadCredentialSetAt = f.Standing.WriteSetAt, f.Standing.ReadSetAt
	}
	p.Tiers, p.MaxPromotionOrder = tierChoices(), environment.MaxPromotionOrder
	p.Window = views.WindowBounds{Default: environment.DefaultDecisionWindowHours, Min: environment.MinDecisionWindowHours,
		Max: environment.MaxDecisionWindowHours}
	for _, m := range f.Members {
		p.Members = append(p.Members, views.MemberChoice{UserID: m.UserID, Name: m.UserName, Email: m.UserEmail,
			Role: string(m.Role), Granted: slices.Contains(f.Grants, m.UserID), Owner: slices.Contains(owners, m.UserID)})
	}
	return p
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
		Target:     targetInput(c),
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
