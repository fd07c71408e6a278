package notify

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
	"gantry/models/keyring"
)

// Format is the body a hook receives.
type Format string

const (
	// FormatJSON is Gantry's own JSON document (Payload).
	FormatJSON Format = "json"
	// FormatSlack is a Slack-compatible incoming-webhook body ({"text": ...}), which
	// Slack, Mattermost and Rocket.Chat accept.
	FormatSlack Format = "slack"
)

// Hook is an organization's outgoing webhook (its secret stays sealed in the row).
type Hook struct {
	ID                  string
	OrganizationID      string
	Name                string
	URL                 string
	Format              Format
	Events              []Event `gorm:"serializer:json;type:jsonb"`
	Enabled             bool
	DisabledReason      string
	ConsecutiveFailures int
	CreatedBy           string
	CreatedAt           time.Time

	SecretKeyID      string
	SecretWrappedKey []byte
	SecretNonce      []byte
	SecretCiphertext []byte
}

func (Hook) TableName() string { return "webhooks" }

// Wants reports whether the hook subscribed to event e.
func (h Hook) Wants(e Event) bool { return slices.Contains(h.Events, e) }

func (h Hook) sealed() keyring.Sealed {
	return keyring.Sealed{KeyID: h.SecretKeyID, WrappedKey: h.SecretWrappedKey, Nonce: h.SecretNonce, Ciphertext: h.SecretCiphertext}
}

// hookAAD binds a sealed secret to its hook: copied to another row, it does not open.
func hookAAD(orgID, id string) []byte { return []byte("webhook-secret:" + orgID + ":" + id) }

// DeliveryStatus is where a delivery stands.
type DeliveryStatus string

const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliveryRetrying  DeliveryStatus = "retrying"
	DeliveryDelivered DeliveryStatus = "delivered"
	DeliveryFailed    DeliveryStatus = "failed"
)

// Delivery is one notice sent to one hook, with its attempts.
type Delivery struct {
	ID             string
	WebhookID      string
	OrganizationID string
	NotificationID string
	Event          Event
	RunID          *string
	Payload        []byte
	Status         DeliveryStatus
	Attempts       int
	LastStatusCode *int
	LastError      string
	RedeliveryOf   *string
	CreatedAt      time.Time
	FinishedAt     *time.Time

	Tries []Attempt `gorm:"-"`
}

func (Delivery) TableName() string { return "webhook_deliveries" }

// Attempt is one try at a delivery.
type Attempt struct {
	DeliveryID string
	Attempt    int
	At         time.Time
	StatusCode *int
	Error      string
	DurationMS int
}

func (Attempt) TableName() string { return "webhook_attempts" }

// HookInput is what a person types to add a hook.
type HookInput struct {
	Name   string
	URL    string
	Format string
	Events []string
}

// MaxHookName bounds a hook's name.
const MaxHookName = 80

// validate checks the input field by field (fields name, url, format, events); the URL
// must be one the delivery client will call (see HookOptions.AllowPrivateTargets).
func (in HookInput) validate(opts HookOptions) (Format, []Event, error) {
	v := &errs.Validation{}
	name := strings.TrimSpace(in.Name)
	switch {
	case name == "":
		v.Add("name", "Enter a name, for example \"platform-alerts\".")
	case !utf8.ValidString(name) || strings.ContainsAny(name, "\x00\r\n"):
		v.Add("name", "Use letters, digits, spaces and punctuation on one line.")
	case utf8.RuneCountInString(name) > MaxHookName:
		v.Add("name", fmt.Sprintf("Use at most %d characters.", MaxHookName))
	}
	if msg := checkTarget(in.URL, opts); msg != "" {
		v.Add("url", msg)
	}
	f := Format(in.Format)
	if f != FormatJSON && f != FormatSlack {
		v.Add("format", "Choose Gantry JSON or a Slack-compatible body.")
	}
	var events []Event
	for _, e := range in.Events {
		ev := Event(e)
		if !ev.Valid() {
			v.Add("events", fmt.Sprintf("%q is not an event Gantry sends.", e))
			continue
		}
		if !slices.Contains(events, ev) {
			events = append(events, ev)
		}
	}
	if len(in.Events) == 0 {
		v.Add("events", "Choose at least one event.")
	}
	slices.SortFunc(events, func(a, b Event) int { return slices.Index(Events, a) - slices.Index(Events, b) })
	return f, events, v.Err()
}

