package notify

import (
	"slices"
	"time"

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
