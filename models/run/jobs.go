package run

import (
	"context"
	"time"
)

// JobKind names the background work a run needs next.
type JobKind string

const (
	JobPlan   JobKind = "plan"
	JobApply  JobKind = "apply"
	JobVerify JobKind = "verify"
	JobExpire JobKind = "expire"
	// JobEscalate records that a waiting run's escalation took effect.
	JobEscalate JobKind = "escalate"
)

// Job is one piece of background work for a run. Expire jobs carry the state they
// expire and run at the deadline; the others run now.
type Job struct {
	Kind  JobKind
	RunID string
	State State     // for JobExpire: the state that expires
	RunAt time.Time // zero: as soon as possible
	// Since is when the run entered the state that asked for the job: a run can enter
	// APPROVED or PENDING_APPROVAL more than once (an approval voided, then given
	// again), and each entry needs its own apply, expiry and escalation job (the queue
	// keeps jobs unique by their arguments, finished ones included).
	Since time.Time
	// Takeover is the token of the expired lease a plan or verify job replaces (the
	// sweeper's retry is a job of its own, never a duplicate of the dead one).
	Takeover int64
}

// Enqueuer puts jobs on the queue inside the transaction carried by ctx, so a job
// exists only if the state change that asked for it committed.
type Enqueuer interface {
	Enqueue(ctx context.Context, jobs ...Job) error
	// Abandon closes the job jobID of a worker whose lease was taken over, so the queue
	// never hands it to another worker (which would run its phase a second time).
	Abandon(ctx context.Context, jobID int64, reason string) error
}

// jobsFor is the one place that says which work follows which state.
func jobsFor(r Run) []Job {
	jobs := jobsForState(r)
	for i := range jobs {
		jobs[i].Since = r.UpdatedAt
	}
	return jobs
}

func jobsForState(r Run) []Job {
	switch r.State {
	case Queued:
		return []Job{{Kind: JobPlan, RunID: r.ID}}
	case PendingApproval:
		var jobs []Job
		if r.DecisionDeadline != nil {
			jobs = append(jobs, Job{Kind: JobExpire, RunID: r.ID, State: PendingApproval, RunAt: *r.DecisionDeadline})
		}
		if at := escalatesAt(r); at != nil {
			jobs = append(jobs, Job{Kind: JobEscalate, RunID: r.ID, RunAt: *at})
		}
		return jobs
	case PolicyBlocked:
		// A soft block waits for an override within the decision window.
		if r.SoftBlocked() && r.DecisionDeadline != nil {
			return []Job{{Kind: JobExpire, RunID: r.ID, State: PolicyBlocked, RunAt: *r.DecisionDeadline}}
		}
	case Approved:
		jobs := []Job{{Kind: JobApply, RunID: r.ID}}
		if r.ApprovalExpiresAt != nil {
			jobs = append(jobs, Job{Kind: JobExpire, RunID: r.ID, State: Approved, RunAt: *r.ApprovalExpiresAt})
		}
		return jobs
	case Verifying:
		return []Job{{Kind: JobVerify, RunID: r.ID}}
	}
	return nil
}
