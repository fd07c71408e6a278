package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"gantry/models/db"
	"gantry/models/notify"
)

// QueueNotify is the River queue notifications go through, apart from the runs' so a
// slow webhook never delays a plan or an apply.
const QueueNotify = "notify"

// NotifyFanoutArgs turns one notice into deliveries and mails.
type NotifyFanoutArgs struct {
	Notice notify.Notice `json:"notice"`
}

func (NotifyFanoutArgs) Kind() string { return "notify.fanout" }

// WebhookDeliveryArgs makes the attempts at one webhook delivery.
type WebhookDeliveryArgs struct {
	DeliveryID string `json:"delivery_id" river:"unique"`
}

func (WebhookDeliveryArgs) Kind() string { return "notify.webhook" }

// MailArgs sends one notification mail (unique per notice and person).
type MailArgs struct {
	Mail notify.Mail `json:"mail"`
}

func (MailArgs) Kind() string { return "notify.mail" }

// Notifications is what the notification workers drive (notify.Service).
type Notifications interface {
	Fanout(ctx context.Context, n notify.Notice) error
	Deliver(ctx context.Context, deliveryID string, attempt int) error
	SendMail(ctx context.Context, m notify.Mail) error
	HookOptions() notify.HookOptions
}

// NotifyFanoutWorker fans a notice out.
type NotifyFanoutWorker struct {
	river.WorkerDefaults[NotifyFanoutArgs]
	Notify Notifications
}

func (w *NotifyFanoutWorker) Work(ctx context.Context, job *river.Job[NotifyFanoutArgs]) error {
	return w.Notify.Fanout(ctx, job.Args.Notice)
}

// WebhookDeliveryWorker makes one attempt per job run; a failed attempt is retried
// after the hook options' backoff.
type WebhookDeliveryWorker struct {
	river.WorkerDefaults[WebhookDeliveryArgs]
	Notify Notifications
}

func (w *WebhookDeliveryWorker) Work(ctx context.Context, job *river.Job[WebhookDeliveryArgs]) error {
	return w.Notify.Deliver(ctx, job.Args.DeliveryID, job.Attempt)
}

// NextRetry waits RetryBase, then twice as long after each failed attempt.
func (w *WebhookDeliveryWorker) NextRetry(job *river.Job[WebhookDeliveryArgs]) time.Time {
	return time.Now().Add(w.Notify.HookOptions().RetryAfter(job.Attempt))
}

// Timeout leaves room for the attempt's own timeout and the log write.
func (w *WebhookDeliveryWorker) Timeout(*river.Job[WebhookDeliveryArgs]) time.Duration {
	return w.Notify.HookOptions().Timeout + 30*time.Second
}

// MailWorker sends one mail; River retries a refused one with its default backoff.
type MailWorker struct {
	river.WorkerDefaults[MailArgs]
	Notify Notifications
}

func (w *MailWorker) Work(ctx context.Context, job *river.Job[MailArgs]) error {
	return w.Notify.SendMail(ctx, job.Args.Mail)
}

// deliveryJobAttempts bounds a delivery job; the service gives up earlier, at its own
// MaxAttempts (it then answers nil), so this only stops a job that fails for other
// reasons (the database away) from trying forever.
const deliveryJobAttempts = 50

// NotifyEnqueuer inserts notification jobs in the caller's transaction (notify.Enqueuer).
type NotifyEnqueuer struct {
	Client *river.Client[*sql.Tx]
}

func (e NotifyEnqueuer) insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error {
	tx, ok := db.SQLTx(ctx)
	if !ok {
		return errors.New("enqueuing notification work outside a transaction")
	}
	opts.Queue = QueueNotify
	if _, err := e.Client.InsertTx(ctx, tx, args, opts); err != nil {
		return fmt.Errorf("inserting %s job: %w", args.Kind(), err)
	}
	return nil
}

func (e NotifyEnqueuer) EnqueueFanout(ctx context.Context, n notify.Notice) error {
	return e.insert(ctx, NotifyFanoutArgs{Notice: n}, &river.InsertOpts{MaxAttempts: 10})
}

func (e NotifyEnqueuer) EnqueueDelivery(ctx context.Context, deliveryID string) error {
	return e.insert(ctx, WebhookDeliveryArgs{DeliveryID: deliveryID},
		&river.InsertOpts{MaxAttempts: deliveryJobAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}})
}

func (e NotifyEnqueuer) EnqueueMail(ctx context.Context, m notify.Mail) error {
	return e.insert(ctx, MailArgs{Mail: m}, &river.InsertOpts{MaxAttempts: 8, UniqueOpts: river.UniqueOpts{ByArgs: true}})
}