// checkTarget says what is wrong with a hook URL ("" when nothing is).
func checkTarget(raw string, opts HookOptions) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "Enter the URL Gantry should POST to."
	}
	if len(raw) > 2000 || strings.ContainsAny(raw, "\x00\r\n\t ") {
		return "Enter one URL of at most 2000 characters, without spaces."
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "Enter an http:// or https:// URL, for example https://hooks.example.com/gantry."
	}
	if u.User != nil {
		return "Leave credentials out of the URL: Gantry signs every delivery with the hook's secret."
	}
	if u.Fragment != "" {
		return "Leave out the #fragment: it is never sent."
	}
	if msg := opts.refusedHost(u.Hostname()); msg != "" {
		return msg
	}
	return ""
}

// newSecret is a hook's signing secret: 32 random bytes, shown once.
func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b)
}

// CreateHook adds a hook to the subject's organization and returns it with its signing
// secret, which is shown this once and then only kept sealed.
func (s *Service) CreateHook(ctx context.Context, in HookInput) (Hook, string, error) {
	subject, err := authz.Require(ctx, authz.PermWebhooksManage)
	if err != nil {
		return Hook{}, "", err
	}
	format, events, err := in.validate(s.hooks)
	if err != nil {
		return Hook{}, "", err
	}
	h := Hook{ID: db.NewID("hook"), OrganizationID: subject.OrganizationID, Name: strings.TrimSpace(in.Name),
		URL: strings.TrimSpace(in.URL), Format: format, Events: events, Enabled: true, CreatedBy: subject.UserID}
	secret := newSecret()
	sealed, err := s.keys.Seal([]byte(secret), hookAAD(h.OrganizationID, h.ID))
	if err != nil {
		return Hook{}, "", fmt.Errorf("sealing webhook secret: %w", err)
	}
	h.SecretKeyID, h.SecretWrappedKey, h.SecretNonce, h.SecretCiphertext = sealed.KeyID, sealed.WrappedKey, sealed.Nonce, sealed.Ciphertext
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		if err := db.Conn(ctx, s.db).Omit("created_at").Create(&h).Error; err != nil {
			if db.IsUniqueViolation(err, "webhooks_organization_id_name_key") {
				v := &errs.Validation{}
				v.Add("name", "Another webhook already has this name.")
				return v
			}
			return fmt.Errorf("creating webhook: %w", db.Translate(err))
		}
		return s.audit.Record(ctx, audit.Entry{Action: "webhook.created", TargetType: "webhook", TargetID: h.ID,
			Data: map[string]any{"name": h.Name, "url": redactURL(h.URL), "format": string(h.Format), "events": h.Events}})
	})
	if err != nil {
		return Hook{}, "", err
	}
	return h, secret, nil
}

// redactURL keeps a URL's scheme, host and path for the audit log: a query string may
// carry a receiver's token.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.String()
}

// Hooks lists the subject's organization's hooks by name.
func (s *Service) Hooks(ctx context.Context) ([]Hook, error) {
	subject, err := authz.Require(ctx, authz.PermWebhooksManage)
	if err != nil {
		return nil, err
	}
	var out []Hook
	if err := db.Conn(ctx, s.db).Where("organization_id = ?", subject.OrganizationID).Order("name, id").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing webhooks: %w", err)
	}
	return out, nil
}

// Hook returns one hook of the subject's organization (another organization's is not found).
func (s *Service) Hook(ctx context.Context, id string) (Hook, error) {
	subject, err := authz.Require(ctx, authz.PermWebhooksManage)
	if err != nil {
		return Hook{}, err
	}
	return s.hook(ctx, subject.OrganizationID, id, false)
}

func (s *Service) hook(ctx context.Context, orgID, id string, forUpdate bool) (Hook, error) {
	q := db.Conn(ctx, s.db).Where("id = ?", id)
	if orgID != "" {
		q = q.Where("organization_id = ?", orgID)
	}
	if forUpdate {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var h Hook
	if err := q.Take(&h).Error; err != nil {
		return Hook{}, fmt.Errorf("reading webhook %s: %w", id, db.Translate(err))
	}
	return h, nil
}

// MaxDeliveriesShown bounds a hook's delivery log page.
const MaxDeliveriesShown = 50

// Deliveries is hook id's delivery log, newest first, each with its attempts.
func (s *Service) Deliveries(ctx context.Context, id string) ([]Delivery, error) {
	h, err := s.Hook(ctx, id)
	if err != nil {
		return nil, err
	}
	var out []Delivery
	conn := db.Conn(ctx, s.db)
	if err := conn.Where("webhook_id = ?", h.ID).Order("created_at DESC, id DESC").Limit(MaxDeliveriesShown).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("reading deliveries: %w", err)
	}
	ids := make([]string, len(out))
	for i, d := range out {
		ids[i] = d.ID
	}
	var tries []Attempt
	if err := conn.Where("delivery_id IN ?", ids).Order("delivery_id, attempt").Find(&tries).Error; err != nil {
		return nil, fmt.Errorf("reading attempts: %w", err)
	}
	at := map[string]int{}
	for i, d := range out {
		at[d.ID] = i
	}
	for _, t := range tries {
		out[at[t.DeliveryID]].Tries = append(out[at[t.DeliveryID]].Tries, t)
	}
	return out, nil
}

