package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/errs"
	"gantry/models/notify"
	"gantry/views"
	"gantry/views/paths"
)

// NotificationService is what the notification pages need (notify.Service).
type NotificationService interface {
	MyPreferences(ctx context.Context) (notify.Preferences, error)
	SetMyPreferences(ctx context.Context, on map[notify.Event][]notify.Channel) error
	Hooks(ctx context.Context) ([]notify.Hook, error)
	Hook(ctx context.Context, id string) (notify.Hook, error)
	Deliveries(ctx context.Context, id string) ([]notify.Delivery, error)
	CreateHook(ctx context.Context, in notify.HookInput) (notify.Hook, string, error)
	SetHookEnabled(ctx context.Context, id string, enabled bool) error
	DeleteHook(ctx context.Context, id string) error
	Redeliver(ctx context.Context, deliveryID string) (notify.Delivery, error)
	HookOptions() notify.HookOptions
}

// Notifications serves a member's mail preferences and the organization's webhooks
// (the service lets only admins and owners near the hooks).
type Notifications struct {
	Service NotificationService
	// MailConfigured: an SMTP server is configured, so preferences take effect.
	MailConfigured bool
}

// Register adds the notification routes to g.
func (h Notifications) Register(g *echo.Group) {
	g.GET(paths.NotificationSettings(), h.preferences)
	g.POST(paths.NotificationSettings(), h.savePreferences)
	g.GET(paths.Webhooks(), h.hooks)
	g.POST(paths.Webhooks(), h.createHook)
	g.GET(paths.RouteWebhook, h.hook)
	g.POST(paths.RouteWebhookAction, h.hookAction)
	g.POST(paths.RouteWebhookRedeliver, h.redeliver)
}

func eventChoices(on func(notify.Event) bool) []views.NotificationEvent {
	out := make([]views.NotificationEvent, len(notify.Events))
	for i, e := range notify.Events {
		out[i] = views.NotificationEvent{Name: string(e), Title: e.Title(), Email: on(e)}
	}
	return out
}

func (h Notifications) preferences(c echo.Context) error {
	prefs, err := h.Service.MyPreferences(c.Request().Context())
	if err != nil {
		return err
	}
	return h.preferencesPage(c, http.StatusOK, func(e notify.Event) bool { return prefs.On(e, notify.ChannelEmail) }, nil)
}

func (h Notifications) preferencesPage(c echo.Context, status int, on func(notify.Event) bool, fieldErrors map[string]string) error {
	return render.Page(c, status, views.NotificationSettings(views.NotificationSettingsProps{
		Email: views.ChromeFrom(c.Request().Context()).UserEmail, MailConfigured: h.MailConfigured,
		Events: eventChoices(on), Errors: fieldErrors}))
}

func (h Notifications) savePreferences(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return errs.Explain(errs.ErrBadRequest, "The form could not be read.")
	}
	on := map[notify.Event][]notify.Channel{}
	for _, e := range form["email"] {
		on[notify.Event(e)] = append(on[notify.Event(e)], notify.ChannelEmail)
	}
	err = h.Service.SetMyPreferences(c.Request().Context(), on)
	if v, ok := errs.AsValidation(err); ok {
		return h.preferencesPage(c, http.StatusUnprocessableEntity, func(e notify.Event) bool { return len(on[e]) > 0 }, v.Fields)
	}
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Notification preferences saved.")
	return render.Redirect(c, paths.NotificationSettings())
}

func (h Notifications) hooks(c echo.Context) error {
	return h.hooksPage(c, http.StatusOK, views.WebhookForm{Format: "json", Events: map[string]bool{string(notify.DecisionWaiting): true}}, nil, nil)
}

func (h Notifications) hooksPage(c echo.Context, status int, form views.WebhookForm, fieldErrors map[string]string, created *views.CreatedWebhook) error {
	hooks, err := h.Service.Hooks(c.Request().Context())
	if err != nil {
		return err
	}
	p := views.WebhooksProps{Form: form, Errors: fieldErrors, Created: created, Events: eventChoices(func(notify.Event) bool { return false }),
		PrivateTargetsAllowed: h.Service.HookOptions().AllowPrivateTargets}
	for _, hk := range hooks {
		p.Hooks = append(p.Hooks, hookRow(hk))
	}
	return render.Page(c, status, views.Webhooks(p))
}

