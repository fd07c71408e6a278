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
	"gantry/models/pages"
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

// WebhookPages reads the webhook pages and adds webhooks (pages.Webhooks).
type WebhookPages interface {
	List(ctx context.Context) (pages.WebhooksPage, error)
	Create(ctx context.Context, in notify.HookInput) (pages.WebhooksPage, error)
	Hook(ctx context.Context, id string) (pages.WebhookPage, error)
}

// Notifications serves a member's mail preferences and the organization's webhooks
// (the service lets only admins and owners near the hooks).
type Notifications struct {
	Service NotificationService
	// Pages reads the webhook pages and adds webhooks (pages.Webhooks).
	Pages WebhookPages
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

// newHookForm is the webhook form as the page first draws it.
func newHookForm() views.WebhookForm {
	return views.WebhookForm{Format: "json", Events: map[string]bool{string(notify.DecisionWaiting): true}}
}

func (h Notifications) hooks(c echo.Context) error {
	page, err := h.Pages.List(c.Request().Context())
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.Webhooks(hooksProps(page, newHookForm())))
}

// hooksProps is the webhooks page as drawn with its form holding form.
func hooksProps(page pages.WebhooksPage, form views.WebhookForm) views.WebhooksProps {
	p := views.WebhooksProps{Form: form, Errors: page.Errors, Events: eventChoices(func(notify.Event) bool { return false }),
		PrivateTargetsAllowed: page.PrivateTargetsAllowed}
	if hk := page.Created; hk != nil {
		p.Created = &views.CreatedWebhook{ID: hk.ID, Name: hk.Name, Secret: hk.Secret}
	}
	for _, hk := range page.Hooks {
		p.Hooks = append(p.Hooks, hookRow(hk))
	}
	return p
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
	page, err := h.Pages.Create(c.Request().Context(), in)
	if err != nil {
		return err
	}
	if page.Created == nil {
		return render.Page(c, http.StatusUnprocessableEntity, views.Webhooks(hooksProps(page, typed)))
	}
	// The secret is shown in this answer only: no redirect could carry it safely.
	c.Response().Header().Set("Cache-Control", "no-store")
	return render.Page(c, http.StatusCreated, views.Webhooks(hooksProps(page, views.WebhookForm{Format: "json", Events: map[string]bool{}})))
}

func (h Notifications) hook(c echo.Context) error {
	page, err := h.Pages.Hook(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	hk, ds := page.Hook, page.Deliveries
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