// SetHookEnabled turns hook id on or off. Turning it on forgets its failures.
func (s *Service) SetHookEnabled(ctx context.Context, id string, enabled bool) error {
	subject, err := authz.Require(ctx, authz.PermWebhooksManage)
	if err != nil {
		return err
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		h, err := s.hook(ctx, subject.OrganizationID, id, true)
		if err != nil {
			return err
		}
		if h.Enabled == enabled {
			return nil
		}
		if err := db.Conn(ctx, s.db).Model(&Hook{}).Where("id = ?", h.ID).
			Updates(map[string]any{"enabled": enabled, "disabled_reason": "", "consecutive_failures": 0}).Error; err != nil {
			return fmt.Errorf("updating webhook: %w", err)
		}
		action := "webhook.enabled"
		if !enabled {
			action = "webhook.disabled"
		}
		return s.audit.Record(ctx, audit.Entry{Action: action, TargetType: "webhook", TargetID: h.ID, Data: map[string]any{"name": h.Name}})
	})
}

// DeleteHook removes hook id and its delivery log.
func (s *Service) DeleteHook(ctx context.Context, id string) error {
	subject, err := authz.Require(ctx, authz.PermWebhooksManage)
	if err != nil {
		return err
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		h, err := s.hook(ctx, subject.OrganizationID, id, true)
		if err != nil {
			return err
		}
		if err := db.Conn(ctx, s.db).Delete(&Hook{}, "id = ?", h.ID).Error; err != nil {
			return fmt.Errorf("deleting webhook: %w", err)
		}
		return s.audit.Record(ctx, audit.Entry{Action: "webhook.deleted", TargetType: "webhook", TargetID: h.ID, Data: map[string]any{"name": h.Name}})
	})
}

// Redeliver sends delivery deliveryID's body again, as a new delivery of the same hook
// (signed anew when it is sent). The hook must be enabled.
func (s *Service) Redeliver(ctx context.Context, deliveryID string) (Delivery, error) {
	subject, err := authz.Require(ctx, authz.PermWebhooksManage)
	if err != nil {
		return Delivery{}, err
	}
	var out Delivery
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		var d Delivery
		if err := db.Conn(ctx, s.db).Where("id = ? AND organization_id = ?", deliveryID, subject.OrganizationID).
			Take(&d).Error; err != nil {
			return fmt.Errorf("reading delivery %s: %w", deliveryID, db.Translate(err))
		}
		h, err := s.hook(ctx, subject.OrganizationID, d.WebhookID, true)
		if err != nil {
			return err
		}
		if !h.Enabled {
			return errs.Explain(errs.ErrConflict, "This webhook is turned off. Turn it on to redeliver.")
		}
		out = Delivery{ID: db.NewID("whd"), WebhookID: h.ID, OrganizationID: h.OrganizationID, NotificationID: d.NotificationID,
			Event: d.Event, RunID: d.RunID, Payload: d.Payload, Status: DeliveryPending, RedeliveryOf: &d.ID}
		if err := db.Conn(ctx, s.db).Omit("created_at").Create(&out).Error; err != nil {
			return fmt.Errorf("creating delivery: %w", err)
		}
		if err := s.audit.Record(ctx, audit.Entry{Action: "webhook.redelivered", TargetType: "webhook", TargetID: h.ID,
			Data: map[string]any{"delivery_id": out.ID, "redelivery_of": d.ID, "event": string(d.Event)}}); err != nil {
			return err
		}
		return s.enqueuer.EnqueueDelivery(ctx, out.ID)
	})
	return out, err
}

