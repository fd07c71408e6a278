package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/db"
	"gantry/models/keyring"
)

// What notifications need from elsewhere, each a small interface its owner implements.

// Runs reads what a notice says about its run (run.Reads).
type Runs interface {
	NoticeFacts(ctx context.Context, orgID, runID string) (Facts, error)
}

// Contact is a member as mail reaches them.
type Contact struct {
	UserID string
	Name   string
	Email  string
}

// People finds the members of an organization among user ids (org.Service); ids that
// are not members are left out.
type People interface {
	Contacts(ctx context.Context, orgID string, userIDs []string) ([]Contact, error)
}

// Enqueuer puts notification work on the queue inside the transaction carried by ctx
// (runner.NotifyEnqueuer): the fan-out of a notice, one webhook delivery, one mail.
type Enqueuer interface {
	EnqueueFanout(ctx context.Context, n Notice) error
	EnqueueDelivery(ctx context.Context, deliveryID string) error
	EnqueueMail(ctx context.Context, m Mail) error
}

// Mailer sends one mail (SMTPMailer).
type Mailer interface {
	Send(ctx context.Context, m Mail) error
}

// Config is what the notification service is built from.
type Config struct {
	DB       *gorm.DB
	Audit    *audit.Log
	Keys     *keyring.Keyring
	Enqueuer Enqueuer
	People   People
	// Runs read what a notice says about its run, for the fan-out.
	Runs Runs
	// Link is the absolute URL of a run's review page; WindowLink of a break-glass
	// window's page.
	Link       func(runID string) string
	WindowLink func(windowID string) string
	// PreferencesURL is the absolute URL of the page where a member chooses their mail.
	PreferencesURL string
	// Mailer sends e-mail; nil: no e-mail is sent (webhooks still are).
	Mailer Mailer
	// Hooks are the webhook client's settings.
	Hooks  HookOptions
	Logger *slog.Logger
}

// Service sends notices and manages webhooks and preferences.
type Service struct {
	db       *gorm.DB
	audit    *audit.Log
	keys     *keyring.Keyring
	enqueuer Enqueuer
	runs     Runs
	people   People
	link     func(string) string
	windows  func(string) string
	prefsURL string
	mailer   Mailer
	hooks    HookOptions
	client   *hookClient
	logger   *slog.Logger
}

// NewService checks cfg and builds the service.
func NewService(cfg Config) (*Service, error) {
	if cfg.DB == nil || cfg.Audit == nil || cfg.Keys == nil || cfg.Enqueuer == nil || cfg.People == nil || cfg.Runs == nil || cfg.Link == nil || cfg.WindowLink == nil {
		return nil, errors.New("notify: DB, Audit, Keys, Enqueuer, People, Runs, Link and WindowLink are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := cfg.Hooks.withDefaults()
	return &Service{db: cfg.DB, audit: cfg.Audit, keys: cfg.Keys, enqueuer: cfg.Enqueuer, runs: cfg.Runs, people: cfg.People,
		link: cfg.Link, windows: cfg.WindowLink, prefsURL: cfg.PreferencesURL, mailer: cfg.Mailer, hooks: h, client: newHookClient(h), logger: cfg.Logger}, nil
}

// HookOptions returns the webhook settings in force (the queue's retry schedule reads them).
func (s *Service) HookOptions() HookOptions { return s.hooks }

// Outbox takes the notices of the run lifecycle, in its transactions; the Service fans
// them out. It needs nothing but the queue, so it stands before the runs whose facts
// the fan-out reads, and the Service after them.
type Outbox struct{ enqueuer Enqueuer }

// NewOutbox returns the outbox that queues notices through e.
func NewOutbox(e Enqueuer) *Outbox { return &Outbox{enqueuer: e} }

// Notify queues notice n in the transaction carried by ctx: it is sent only if that
// transaction commits. A notice for nobody is dropped here unless hooks may want it
// (the fan-out decides that).
func (s *Outbox) Notify(ctx context.Context, n Notice) error {
	if !n.Event.Valid() {
		return fmt.Errorf("notify: unknown event %q", n.Event)
	}
	if n.ID == "" {
		n.ID = db.NewID("ntf")
	}
	if n.At.IsZero() {
		n.At = time.Now().UTC()
	}
	return s.enqueuer.EnqueueFanout(ctx, n)
}

// Fanout turns notice n into work: a delivery for every enabled hook of the
// organization that subscribed to its event, and a mail for every recipient who is
// still a member, has an address and has not turned the event off. It runs in one
// transaction; running it twice delivers nothing twice (deliveries are unique per hook
// and notice, mail jobs per notice and person).
func (s *Service) Fanout(ctx context.Context, n Notice) error {
	// A window's notice carries what it says; a run's reads its run now.
	var f Facts
	link := ""
	if n.Window != nil {
		link = s.windows(n.Window.ID)
	} else {
		var err error
		if f, err = s.runs.NoticeFacts(ctx, n.OrganizationID, n.RunID); err != nil {
			return fmt.Errorf("reading run %s for notice %s: %w", n.RunID, n.ID, err)
		}
		link = s.link(n.RunID)
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		if err := s.queueDeliveries(ctx, n, f, link); err != nil {
			return err
		}
		if s.mailer == nil || len(n.Recipients) == 0 {
			return nil
		}
		contacts, err := s.people.Contacts(ctx, n.OrganizationID, n.Recipients)
		if err != nil {
			return err
		}
		off, err := s.optedOut(ctx, n.OrganizationID, n.Event, ChannelEmail)
		if err != nil {
			return err
		}
		for _, c := range contacts {
			if c.Email == "" || off[c.UserID] {
				continue
			}
			if err := s.enqueuer.EnqueueMail(ctx, mailFor(n, f, c, link, s.prefsURL)); err != nil {
				return err
			}
		}
		return nil
	})
}

// SendMail sends one mail; without a mailer it is dropped (and said once per mail).
func (s *Service) SendMail(ctx context.Context, m Mail) error {
	if s.mailer == nil {
		s.logger.InfoContext(ctx, "no SMTP server is configured; mail not sent", "notice", m.NoticeID, "event", m.Event)
		return nil
	}
	return s.mailer.Send(ctx, m)
}
