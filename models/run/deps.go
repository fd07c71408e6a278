package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"gantry/models/artifact"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/policy"
	"gantry/models/risk"
	"gantry/models/workspace"
	"gantry/policies"
)

// What runs need from other aggregates, each as a small interface the owning package
// implements: runs never query another aggregate's tables.

// Environments is what runs need of environments (environment.Directory): the run's
// environment with its gate settings and named owners, grants, and which restricted
// environments a member may not see.
type Environments interface {
	Lookup(ctx context.Context, orgID, id string) (environment.Environment, error)
	HasGrant(ctx context.Context, envID, userID string) (bool, error)
	// Grantees are the users holding a grant on environment envID.
	Grantees(ctx context.Context, envID string) ([]string, error)
	HiddenFrom(ctx context.Context, subject authz.Subject) ([]string, error)
	// CheckVisible is errs.ErrNotFound unless subject may see environment id.
	CheckVisible(ctx context.Context, subject authz.Subject, id string) error
	// NextInPromotion lists the environments a workspace in environment id is
	// promoted to (the next order up of its organization's promotion order).
	NextInPromotion(ctx context.Context, orgID, id string) ([]environment.Environment, error)
	// DriftSchedules lists the environments (of every organization) with scheduled
	// drift checks.
	DriftSchedules(ctx context.Context) ([]environment.DriftSchedule, error)
}

// Members is what runs need of memberships (org.Service): a member's role, cloud.live
// and groups; errs.ErrNotFound when the user is no longer a member.
type Members interface {
	Member(ctx context.Context, orgID, userID string) (Member, error)
	// List is every member of the organization (who may decide a waiting run).
	List(ctx context.Context, orgID string) ([]OrgMember, error)
}

// Workspaces is what runs need of workspaces (workspace.Store): finding one by name,
// creating it on first use, numbering its runs and its apply slot.
type Workspaces interface {
	Find(ctx context.Context, orgID, envID, name string) (*workspace.Workspace, error)
	// NameOf is the name of workspace id (errs.ErrNotFound when orgID has none); Get
	// the workspace.
	NameOf(ctx context.Context, orgID, id string) (string, error)
	Get(ctx context.Context, orgID, id string) (workspace.Workspace, error)
	// Names are the names of an environment's workspaces.
	Names(ctx context.Context, orgID, envID string) ([]string, error)
	// Matching lists, by name, the ids of at most limit workspaces whose name holds
	// text (is text, when exact), none of the hidden environments.
	Matching(ctx context.Context, orgID, text string, exact bool, hidden []string, limit int) ([]string, error)
	// Ensure returns the named workspace, created (and audited) on first use, locked
	// until the transaction in ctx ends.
	Ensure(ctx context.Context, orgID, envID, name, template string) (workspace.Workspace, error)
	// TakeRunNumber returns the workspace's next run number and counts it used.
	TakeRunNumber(ctx context.Context, id string) (int, error)
	// LockSlot locks the workspace row and returns the run holding its apply slot ("" none).
	LockSlot(ctx context.Context, id string) (string, error)
	SetSlot(ctx context.Context, id, runID string) error
	ReleaseSlot(ctx context.Context, id, runID string) error
}

// StateVersions is what runs need of the state backend (state.Store): the predecessor
// a plan is computed from, a version's content, and storing the state a runner returned
// instead of writing it through the backend (the mock).
type StateVersions interface {
	// Predecessor is the workspace's newest version as the predecessor of a plan
	// computed now (NoPredecessor if it has none).
	Predecessor(ctx context.Context, orgID, workspaceID string) (Predecessor, error)
	Content(ctx context.Context, orgID, versionID string) ([]byte, error)
	// VersionOf is the version run runID wrote, if any ("" when it wrote none).
	VersionOf(ctx context.Context, orgID, workspaceID, runID string) (string, error)
	// RecordApplied stores the state a runner returned (the mock), telling runs (the
	// watcher) as a backend write does.
	RecordApplied(ctx context.Context, orgID, workspaceID, runID string, data []byte, runs StateWatcher) (string, error)
	// HoldSteady keeps the workspace's state from being written until the transaction
	// in ctx ends (a shared hold of its state lock).
	HoldSteady(ctx context.Context, orgID, workspaceID string) error
	// VersionInfo is a version of orgID (errs.ErrNotFound when it has none such);
	// ResourcesOf the managed resources it holds (a rollback's boundary).
	VersionInfo(ctx context.Context, orgID, id string) (StateVersionInfo, error)
	ResourcesOf(ctx context.Context, orgID, id string) ([]StateResource, error)
}

