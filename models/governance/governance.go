// Package governance writes the governance report (DESIGN §8) from live configuration
// and run history only, never from assumptions: the pipeline gates per environment
// (what each checks, its status, and what establishes it: the configuration and the
// rules that read it, or what the report checked), the approval matrix in force with its
// floors, the apply identity per environment (the workload identity trust path, static
// credentials as findings), rollback boundaries per template, the manual change path,
// and what a downstream team inherits.
//
// A gate's status is derived, never stamped: the approval gate of each change kind asks
// the run rules what a plan of that kind gets under the matrix and the floors in that
// environment (Rules.Gate); the plan gate asks the executor; the apply binding and the
// verification ask the state table and check the audit chain. Whatever does not hold is
// also a finding naming the setting to change; applies without a matching approval
// record ("unevidenced"), approved by their own requester ("self-approved") or by Gantry
// alone ("self-service (no person's gate)") are findings with counts and their runs.
package governance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"gantry/models/words"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/breakglass"
	"gantry/models/environment"
	"gantry/models/risk"
	"gantry/models/runport"
	"gantry/policies"
)

// Status words of a gate. Only Enforced and Simulated hold; every other status comes
// with a finding.
const (
	// Enforced: the configuration and the rules reading it establish the gate.
	Enforced = "enforced"
	// Simulated: the executor simulates every phase; nothing real is planned or applied.
	Simulated = "simulated"
	// Annotating: policy runs but blocks nothing here (every rule advisory).
	Annotating = "annotating"
	// SelfService: Gantry approves by itself; no person decides.
	SelfService = runport.SelfService
	// UnenforcedUnknown: nothing in the configuration establishes the gate.
	UnenforcedUnknown = "unenforced-unknown"
	// Flagged: the gate runs but does not hold as it says (four eyes off, an executor
	// that is not isolated, a standing credential, applies the chain cannot match).
	Flagged = "finding"
)

// Labels of the findings about applies.
const (
	Unevidenced  = "unevidenced"
	SelfApproved = "self-approved"
)

// Environments lists an organization's environments and the static credentials they hold.
type Environments interface {
	AllOf(ctx context.Context, orgID string) ([]environment.Environment, map[string]environment.Standing, error)
}

// Policies reads the organization's bundle and an environment's modes.
type Policies interface {
	Bundle(ctx context.Context, orgID string) (*policies.Bundle, error)
	Modes(ctx context.Context, environmentID string) (map[string]policies.Enforcement, error)
}

// Matrix reads the approval matrix in force.
type Matrix interface {
	Current(ctx context.Context, orgID string) (risk.Version, error)
}

// Rules are the run rules the report asks instead of restating them (run.GovernanceRules).
type Rules interface {
	// Gate is the decision a plan with facts f gets under matrix m: the matrix raised to
	// the floors, then Gantry's self-service approval or what a person's decision needs.
	Gate(m risk.Matrix, f risk.Facts) risk.Assessment
	// AppliesOnlyApproved: the state table starts an apply only from APPROVED.
	AppliesOnlyApproved() bool
	// VerifiesBeforeSuccess: the state table lets a run succeed only through its
	// verification.
	VerifiesBeforeSuccess() bool
}

// Executor is what the report needs of the executor an environment's setting names.
type Executor struct {
	Name string
	// Offered: this portal runs it; Simulated and Isolated are what it says of itself.
	Offered, Simulated, Isolated bool
}

// Executors resolves an environment's executor setting ("default" or a name) to the
// executor this portal runs for it (the runner set).
type Executors interface {
	Executor(setting string) Executor
}

// Template is what the report needs of a catalog template.
type Template struct {
	Name, Version, Rollback string
	Irreversible            []string
}

// Catalog lists the templates on offer.
type Catalog interface {
	Templates() []Template
}

// Windows summarizes the organization's break-glass windows (breakglass.Store).
type Windows interface {
	SummaryOf(ctx context.Context, orgID string, since time.Time, recent int) (breakglass.Summary, error)
}

// Drift counts the organization's finished drift checks by finding (run.DriftChecks).
type Drift interface {
	DriftCounts(ctx context.Context, orgID string, since time.Time) (map[runport.DriftStatus]int, error)
}

// ManualChangeWindow is how far back the manual change path's record goes.
const ManualChangeWindow = 90 * 24 * time.Hour

// Applies counts, per environment, the applies in the audit chain, judged by the
// approval in force when each started (audit.Log).
type Applies interface {
	AppliesByEnvironment(ctx context.Context, orgID string) (map[string]audit.ApplyCount, error)
}

// Gate is one gate of one environment: what it checks, its status and what establishes
// it (or what was checked, and what is missing).
type Gate struct {
	ID, Name, Checks, Status, EnforcedBy string
}

// Holds reports whether the gate holds as it says (no finding).
func (g Gate) Holds() bool { return g.Status == Enforced || g.Status == Simulated }