func hookRow(h notify.Hook) views.WebhookRow {
	row := views.WebhookRow{ID: h.ID, Name: h.Name, URL: h.URL, Format: "Gantry JSON", Enabled: h.Enabled, DisabledReason: h.DisabledReason,
		Failures: h.ConsecutiveFailures, CreatedAt: h.CreatedAt}
	if h.Format == notify.FormatSlack {
		row.Format = "Slack-compatible"
	}
	for _, e := range h.Events {
		row.Events = append(row.Events, string(e))
	}
	return row
}

func (h Notifications) createHook(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return errs.Explain(errs.ErrBadRequest, "The form could not be read.")
	}
	in := notify.HookInput{Name: form.Get("name"), URL: form.Get("url"), Format: form.Get("format"), Events: form["events"]}
	typed := views.WebhookForm{Name: in.Name, URL: in.URL, Format: in.Format, Events: map[string]bool{}}
	for _, e := range in.Events {
		typed.Events[e] = true
	}
	hk, secret, err := h.Service.CreateHook(c.Request().Context(), in)
	if v, ok := errs.AsValidation(err); ok {
		return h.hooksPage(c, http.StatusUnprocessableEntity, typed, v.Fields, nil)
	}
	if err != nil {
		return err
	}
	// The secret is shown in this answer only: no redirect could carry it safely.
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.hooksPage(c, http.StatusCreated, views.WebhookForm{Format: "json", Events: map[string]bool{}}, nil,
		&views.CreatedWebhook{ID: hk.ID, Name: hk.Name, Secret: secret})
}

func (h Notifications) hook(c echo.Context) error {
	ctx := c.Request().Context()
	hk, err := h.Service.Hook(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	ds, err := h.Service.Deliveries(ctx, hk.ID)
	if err != nil {
		return err
	}
	p := views.WebhookProps{Hook: hookRow(hk), MaxShown: notify.MaxDeliveriesShown}
	for _, d := range ds {
		row := views.DeliveryRow{ID: d.ID, Event: string(d.Event), Status: string(d.Status), Attempts: d.Attempts, LastError: d.LastError,
			CreatedAt: d.CreatedAt, Redelivery: d.RedeliveryOf != nil, CanRedeliver: hk.Enabled && (d.Status == notify.DeliveryDelivered || d.Status == notify.DeliveryFailed)}
		if d.RunID != nil {
			row.RunID, row.RunLabel = *d.RunID, "run"
			var body notify.Payload
			if json.Unmarshal(d.Payload, &body) == nil && body.Run.Label != "" {
				row.RunLabel = body.Run.Label // a Slack body names no label: "run"
			}
		}
		if d.LastStatusCode != nil {
			row.LastStatus = strconv.Itoa(*d.LastStatusCode)
		}
		for _, t := range d.Tries {
			try := views.DeliveryTry{N: t.Attempt, At: t.At, Status: "no answer", Error: t.Error,
				Duration: (time.Duration(t.DurationMS) * time.Millisecond).String()}
			if t.StatusCode != nil {
				try.Status = "HTTP " + strconv.Itoa(*t.StatusCode)
			}
			row.Tries = append(row.Tries, try)
		}
		p.Deliveries = append(p.Deliveries, row)
	}
	return render.Page(c, http.StatusOK, views.Webhook(p))
}

func (h Notifications) hookAction(c echo.Context) error {
	ctx, id := c.Request().Context(), c.Param("id")
	switch c.Param("action") {
	case "enable", "disable":
		on := c.Param("action") == "enable"
		if err := h.Service.SetHookEnabled(ctx, id, on); err != nil {
			return err
		}
		_ = render.Flash(c, "success", map[bool]string{true: "Webhook turned on.", false: "Webhook turned off: nothing is sent to it."}[on])
		return render.Redirect(c, paths.Webhook(id))
	case "delete":
		if c.FormValue("confirm") != "yes" {
			// Look the hook up first: another organization's id stays a 404.
			if _, err := h.Service.Hook(ctx, id); err != nil {
				return err
			}
			_ = render.Flash(c, "error", "Tick the box to confirm, then delete.")
			return render.Redirect(c, paths.Webhook(id))
		}
		if err := h.Service.DeleteHook(ctx, id); err != nil {
			return err
		}
		_ = render.Flash(c, "success", "Webhook deleted.")
		return render.Redirect(c, paths.Webhooks())
	}
	return echo.ErrNotFound
}

func (h Notifications) redeliver(c echo.Context) error {
	d, err := h.Service.Redeliver(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Sent again as delivery "+d.ID+".")
	return render.Redirect(c, paths.Webhook(d.WebhookID))
}
