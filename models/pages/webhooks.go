package pages

import (
	"context"

	"gantry/models/errs"
	"gantry/models/notify"
)

// WebhookService keeps the organization's webhooks and their deliveries (notify.Service,
// which lets only admins and owners near them).
type WebhookService interface {
	Hooks(ctx context.Context) ([]notify.Hook, error)
	Hook(ctx context.Context, id string) (notify.Hook, error)
	Deliveries(ctx context.Context, id string) ([]notify.Delivery, error)
	CreateHook(ctx context.Context, in notify.HookInput) (notify.Hook, string, error)
	HookOptions() notify.HookOptions
}

// Webhooks builds the webhook pages and adds webhooks.
type Webhooks struct {
	Service WebhookService
}

// WebhooksPage is the organization's webhooks.
type WebhooksPage struct {
	Hooks []notify.Hook
	// PrivateTargetsAllowed: hooks may target private addresses (a development setting).
	PrivateTargetsAllowed bool
	// Created is a webhook just added, its signing secret shown in this answer only;
	// Errors the problems of a refused one beside its fields.
	Created *CreatedHook
	Errors  map[string]string
}

// CreatedHook is a webhook just added and its signing secret.
type CreatedHook struct {
	notify.Hook
	Secret string
}

// List reads the webhooks page.
func (s Webhooks) List(ctx context.Context) (WebhooksPage, error) {
	hooks, err := s.Service.Hooks(ctx)
	if err != nil {
		return WebhooksPage{}, err
	}
	return WebhooksPage{Hooks: hooks, PrivateTargetsAllowed: s.Service.HookOptions().AllowPrivateTargets}, nil
}

// Create adds the webhook in describes and answers the page with its secret, or with
// the problems of a refused one beside their fields.
func (s Webhooks) Create(ctx context.Context, in notify.HookInput) (WebhooksPage, error) {
	hk, secret, err := s.Service.CreateHook(ctx, in)
	v, refused := errs.AsValidation(err)
	if err != nil && !refused {
		return WebhooksPage{}, err
	}
	p, err := s.List(ctx)
	if err != nil {
		return WebhooksPage{}, err
	}
	if refused {
		p.Errors = v.Fields
	} else {
		p.Created = &CreatedHook{Hook: hk, Secret: secret}
	}
	return p, nil
}

// WebhookPage is one webhook and its latest deliveries.
type WebhookPage struct {
	Hook       notify.Hook
	Deliveries []notify.Delivery
}

// Hook reads webhook id's page. Another organization's webhook is not found.
func (s Webhooks) Hook(ctx context.Context, id string) (WebhookPage, error) {
	hk, err := s.Service.Hook(ctx, id)
	if err != nil {
		return WebhookPage{}, err
	}
	ds, err := s.Service.Deliveries(ctx, hk.ID)
	if err != nil {
		return WebhookPage{}, err
	}
	return WebhookPage{Hook: hk, Deliveries: ds}, nil
}
