package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"gantry/models/run"
)

// RunChange is one notification that a run moved.
type RunChange struct {
	RunID       string `json:"run"`
	WorkspaceID string `json:"workspace"`
	OrgID       string `json:"org"`
	State       string `json:"state"`
}

// Changes fans run changes and new live log chunks out to live pages. One connection
// LISTENs on both channels for the whole process (each notification is sent inside the
// transaction that changed the run or stored the chunk, so it arrives only if that
// committed, on every replica); subscribers get a signal, never the data, and re-read
// what they show through the services, with the viewer's permissions.
type Changes struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	mu   sync.Mutex
	subs map[chan struct{}]subscription
}

// subscription is one live page's interest: one run of one organization, every run of
// one of its workspaces (workspaceID: a run waiting in that workspace's apply queue),
// or every run of it (both "": the inbox count); log: the run's live log instead of its
// changes.
type subscription struct {
	orgID, runID, workspaceID string
	log                       bool
}

// NewChanges returns a broker on pool; Run must be started for it to deliver.
func NewChanges(pool *pgxpool.Pool, logger *slog.Logger) *Changes {
	return &Changes{pool: pool, logger: logger, subs: map[chan struct{}]subscription{}}
}

// Subscribe returns a channel that receives a signal whenever run runID of
// organization orgID changes (any of its runs when runID is ""), and a function that
// ends the subscription. Signals
// coalesce (the channel holds at most one): the subscriber re-reads the run anyway, so
// none is lost and nobody blocks the listener.
func (c *Changes) Subscribe(orgID, runID string) (<-chan struct{}, func()) {
	return c.subscribe(subscription{orgID: orgID, runID: runID})
}

// SubscribeWorkspace is Subscribe for every run of workspace workspaceID: a run
// waiting to apply shows what its workspace's other runs do (the apply queue).
func (c *Changes) SubscribeWorkspace(orgID, workspaceID string) (<-chan struct{}, func()) {
	return c.subscribe(subscription{orgID: orgID, workspaceID: workspaceID})
}

// SubscribeLog is Subscribe for new chunks of the live log of run runID: the subscriber
// reads the chunks after the last one it sent.
func (c *Changes) SubscribeLog(orgID, runID string) (<-chan struct{}, func()) {
	return c.subscribe(subscription{orgID: orgID, runID: runID, log: true})
}

func (c *Changes) subscribe(sub subscription) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	c.subs[ch] = sub
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		delete(c.subs, ch)
		c.mu.Unlock()
	}
}

func (c *Changes) publish(change RunChange, log bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ch, sub := range c.subs {
		if sub.log != log || sub.orgID != change.OrgID || (sub.runID != "" && sub.runID != change.RunID) ||
			(sub.workspaceID != "" && sub.workspaceID != change.WorkspaceID) {
			continue
		}
		select {
		case ch <- struct{}{}:
		default: // a signal is already pending
		}
	}
}

func (c *Changes) signalAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ch := range c.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Run listens until ctx ends, reconnecting with backoff when the connection drops.
func (c *Changes) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := c.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		c.logger.WarnContext(ctx, "run change listener stopped; reconnecting", "error", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (c *Changes) listen(ctx context.Context) error {
	pooled, err := c.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A listening connection must never go back to the pool: take it out and close it.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	for _, channel := range []string{run.ChangesChannel, run.LogChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
			return err
		}
	}
	// What was announced while the listener was away is lost: every page reads again
	// (a page that missed a chunk's notice would otherwise wait for the next chunk).
	c.signalAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		// A chunk's notice names its organization and run as a change does; the rest
		// of it (phase, seq) is for nobody here: the page reads what follows what it sent.
		var change RunChange
		if err := json.Unmarshal([]byte(n.Payload), &change); err != nil {
			c.logger.WarnContext(ctx, "unreadable run notification", "channel", n.Channel, "error", err)
			continue
		}
		c.publish(change, n.Channel == run.LogChannel)
	}
}
