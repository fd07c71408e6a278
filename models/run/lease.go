package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"

	"gorm.io/gorm"
)

// Leases (DESIGN §6): the worker running a phase of a run holds a lease on it, renewed
// by a heartbeat in the database and fenced by a token. A portal that dies stops
// renewing; the sweeper (SweepLeases: every heartbeat, on whichever replica holds its
// lock, so no replica waits for an election) takes the expired lease over at its first
// pass after the lease expired and moves the run on: a plan or verification is planned or verified again by a fresh
// job, an apply becomes APPLY_INTERRUPTED and is never applied again. The dead worker's
// River job is closed in the same transaction, so River's own rescue (hours later)
// never runs the phase a second time.
//
// Every side effect of a phase names its lease (FinishPlan, FinishApply, FinishVerify,
// FailPhase, AppendLog) and is refused with ErrLeaseLost once the lease is gone: a
// worker that was only slow, not dead, changes nothing after a takeover. A lease lives
// only while its run is in the phase's state: a transition out of it (a cancel, a
// finish) ends the lease in the same transaction, and the worker's next heartbeat
// stops the phase.

// Defaults of the lease flags: renewed every 5 s, taken over 15 s after the last renewal.
const (
	DefaultHeartbeat = 5 * time.Second
	DefaultLeaseTTL  = 15 * time.Second
)

// ErrLeaseLost means the lease named was taken over or ended: the phase must stop and
// may change nothing more.
var ErrLeaseLost = errors.New("this worker's lease on the run was taken over or ended: it may change nothing more")

// Lease is a worker's hold on one phase of a run. Token is the fencing token: it grows
// with every lease granted, and only the current one is honoured.
type Lease struct {
	RunID string
	Phase JobKind
	Token int64
}

// Claim is what a worker asks for a lease with: the River job it works (closed by the
// sweeper on a takeover), the replica it runs in, and how long a renewal lasts.
type Claim struct {
	JobID  int64
	Holder string
	TTL    time.Duration
}

func (c Claim) ttl() time.Duration {
	if c.TTL <= 0 {
		return DefaultLeaseTTL
	}
	return c.TTL
}

// leaseTable holds the queries of run_leases and lease_sweeps.
type leaseTable struct{ db *gorm.DB }

// leaseRow is a row of run_leases.
type leaseRow struct {
	RunID          string
	OrganizationID string
	Phase          JobKind
	Token          int64
	JobID          int64
	Holder         string
	AcquiredAt     time.Time
	RenewedAt      time.Time
	ExpiresAt      time.Time
	// Stopping: the run was cancelled while it applied; the worker stops tofu under
	// this lease (stop.go).
	Stopping bool
	// Expired is read, not stored: the lease ran out by the database clock (its worker
	// stopped renewing it, or released it as it returned).
	Expired bool `gorm:"->"`
}

func (leaseRow) TableName() string { return "run_leases" }