// Place is where a finding's setting is changed.
type Place string

const (
	PlaceMatrix      Place = "approval-matrix"
	PlaceEnvironment Place = "environment"     // the environment's settings form
	PlaceCredentials Place = "credentials"     // the environment's page, where static credentials are cleared
	PlacePolicies    Place = "policies"        // the organization's policies
	PlacePolicyModes Place = "policy-modes"    // the environment's policy modes
	PlaceHistory     Place = "applies-history" // the audit history of the environment's applies
)

// Setting is the setting a finding names: in words, and where it is changed.
type Setting struct {
	Name  string
	Place Place
}

// Finding is something an auditor must look at: what does not hold, how many applies
// it concerns (with the newest of them), and the setting to change.
type Finding struct {
	Gate    string // the id of the gate it concerns
	Text    string
	Setting Setting
	Count   int
	Runs    []audit.RunRef
}

// EnvironmentReport is one environment's part.
type EnvironmentReport struct {
	ID, Name, Tier string
	Gates          []Gate
	ApplyIdentity  string
	// Integration is where its runs provision, the identity a read and a write phase
	// uses there, and whether that is federated or static.
	Integration         environment.Integration
	Findings            []Finding
	Applies             audit.ApplyCount
	Restricted          bool
	DecisionWindowHours int
	Executor            string
}

// Report is the whole governance report.
type Report struct {
	GeneratedAt   time.Time
	Environments  []EnvironmentReport
	MatrixVersion int
	Matrix        []string // one line per risk level: who decides
	Floors        []string
	Rollback      []string // one line per template
	// ManualChange says in a sentence how the manual change path works and where it
	// holds; ManualChangeRecord what it did (counts, each recent window).
	ManualChange       string
	ManualChangeRecord []string
	Handoff            []string
}

// Service builds the report.
type Service struct {
	Environments Environments
	Policies     Policies
	Matrix       Matrix
	Rules        Rules
	Executors    Executors
	Catalog      Catalog
	Applies      Applies
	// Floors are the matrix floors no organization can lower (run.Floors).
	Floors risk.Floors
	// IssuerURL is the workload identity issuer runners' tokens come from.
	IssuerURL string
	Windows   Windows
	Drift     Drift
	// ApprovalValidity is how long an approval stays good (run.ApprovalValidity): a
	// window is opened within it.
	ApprovalValidity time.Duration
}

// Report builds the subject's organization's report. Reading it needs audit.read.
func (s Service) Report(ctx context.Context) (Report, error) {
	subject, err := authz.Require(ctx, authz.PermAuditRead)
	if err != nil {
		return Report{}, err
	}
	org := subject.OrganizationID
	envs, creds, err := s.Environments.AllOf(ctx, org)
	if err != nil {
		return Report{}, err
	}
	bundle, err := s.Policies.Bundle(ctx, org)
	if err != nil {
		return Report{}, err
	}
	matrix, err := s.Matrix.Current(ctx, org)
	if err != nil {
		return Report{}, err
	}
	applies, err := s.Applies.AppliesByEnvironment(ctx, org)
	if err != nil {
		return Report{}, err
	}
	rep := Report{GeneratedAt: time.Now().UTC(), MatrixVersion: matrix.Version}
	if err := s.manualChange(ctx, org, envs, &rep); err != nil {
		return Report{}, err
	}
	rep.Matrix, rep.Floors = s.matrixLines(matrix.Matrix)
	for _, env := range envs {
		modes, err := s.Policies.Modes(ctx, env.ID)
		if err != nil {
			return Report{}, err
		}
		rep.Environments = append(rep.Environments, s.environment(env, inForce{matrix: matrix, bundle: bundle, modes: modes,
			standing: creds[env.ID], applies: applies[env.ID]}))
	}
	for _, t := range s.Catalog.Templates() {
		line := t.Name + " " + t.Version + ": " + strings.TrimSpace(t.Rollback)
		if len(t.Irreversible) > 0 {
			line += " Irreversible (a rollback cannot bring them back): " + strings.Join(t.Irreversible, ", ") + "."
		}
		rep.Rollback = append(rep.Rollback, line)
	}
	sort.Strings(rep.Rollback)
	standing := 0
	for _, st := range creds {
		if st.Any() {
			standing++
		}
	}
	identities := "workload identity only; no standing credentials"
	switch {
	case standing == 1:
		identities = "1 environment holds standing static credentials (findings above)"
	case standing > 1:
		identities = fmt.Sprintf("%d environments hold standing static credentials (findings above)", standing)
	}
	integrations := make([]string, len(rep.Environments))
	for i, e := range rep.Environments {
		integrations[i] = e.Name + ": " + e.Integration.Kind.Label() + " (" + e.Integration.Credentials() + ")"
	}
	rep.Handoff = []string{
		"Apply identities: " + identities + ".",
		"Integrations (where each environment's runs provision, and whether with federated workload tokens or static credentials): " + strings.Join(integrations, "; ") + ".",
		"Policy is evaluated by Gantry at plan time and again before every apply (bundle digest " + bundle.Digest() + ").",
		"Manual change path: break-glass windows, approved by another admin and codified through a gated run (see above); " + rep.ManualChangeRecord[0],
		"Rollback boundaries: " + words.Count(len(rep.Rollback), "template", "templates") + ", see above.",
	}
	return rep, nil
}