// Windows is what runs need of break-glass windows (breakglass.Store): the window open
// on a workspace (nothing of it is approved or applied meanwhile), the windows a drift
// is attributed to, and telling windows awaiting codification what a drift check found.
type Windows interface {
	// OpenOn is the window open on workspaceID now, by the database clock (nil: none).
	OpenOn(ctx context.Context, orgID, workspaceID string) (*WindowInfo, error)
	// Named are the windows of workspaceID among ids (others are left out).
	Named(ctx context.Context, orgID, workspaceID string, ids []string) (map[string]WindowInfo, error)
	// DriftChecked tells the windows of the check's workspace awaiting codification
	// what the drift check found, in the transaction that records it.
	DriftChecked(ctx context.Context, c DriftCheck) error
}

// Fencer releases a dead job's state lock and revokes its credentials (state.Store).
type Fencer interface {
	FenceAndRelease(ctx context.Context, workspaceID, runID, reason string) error
	HoldsLock(ctx context.Context, workspaceID, runID string) (bool, error)
}

// Policies is what the plan gates and overrides need of policy (policy.Store).
type Policies interface {
	Bundle(ctx context.Context, orgID string) (*policies.Bundle, error)
	Modes(ctx context.Context, envID string) (map[string]policies.Enforcement, error)
	Record(ctx context.Context, orgID, runID string, revision int, planDigest string, ev policies.Evaluation) (policy.Evaluation, error)
	EvaluationWithOverrides(ctx context.Context, orgID, evaluationID string) (policy.Evaluation, map[string]policy.Override, error)
	// AddOverride stores an override; bound is the evidence the decision named, for its
	// audit event.
	AddOverride(ctx context.Context, o policy.Override, bundleDigest string, bound map[string]any) error
}

// MatrixSource gives an organization's current approval matrix (risk.Store).
type MatrixSource interface {
	Current(ctx context.Context, orgID string) (risk.Version, error)
}

// Runners are the executors on offer: the deployment's default and every runner an
// environment may name.
type Runners struct {
	Default   string
	Available []RunnerInfo
}

// pick resolves an environment's executor setting to an available runner.
func (rs Runners) pick(executor string) (RunnerInfo, bool) {
	if executor == "" || executor == "default" {
		executor = rs.Default
	}
	for _, r := range rs.Available {
		if r.Name == executor {
			return r, true
		}
	}
	return RunnerInfo{}, false
}

// core is what every role shares: the dependencies, the database clock and the one
// transition (update) that writes a run, its audit event, its notices and its
// decider rows in one transaction. Roles reach it through their k field; nothing
// outside the package sees it.
type core struct {
	store        store
	leases       leaseTable // run_leases and lease_sweeps
	logs         logTable   // run_log_chunks
	audit        *audit.Log
	artifacts    *artifact.Store
	enqueuer     Enqueuer
	catalog      Catalog
	runners      Runners
	stateAddress func(runner, workspaceID string) string
	environments Environments
	members      Members
	workspaces   Workspaces
	states       StateVersions
	fencer       Fencer
	matrix       MatrixSource
	policies     Policies
	attestor     Attestor
	notifier     Notifier
	keys         Sealer
	windows      Windows
	observer     Observer
}

// Observer is told of decisions and policy evaluations, for the operators' metrics
// (telemetry.Metrics). It only counts: it never changes what happens.
type Observer interface {
	// Decided: a decision on a run was recorded (approve, reject, override, cancel,
	// recover; expired_late for one that came after the deadline and expired the run),
	// wait being how long the run had waited for a person (zero when not waiting).
	Decided(action string, wait time.Duration)
	// PolicyEvaluated: a plan was evaluated against its policies in d.
	PolicyEvaluated(d time.Duration, failed bool)
}