// lease reads run r's lease under a row lock (nil: none).
func (st leaseTable) lease(ctx context.Context, runID string) (*leaseRow, error) {
	var rows []leaseRow
	if err := db.Conn(ctx, st.db).Raw("SELECT *, expires_at <= clock_timestamp() AS expired FROM run_leases WHERE run_id = ? FOR UPDATE", runID).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("reading the lease of run %s: %w", runID, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return &rows[0], nil
}

// grantLease gives claim a fresh lease on phase of r, replacing any earlier one (the
// caller decided it may): a new token, so whoever held the old one is fenced.
func (st leaseTable) grantLease(ctx context.Context, r Run, phase JobKind, c Claim) (Lease, error) {
	var token int64
	err := db.Conn(ctx, st.db).Raw(`INSERT INTO run_leases (run_id, organization_id, phase, token, job_id, holder, expires_at)
		VALUES (?, ?, ?, nextval('run_lease_tokens'), ?, ?, clock_timestamp() + make_interval(secs => ?))
		ON CONFLICT (run_id) DO UPDATE SET phase = EXCLUDED.phase, token = EXCLUDED.token, job_id = EXCLUDED.job_id,
			holder = EXCLUDED.holder, acquired_at = clock_timestamp(), renewed_at = clock_timestamp(), expires_at = EXCLUDED.expires_at
		RETURNING token`, r.ID, r.OrganizationID, string(phase), c.JobID, c.Holder, c.ttl().Seconds()).Scan(&token).Error
	if err != nil {
		return Lease{}, fmt.Errorf("granting a %s lease on run %s: %w", phase, r.ID, err)
	}
	return Lease{RunID: r.ID, Phase: phase, Token: token}, nil
}

// holds checks, under a row lock held to the commit, that l is still the run's lease:
// the fence every side effect of a phase passes.
func (st leaseTable) holds(ctx context.Context, l Lease) error {
	var n int64
	if err := db.Conn(ctx, st.db).Raw("SELECT count(*) FROM (SELECT 1 FROM run_leases WHERE run_id = ? AND token = ? AND phase = ? FOR UPDATE) held",
		l.RunID, l.Token, string(l.Phase)).Scan(&n).Error; err != nil {
		return fmt.Errorf("checking the lease of run %s: %w", l.RunID, err)
	}
	if n == 0 {
		return ErrLeaseLost
	}
	return nil
}

// endLeasesBut deletes run runID's lease unless it is for phase keep (the phase of the
// state the run is now in; "" ends any) or stopping: a cancelled apply's lease lives on
// while its worker stops tofu (stop.go), and FinishStopped or the sweeper ends it.
func (st leaseTable) endLeasesBut(ctx context.Context, runID string, keep JobKind) error {
	return db.Conn(ctx, st.db).Exec("DELETE FROM run_leases WHERE run_id = ? AND phase <> ? AND NOT stopping", runID, string(keep)).Error
}

// endLeases deletes run runID's lease, a stopping one too.
func (st leaseTable) endLeases(ctx context.Context, runID string) error {
	return db.Conn(ctx, st.db).Exec("DELETE FROM run_leases WHERE run_id = ?", runID).Error
}

// phaseOf is the phase a run in state st is in the middle of ("" for none).
func phaseOf(st State) JobKind {
	phase, _ := st.RunningPhase()
	return phase
}

// leaseFor decides, as a phase begins on run r, whether claim may take the lease: no
// lease, or an expired one left by an earlier attempt of the same job (a graceful
// restart or an interrupted phase hands the job to another attempt; the worker
// released its lease as it returned), is taken; a live lease means a worker still runs
// the phase (ErrSkip), even one of this same job: River may start a second attempt of
// a job whose first is alive (its rescue after a long apply), and the two share a job
// id; an expired one of another job is left for the sweeper, which closes that job and
// queues a fresh one (ErrSkip here). taken reports whether an earlier attempt's lease
// was replaced (it may hold the state lock).
func (s *Jobs) leaseFor(ctx context.Context, r Run, phase JobKind, c Claim) (l Lease, taken bool, err error) {
	old, err := s.k.leases.lease(ctx, r.ID)
	if err != nil {
		return Lease{}, false, err
	}
	if !old.leftBy(c) {
		return Lease{}, false, ErrSkip
	}
	l, err = s.k.leases.grantLease(ctx, r, phase, c)
	return l, old != nil, err
}

// leftBy reports whether lease l (nil: none) is free for claim c: there is none, or an
// earlier attempt of c's own job held it and it has expired. A live lease is never
// free, whichever job holds it: only its expiry proves its worker gone.
func (l *leaseRow) leftBy(c Claim) bool {
	return l == nil || (l.JobID == c.JobID && l.Expired)
}

// ReleaseLease ends the renewal of lease l as its worker returns without finishing the
// phase (shut down, or the phase interrupted from outside): the lease expires now, so
// the job's next attempt, or the sweeper, takes the run on at once instead of a lease
// later. A lease already ended (the phase finished) is left as it is.
func (s *Jobs) ReleaseLease(ctx context.Context, l Lease) error {
	if err := s.k.store.conn(ctx).Exec("UPDATE run_leases SET expires_at = clock_timestamp() WHERE run_id = ? AND token = ?", l.RunID, l.Token).Error; err != nil {
		return fmt.Errorf("releasing the lease of run %s: %w", l.RunID, err)
	}
	return nil
}

// RenewLease is the heartbeat: it extends l by ttl from the database clock, or answers
// ErrLeaseLost when l is no longer the run's lease (taken over, or the run left the
// phase), or ErrStopRequested (renewed) when the run was cancelled while it applied. An
// expired lease the sweeper has not yet taken is renewed: its worker lives.
func (s *Jobs) RenewLease(ctx context.Context, l Lease, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	var stopping []bool
	err := s.k.store.conn(ctx).Raw(`UPDATE run_leases SET renewed_at = clock_timestamp(), expires_at = clock_timestamp() + make_interval(secs => ?)
		WHERE run_id = ? AND token = ? RETURNING stopping`, ttl.Seconds(), l.RunID, l.Token).Scan(&stopping).Error
	switch {
	case err != nil:
		return fmt.Errorf("renewing the lease of run %s: %w", l.RunID, err)
	case len(stopping) == 0:
		return ErrLeaseLost
	case stopping[0]:
		return ErrStopRequested // renewed: the worker holds it while it stops the apply
	}
	return nil
}

// Takeover is one expired lease the sweeper acted on.
type Takeover struct {
	RunID  string
	Phase  JobKind
	Holder string
	// Pass is the sweeper pass that took it over, PreviousPassAt when the pass before it
	// ran (before ExpiresAt: the first pass after the lease expired took it).
	Pass           int64
	PreviousPassAt *time.Time
	// RenewedAt is the dead worker's last heartbeat, ExpiresAt when its lease ran
	// out and DetectedAt when the sweeper took it over (all by the database clock).
	RenewedAt, ExpiresAt, DetectedAt time.Time
	// Outcome says what happened to the run: "planning again", "verifying again",
	// "apply interrupted".
	Outcome string
}

// sweepBatch bounds the leases one pass takes over; the rest wait for the next pass.
const sweepBatch = 100

// sweepPass is one pass of the sweeper, as recorded in lease_sweeps.
type sweepPass struct {
	Number     int64
	PreviousAt *time.Time
}

// countPass records a sweeper pass made by replica and returns it with the time of the
// pass before.
func (st leaseTable) countPass(ctx context.Context, replica string) (sweepPass, error) {
	var p sweepPass
	err := db.Conn(ctx, st.db).Raw(`UPDATE lease_sweeps SET passes = passes + 1, last_pass_at = clock_timestamp(), replica = ?
		FROM (SELECT last_pass_at AS prev FROM lease_sweeps) p RETURNING passes AS number, p.prev AS previous_at`, replica).Scan(&p).Error
	if err != nil {
		return sweepPass{}, fmt.Errorf("counting a sweeper pass: %w", err)
	}
	return p, nil
}

// SweepLeases is one pass of the sweeper, made by replica (the one holding the
// sweeper's lock): it takes over every expired lease, each in its own transaction with
// the run locked, so a worker renewing meanwhile either renews first (and keeps its
// lease) or finds it gone.
func (s *Jobs) SweepLeases(ctx context.Context, replica string) ([]Takeover, error) {
	pass, err := s.k.leases.countPass(ctx, replica)
	if err != nil {
		return nil, err
	}
	var ids []string
	if err := s.k.store.conn(ctx).Raw("SELECT run_id FROM run_leases WHERE expires_at < clock_timestamp() ORDER BY expires_at LIMIT ?", sweepBatch).
		Scan(&ids).Error; err != nil {
		return nil, fmt.Errorf("finding expired leases: %w", err)
	}
	var done []Takeover
	for _, id := range ids {
		t, err := s.takeOver(ctx, id, pass)
		switch {
		case errors.Is(err, ErrSkip):
		case err != nil:
			return done, err
		default:
			done = append(done, t)
		}
	}
	return done, nil
}

// takeOver moves on the run of one expired lease: fence its state lock and
// credentials, close the dead worker's job, and plan or verify again, or interrupt the
// apply. ErrSkip when the lease was renewed or ended meanwhile.
func (s *Jobs) takeOver(ctx context.Context, runID string, pass sweepPass) (Takeover, error) {
	var t Takeover
	_, err := s.k.update(ctx, "", runID, nil, func(ctx context.Context, r *Run, now time.Time) error {
		old, err := s.k.leases.lease(ctx, r.ID)
		if err != nil {
			return err
		}
		if old == nil || now.Before(old.ExpiresAt) {
			return ErrSkip
		}
		t = Takeover{RunID: r.ID, Phase: old.Phase, Holder: old.Holder, RenewedAt: old.RenewedAt.UTC(), ExpiresAt: old.ExpiresAt.UTC(), DetectedAt: now,
			Pass: pass.Number, PreviousPassAt: pass.PreviousAt}
		why := fmt.Sprintf("the worker running the %s phase (replica %s) stopped renewing its lease at %s", old.Phase, old.Holder, t.RenewedAt.Format(time.RFC3339))
		if err := s.k.enqueuer.Abandon(ctx, old.JobID, why); err != nil {
			return err
		}
		if err := s.k.leases.endLeases(ctx, r.ID); err != nil {
			return err
		}
		if old.Stopping {
			// The worker stopping a cancelled apply died: nothing more is written.
			t.Outcome = "stopped apply fenced"
			return s.fence(ctx, *r, why+" while it stopped the cancelled apply")
		}
		if phaseOf(r.State) != old.Phase {
			return nil // the run already left the phase; its lease only lingered
		}
		if err := s.fence(ctx, *r, why); err != nil {
			return err
		}
		data := map[string]any{"phase": old.Phase, "holder": old.Holder, "token": old.Token, "renewed_at": t.RenewedAt,
			"expired_at": t.ExpiresAt, "detected_at": t.DetectedAt, "sweep_pass": pass.Number}
		if pass.PreviousAt != nil {
			data["previous_pass_at"] = pass.PreviousAt.UTC()
		}
		if old.Phase == JobApply {
			t.Outcome = "apply interrupted"
			if err := r.end(ApplyInterrupted, EndApplyInterrupted, why+"; it is never applied again: an admin recovers it once the workspace was checked"); err != nil {
				return err
			}
			r.moves.Annotate(map[string]any{"lease": data})
			return nil
		}
		t.Outcome = map[JobKind]string{JobPlan: "planning again", JobVerify: "verifying again"}[old.Phase]
		data["outcome"] = t.Outcome
		if err := s.k.audit.RecordAs(ctx, authz.System(r.OrganizationID), audit.Entry{Action: "run.lease_expired", TargetType: "run", TargetID: r.ID,
			Data: data, EnvironmentID: r.EnvironmentID, WorkspaceID: r.WorkspaceID}); err != nil {
			return err
		}
		return s.k.enqueuer.Enqueue(ctx, Job{Kind: old.Phase, RunID: r.ID, Takeover: old.Token})
	})
	if err != nil {
		return Takeover{}, err
	}
	return t, nil
}

// fence releases the workspace state lock held by r's job and revokes its
// credentials. A simulated run never touched the state backend.
func (s *Jobs) fence(ctx context.Context, r Run, reason string) error {
	if s.k.fencer == nil || r.Simulated {
		return nil
	}
	if err := s.k.fencer.FenceAndRelease(ctx, r.WorkspaceID, r.ID, reason); err != nil {
		return fmt.Errorf("fencing the state lock of run %s: %w", r.ID, err)
	}
	return nil
}