// matrixLines are the matrix in force, one line per level (saying where the floors
// lift a row a version saved before them holds below them), and the floors.
func (s Service) matrixLines(m risk.Matrix) (rows, floors []string) {
	raised := s.Floors.Raise(m)
	for i, d := range m.Decisions {
		line := fmt.Sprintf("risk %s: %s", d.Level, d.Summary())
		if r := raised.Decisions[i]; r != d {
			line += " (below the floors: runs get " + r.Summary() + ")"
		}
		rows = append(rows, line)
	}
	for cond, class := range s.Floors.Classes {
		floors = append(floors, fmt.Sprintf("%s: at least risk %d", cond, class))
	}
	for level, d := range s.Floors.Decisions {
		floors = append(floors, fmt.Sprintf("risk %s: at least %s", level, d.Summary()))
	}
	sort.Strings(floors)
	return rows, floors
}

// manualChange writes the manual change path's part from the windows and drift checks
// on record and the environments' drift schedules.
func (s Service) manualChange(ctx context.Context, org string, envs []environment.Environment, rep *Report) error {
	since := rep.GeneratedAt.Add(-ManualChangeWindow)
	sum, err := s.Windows.SummaryOf(ctx, org, since, 20)
	if err != nil {
		return err
	}
	drift, err := s.Drift.DriftCounts(ctx, org, since)
	if err != nil {
		return err
	}
	var unchecked []string
	for _, env := range envs {
		if env.DriftIntervalMinutes <= 0 {
			unchecked = append(unchecked, env.Name)
		}
	}
	found := "Drift checks are scheduled in every environment, so a change made by hand outside a window is flagged as unowned drift."
	if len(unchecked) > 0 {
		found = fmt.Sprintf("Drift checks are scheduled in %d of %d environments: in %s a change made by hand outside a window is not looked for between runs (each environment's Manual changes gate).",
			len(envs)-len(unchecked), len(envs), strings.Join(unchecked, ", "))
	}
	rep.ManualChange = fmt.Sprintf("A break-glass window on one workspace is asked for with a reason (%d+ characters, %d minutes to %d hours) and approved by an admin or owner "+
		"who is not the requester, bound to the window's terms digest; the requester opens it within %d minutes of the approval; while it is open no pipeline run of the "+
		"workspace is approved or applied (waiting runs go stale, approved ones expire); its credentials are breakglass-phase workload tokens from %s, write-scoped to "+
		"the workspace, cut at the window's end, shown once and never stored; at its end a drift check runs by itself and the window awaits codification (a gated "+
		"refresh-only run that writes the changed world into state, proven by a drift check finding nothing) or an owner's closing with a reason. %s",
		breakglass.MinReasonLength, int(breakglass.MinDuration.Minutes()), int(breakglass.MaxDuration.Hours()), int(s.ApprovalValidity.Minutes()), s.IssuerURL, found)
	days := int(ManualChangeWindow.Hours() / 24)
	rep.ManualChangeRecord = append(rep.ManualChangeRecord,
		fmt.Sprintf("Last %d days: %s: %d codified, %d closed without codification by an owner or because nothing was left to codify, %d awaiting codification, %d open, %d rejected, cancelled or expired.",
			days, words.Count(sum.Total, "break-glass window", "break-glass windows"), sum.Codified, sum.ClosedUncodified, sum.Awaiting, sum.Open, sum.Refused),
		fmt.Sprintf("Last %d days: %s found unowned drift, %d found drift from a break-glass window, %d found none.",
			days, words.Count(int(drift[runport.DriftUnowned]), "drift check", "drift checks"), drift[runport.DriftExpected], drift[runport.DriftClean]))
	for _, w := range sum.Recent {
		line := fmt.Sprintf("%s (%s): asked for by %s for %d minutes (%s)", w.ID, w.State.Label(), w.RequestedByName, w.DurationMinutes, w.Reason)
		if w.ApprovedByName != "" {
			line += "; approved by " + w.ApprovedByName
		}
		if w.OpenedAt != nil {
			line += fmt.Sprintf("; open %s to %s, %s issued", w.OpenedAt.UTC().Format(time.RFC3339), w.EndsAt.UTC().Format(time.RFC3339), words.Count(w.CredentialsIssued, "credential", "credentials"))
		}
		if w.State.Terminal() {
			line += "; " + w.StateReason
		}
		rep.ManualChangeRecord = append(rep.ManualChangeRecord, line)
	}
	return nil
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	return d
}