// queueDeliveries creates a delivery of notice n for every enabled hook of its
// organization that wants it, and queues each (in the transaction in ctx).
func (s *Service) queueDeliveries(ctx context.Context, n Notice, f Facts, link string) error {
	var hooks []Hook
	if err := db.Conn(ctx, s.db).Where("organization_id = ? AND enabled", n.OrganizationID).Find(&hooks).Error; err != nil {
		return fmt.Errorf("listing webhooks: %w", err)
	}
	for _, h := range hooks {
		if !h.Wants(n.Event) {
			continue
		}
		body, err := Body(h.Format, n, f, link)
		if err != nil {
			return err
		}
		d := Delivery{ID: db.NewID("whd"), WebhookID: h.ID, OrganizationID: h.OrganizationID, NotificationID: n.ID,
			Event: n.Event, RunID: &n.RunID, Payload: body, Status: DeliveryPending}
		res := db.Conn(ctx, s.db).Clauses(clause.OnConflict{
			Columns:     []clause.Column{{Name: "webhook_id"}, {Name: "notification_id"}},
			TargetWhere: clause.Where{Exprs: []clause.Expression{clause.Expr{SQL: "redelivery_of IS NULL"}}},
			DoNothing:   true,
		}).Omit("created_at").Create(&d)
		if res.Error != nil {
			return fmt.Errorf("creating delivery: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			continue // this notice already reached this hook
		}
		if err := s.enqueuer.EnqueueDelivery(ctx, d.ID); err != nil {
			return err
		}
	}
	return nil
}

// Payload is the JSON document a "json" hook receives.
type Payload struct {
	ID         string     `json:"id"` // the notice: the same in every hook's delivery and a redelivery
	Event      Event      `json:"event"`
	OccurredAt time.Time  `json:"occurred_at"`
	Summary    string     `json:"summary"`
	Reason     string     `json:"reason,omitempty"`
	Actor      string     `json:"actor,omitempty"`
	Run        PayloadRun `json:"run"`
}

// PayloadRun is the run a payload is about.
type PayloadRun struct {
	ID               string         `json:"id"`
	OrganizationID   string         `json:"organization_id"`
	Label            string         `json:"label"`
	Workspace        string         `json:"workspace"`
	Environment      string         `json:"environment"`
	Tier             string         `json:"tier"`
	Template         string         `json:"template"`
	Kind             string         `json:"kind"`
	State            string         `json:"state"`
	Requester        string         `json:"requester"`
	RiskLevel        string         `json:"risk_level,omitempty"`
	Changes          map[string]int `json:"changes"`
	CostDelta        string         `json:"cost_delta,omitempty"`
	DecisionDeadline *time.Time     `json:"decision_deadline,omitempty"`
	Simulated        bool           `json:"simulated"`
	ReviewURL        string         `json:"review_url"`
}

// Body is what a hook of format f receives for notice n about run f.
func Body(format Format, n Notice, f Facts, link string) ([]byte, error) {
	if format == FormatSlack {
		return json.Marshal(map[string]string{"text": slackText(n, f, link)})
	}
	p := Payload{ID: n.ID, Event: n.Event, OccurredAt: n.At.UTC(), Summary: Headline(n, f), Reason: n.Reason, Actor: n.ActorName,
		Run: PayloadRun{ID: n.RunID, OrganizationID: n.OrganizationID, Label: f.Label, Workspace: f.Workspace, Environment: f.Environment,
			Tier: f.Tier, Template: f.Template, Kind: f.Kind, State: n.State, Requester: f.Requester, RiskLevel: f.RiskLevel,
			Changes:   map[string]int{"create": f.Create, "update": f.Update, "replace": f.Replace, "delete": f.Delete},
			CostDelta: f.CostDelta, Simulated: f.Simulated, ReviewURL: link}}
	if n.Event == DecisionWaiting || n.Event == DecisionEscalated {
		p.Run.DecisionDeadline = f.Deadline
	}
	return json.Marshal(p)
}

// slackText is the notice in Slack's mrkdwn: a linked headline, then the facts.
func slackText(n Notice, f Facts, link string) string {
	esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
	var b strings.Builder
	fmt.Fprintf(&b, "<%s|%s>", link, esc(Headline(n, f)))
	if n.Reason != "" {
		fmt.Fprintf(&b, "\n%s", esc(n.Reason))
	}
	fmt.Fprintf(&b, "\n%s · %s · requested by %s", esc(f.Template), esc(f.Changes()), esc(f.Requester))
	if f.CostDelta != "" {
		fmt.Fprintf(&b, " · %s", esc(f.CostDelta))
	}
	return b.String()
}
