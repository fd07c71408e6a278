// The service calls that manage an organization's webhooks and queue their
// deliveries (deliver.go sends them).

package notify

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"

	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

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
			Event: n.Event, RunID: runOf(n), Payload: body, Status: DeliveryPending}
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

// runOf is the run a notice is about (nil: a window's).
func runOf(n Notice) *string {
	if n.RunID == "" {
		return nil
	}
	return &n.RunID
}
