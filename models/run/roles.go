package run

// The run lifecycle's public surface is a set of roles, each a small type that one
// kind of caller holds: the request form holds Requests, the run page Reads and
// Decisions, the workers Plans, Applies, Verifies and Jobs, and so on. They share one
// core (k) and never embed one another; where a role needs another's step it holds
// that role in a named field, so the dependency shows in the type. Satellites call
// the roles from outside: models/breakglass, models/promotion, models/rollback,
// models/evidence and models/timeline.

// Runs are the roles, built once by New over one core. It is a set of fields, not a
// service: a caller takes the role it needs and is handed nothing else.
type Runs struct {
	Requests    *Requests
	Decisions   *Decisions
	Eligibility *Eligibility
	Jobs        *Jobs
	Plans       *Plans
	Applies     *Applies
	Verifies    *Verifies
	Reads       *Reads
	Inbox       *Inbox
	DriftChecks *DriftChecks
	Staleness   *Staleness
}

func newRuns(k *core) *Runs {
	requests := &Requests{k: k}
	jobs := &Jobs{k: k}
	drift := &DriftChecks{k: k}
	staleness := &Staleness{k: k}
	return &Runs{
		Requests:    requests,
		Decisions:   &Decisions{k: k},
		Eligibility: &Eligibility{k: k},
		Jobs:        jobs,
		Plans:       &Plans{k: k, jobs: jobs},
		Applies:     &Applies{k: k, jobs: jobs, staleness: staleness},
		Verifies:    &Verifies{k: k, jobs: jobs, drift: drift},
		Reads:       &Reads{k: k},
		Inbox:       &Inbox{k: k},
		DriftChecks: drift,
		Staleness:   staleness,
	}
}

// Requests validates and queues a person's request (request.go).
type Requests struct{ k *core }

// Decisions are what people (and the clock) decide on a run: approve, reject,
// override, cancel, recover, plan again, escalate and expire, with the permissions
// that say which of them a person may take (decisions.go).
type Decisions struct{ k *core }

// Eligibility keeps the decider rows of waiting runs true when a membership or a
// grant changes, and voids the approvals of a member who left (deciders.go).
type Eligibility struct{ k *core }

// Jobs are what every phase worker shares: the executor a run is on, its lease, its
// live log, failing a phase and sweeping the leases of dead replicas (lease.go).
type Jobs struct{ k *core }

// Plans begins and finishes the plan phase (work.go).
type Plans struct {
	k    *core
	jobs *Jobs
}

// Applies begins and finishes the apply phase, rechecking what was approved first
// (apply.go).
type Applies struct {
	k         *core
	jobs      *Jobs
	staleness *Staleness // told of the state an apply returned (the mock runner)
}

// Verifies begins and finishes the verification after an apply; a verification that
// did not converge queues a drift check (verify.go).
type Verifies struct {
	k     *core
	jobs  *Jobs
	drift *DriftChecks
}

// Reads are the run read models a person may see: one run, lists, search, history,
// artifacts, the review, live logs, and what notices and metrics say (reads.go).
type Reads struct{ k *core }

// Inbox is the personal inbox's read model: what waits for the person and for others
// (inbox.go); its count includes the emergencies told to it (CountEmergencies).
type Inbox struct {
	k           *core
	emergencies Emergencies
}

// DriftChecks queue drift checks (asked for, scheduled, at a window's end),
// corrections and codifications, and read their findings (drift_checks.go,
// drift_reads.go).
type DriftChecks struct{ k *core }

// Staleness is what the state backend tells runs: a write made waiting plans stale, a
// lock holds a run waiting (stale.go).
type Staleness struct{ k *core }