// noObserver counts nothing.
type noObserver struct{}

func (noObserver) Decided(string, time.Duration)       {}
func (noObserver) PolicyEvaluated(time.Duration, bool) {}

// Config is what the run roles are built from; every field is required but Observer.
type Config struct {
	DB        *gorm.DB
	Audit     *audit.Log
	Artifacts *artifact.Store
	Enqueuer  Enqueuer
	Catalog   Catalog
	Runners   Runners
	// StateAddress is the http backend address a runner's jobs reach for a workspace
	// (jobs in containers reach it through a forwarded socket at a fixed address).
	StateAddress func(runner, workspaceID string) string
	Environments Environments
	Members      Members
	Workspaces   Workspaces
	States       StateVersions
	Fencer       Fencer
	Matrix       MatrixSource
	Policies     Policies
	Attestor     Attestor
	Notifier     Notifier
	// Keys seal the chunks of live logs (logs.go), as the artifact store seals artifacts.
	Keys Sealer
	// Windows are the break-glass windows (DESIGN §9).
	Windows Windows
	// Observer counts the service's decisions and policy evaluations (optional: nil
	// counts nothing).
	Observer Observer
}

// AttestedState is one state version an apply wrote: an attestation's subject.
type AttestedState struct {
	Name   string // "state-version/<id>"
	SHA256 string // of the plaintext state
}

// Attestor signs what an apply wrote (models/attest), in the caller's transaction.
type Attestor interface {
	Attest(ctx context.Context, orgID, runID string, subjects []AttestedState, predicate map[string]any) error
	// OfRun returns the run's attestation bundles, newest first.
	OfRun(ctx context.Context, orgID, runID string) ([]json.RawMessage, error)
}

// New returns the run lifecycle's roles over one core; it builds nothing behind the
// caller's back, so a missing dependency is an error here rather than a default that
// hides it.
func New(c Config) (*Runs, error) {
	// Each field compared with nil in its own type: no reflection, no list of concrete
	// types to keep up to date, and the missing ones named in the Config's order.
	var missing []string
	for _, dep := range []struct {
		name   string
		absent bool
	}{
		{"DB", c.DB == nil}, {"Audit", c.Audit == nil}, {"Artifacts", c.Artifacts == nil}, {"Enqueuer", c.Enqueuer == nil},
		{"Catalog", c.Catalog == nil}, {"StateAddress", c.StateAddress == nil}, {"Environments", c.Environments == nil},
		{"Members", c.Members == nil}, {"Workspaces", c.Workspaces == nil}, {"States", c.States == nil},
		{"Fencer", c.Fencer == nil}, {"Matrix", c.Matrix == nil}, {"Policies", c.Policies == nil},
		{"Attestor", c.Attestor == nil}, {"Notifier", c.Notifier == nil}, {"Keys", c.Keys == nil}, {"Windows", c.Windows == nil},
	} {
		if dep.absent {
			missing = append(missing, dep.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("run: missing %v", missing)
	}
	if len(c.Runners.Available) == 0 {
		return nil, errors.New("run: no runners on offer")
	}
	return newRuns(&core{store: store{db: c.DB}, leases: leaseTable{db: c.DB}, logs: logTable{db: c.DB}, audit: c.Audit, artifacts: c.Artifacts, enqueuer: c.Enqueuer, catalog: c.Catalog,
		runners: c.Runners, stateAddress: c.StateAddress, environments: c.Environments, members: c.Members,
		workspaces: c.Workspaces, states: c.States, fencer: c.Fencer, matrix: c.Matrix, policies: c.Policies, attestor: c.Attestor, notifier: c.Notifier,
		keys: c.Keys, windows: c.Windows, observer: observerOr(c.Observer)}), nil
}

// observerOr is o, or an observer that counts nothing.
func observerOr(o Observer) Observer {
	if o == nil {
		return noObserver{}
	}
	return o
}

// now is the database clock, read after any row lock the transaction in ctx took
// (clock_timestamp(), not now(): a decision that waited behind the lock is judged when
// it commits, not when its transaction began).
func (s *core) now(ctx context.Context) (time.Time, error) { return s.store.clock(ctx) }
