// Package governance writes the governance report (DESIGN §8) from live configuration
// and run history only, never from assumptions: the pipeline gates per environment
// (what each checks, blocking or annotating, which configuration enforces it), the
// approval matrix in force with its floors, the apply identity per environment (the
// workload identity trust path, static credentials as findings), rollback boundaries
// per template, the manual change path, and what a downstream team inherits. A gate no
// configuration establishes reads "unenforced-unknown"; an apply without an approval
// record reads "unevidenced".
package governance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/breakglass"
	"gantry/models/environment"
	"gantry/models/risk"
	"gantry/models/runport"
	"gantry/policies"
)

// Status words of a gate.
const (
	Enforced          = "enforced"
	Annotating        = "annotating"
	UnenforcedUnknown = "unenforced-unknown"
	Unevidenced       = "unevidenced"
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

// Applies counts, per environment, the applies that started with and without an
// approval record (from the audit log).
type Applies interface {
	AppliesByEnvironment(ctx context.Context, orgID string) (map[string]audit.ApplyCount, error)
}

// Gate is one gate of one environment.
type Gate struct {
	Name, Checks, Status, EnforcedBy string
}

// EnvironmentReport is one environment's part.
type EnvironmentReport struct {
	Name, Tier          string
	Gates               []Gate
	ApplyIdentity       string
	Findings            []string
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
	// ManualChange says in a sentence how the manual change path is enforced;
	// ManualChangeRecord what it did (counts, each recent window) and DriftDetection
	// each environment's drift schedule.
	ManualChange       string
	ManualChangeRecord []string
	DriftDetection     []string
	Handoff            []string
}

// Service builds the report.
type Service struct {
	Environments Environments
	Policies     Policies
	Matrix       Matrix
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
	for cond, class := range s.Floors.Classes {
		rep.Floors = append(rep.Floors, fmt.Sprintf("%s: at least risk %d", cond, class))
	}
	for level, d := range s.Floors.Decisions {
		rep.Floors = append(rep.Floors, fmt.Sprintf("risk %s: at least %s", level, d.Summary()))
	}
	sort.Strings(rep.Floors)
	for _, d := range matrix.Matrix.Decisions {
		rep.Matrix = append(rep.Matrix, fmt.Sprintf("risk %s: %s", d.Level, d.Summary()))
	}
	for _, env := range envs {
		modes, err := s.Policies.Modes(ctx, env.ID)
		if err != nil {
			return Report{}, err
		}
		er := EnvironmentReport{Name: env.Name, Tier: string(env.Tier), Restricted: env.Restricted, DecisionWindowHours: env.DecisionWindowHours,
			Executor: env.Executor, Applies: applies[env.ID]}
		approval := Gate{Name: "Approval", Checks: "a person (or the system for self-service risk) approves the exact plan digest before the apply"}
		if env.RequiresApproval {
			approval.Status, approval.EnforcedBy = Enforced, "environment setting requires_approval, approval matrix version "+fmt.Sprint(matrix.Version)
		} else {
			approval.Status, approval.EnforcedBy = UnenforcedUnknown, "no configuration establishes it: requires_approval is off for this environment"
		}
		er.Gates = append(er.Gates, Gate{Name: "Plan", Checks: "OpenTofu plans in an isolated runner; the plan file's sha256 is the evidence", Status: Enforced, EnforcedBy: "the run lifecycle (always)"},
			policyGate(bundle, modes), approval,
			Gate{Name: "Apply binding", Checks: "the apply runs only the approved plan digest against the predecessor state it was planned on", Status: Enforced, EnforcedBy: "the apply worker's re-checks (always)"},
			Gate{Name: "Verification", Checks: "a refresh-only plan after the apply must show no changes", Status: Enforced, EnforcedBy: "the run lifecycle (always)"})
		var finding string
		er.ApplyIdentity, finding = s.applyIdentity(creds[env.ID])
		if finding != "" {
			er.Findings = append(er.Findings, finding)
		}
		if er.Applies.Unevidenced > 0 {
			er.Findings = append(er.Findings, fmt.Sprintf("%s: %d applies started without an approval record", Unevidenced, er.Applies.Unevidenced))
		}
		rep.Environments = append(rep.Environments, er)
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
	rep.Handoff = []string{
		"Apply identities: " + map[bool]string{true: fmt.Sprintf("%d environments hold standing static credentials (findings above)", standing), false: "workload identity only; no standing credentials"}[standing > 0] + ".",
		"Policy is evaluated by Gantry at plan time and again before every apply (bundle digest " + bundle.Digest() + ").",
		"Manual change path: break-glass windows, approved by another admin and codified through a gated run (see above); " + rep.ManualChangeRecord[0],
		fmt.Sprintf("Rollback boundaries: %d templates, see above.", len(rep.Rollback)),
	}
	return rep, nil
}

// applyIdentity says what an environment's jobs authenticate to the cloud with, per
// phase (the rule of runner.jobCredentials.cloudToken: applies get the static write
// credential, plans and verifications the static read credential, never the write one;
// a workload identity token otherwise), and the standing-credential finding when it
// holds a static credential: one finding naming each key and since when.
func (s Service) applyIdentity(st environment.Standing) (identity, finding string) {
	workload := "workload identity (a short-lived token per run phase from " + s.IssuerURL + ", scoped to the organization, environment, workspace, run and phase)"
	if !st.Any() {
		return "workload identity: a short-lived token per run phase from " + s.IssuerURL + ", scoped to the organization, environment, workspace, run and phase", ""
	}
	applies, reads := workload, "read-scoped "+workload
	var held []string
	if st.WriteSetAt != nil {
		applies = "a static write credential (standing access), set " + st.WriteSetAt.UTC().Format("2006-01-02")
		held = append(held, "a static write credential (used by applies) has been set on this environment since "+st.WriteSetAt.UTC().Format(time.RFC3339))
	}
	if st.ReadSetAt != nil {
		reads = "a static read credential (standing access), set " + st.ReadSetAt.UTC().Format("2006-01-02")
		held = append(held, "a static read credential (used by plans and verifications) has been set on this environment since "+st.ReadSetAt.UTC().Format(time.RFC3339))
	}
	identity = "applies: " + applies + "; plans and verifications: " + reads + " (never the write credential)"
	return identity, "standing credential: " + strings.Join(held, "; ") + "; workload identity should replace " + map[bool]string{true: "them", false: "it"}[len(held) > 1]
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
	rep.ManualChange = fmt.Sprintf("%s: a break-glass window on one workspace is asked for with a reason (%d+ characters, %d minutes to %d hours) and approved by an admin or owner "+
		"who is not the requester, bound to the window's terms digest; the requester opens it within %d minutes of the approval; while it is open no pipeline run of the "+
		"workspace is approved or applied (waiting runs go STALE, approved ones EXPIRED); its credentials are breakglass-phase workload tokens from %s, write-scoped to "+
		"the workspace, cut at the window's end, shown once and never stored; at its end a drift check runs by itself and the window awaits codification (a gated "+
		"refresh-only run that writes the changed world into state, proven by a drift check finding nothing) or an owner's closing with a reason. Drift nobody on "+
		"record made is flagged unowned and notified to admins and owners.",
		Enforced, breakglass.MinReasonLength, int(breakglass.MinDuration.Minutes()), int(breakglass.MaxDuration.Hours()), int(s.ApprovalValidity.Minutes()), s.IssuerURL)
	days := int(ManualChangeWindow.Hours() / 24)
	rep.ManualChangeRecord = append(rep.ManualChangeRecord,
		fmt.Sprintf("Last %d days: %d break-glass windows: %d codified, %d closed without codification by an owner or because nothing was left to codify, %d awaiting codification, %d open, %d rejected, cancelled or expired.",
			days, sum.Total, sum.Codified, sum.ClosedUncodified, sum.Awaiting, sum.Open, sum.Refused),
		fmt.Sprintf("Last %d days: %d drift checks found unowned drift, %d found drift from a break-glass window, %d found none.",
			days, drift[runport.DriftUnowned], drift[runport.DriftExpected], drift[runport.DriftClean]))
	for _, w := range sum.Recent {
		line := fmt.Sprintf("%s (%s): asked for by %s for %d minutes (%s)", w.ID, w.State.Label(), w.RequestedByName, w.DurationMinutes, w.Reason)
		if w.ApprovedByName != "" {
			line += "; approved by " + w.ApprovedByName
		}
		if w.OpenedAt != nil {
			line += fmt.Sprintf("; open %s to %s, %d credentials issued", w.OpenedAt.UTC().Format(time.RFC3339), w.EndsAt.UTC().Format(time.RFC3339), w.CredentialsIssued)
		}
		if w.State.Terminal() {
			line += "; " + w.StateReason
		}
		rep.ManualChangeRecord = append(rep.ManualChangeRecord, line)
	}
	for _, env := range envs {
		schedule := "off (no scheduled drift check: " + UnenforcedUnknown + " between runs)"
		if env.DriftIntervalMinutes > 0 {
			schedule = fmt.Sprintf("every %d minutes (a refresh-only plan of each workspace, run once across replicas)", env.DriftIntervalMinutes)
		}
		rep.DriftDetection = append(rep.DriftDetection, env.Name+": "+schedule)
	}
	return nil
}

// policyGate is the policy gate under an environment's modes: blocking when any rule
// is hard- or soft-mandatory there, annotating when all are advisory.
func policyGate(b *policies.Bundle, modes map[string]policies.Enforcement) Gate {
	g := Gate{Name: "Policy", Checks: fmt.Sprintf("%d rules (bundle %s) over the plan", len(b.Rules()), short(b.Digest()))}
	var blocking, advisory []string
	for _, r := range b.Rules() {
		mode := r.Enforcement
		if m, ok := modes[r.ID]; ok {
			mode = m
		}
		if mode == policies.HardMandatory || mode == policies.SoftMandatory {
			blocking = append(blocking, r.ID+" ("+string(mode)+")")
		} else {
			advisory = append(advisory, r.ID)
		}
	}
	switch {
	case len(b.Rules()) == 0:
		g.Status, g.EnforcedBy = UnenforcedUnknown, "no policy rule is loaded"
	case len(blocking) == 0:
		g.Status, g.EnforcedBy = Annotating, "every rule is advisory in this environment"
	default:
		g.Status, g.EnforcedBy = Enforced, "blocking: "+strings.Join(blocking, ", ")
		if len(advisory) > 0 {
			g.EnforcedBy += "; advisory: " + strings.Join(advisory, ", ")
		}
	}
	return g
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	return d
}

// Markdown is the report as a Markdown document.
func (r Report) Markdown(org string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Governance report: %s\n\nGenerated %s from live configuration and run history.\n\n", org, r.GeneratedAt.Format(time.RFC3339))
	b.WriteString("## Pipeline gates per environment\n\n")
	for _, e := range r.Environments {
		fmt.Fprintf(&b, "### %s (%s)\n\n| Gate | Checks | Status | Enforced by |\n|---|---|---|---|\n", e.Name, e.Tier)
		for _, g := range e.Gates {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Name, g.Checks, g.Status, g.EnforcedBy)
		}
		fmt.Fprintf(&b, "\nApply identity: %s. Applies: %d (%d unevidenced).\n\n", e.ApplyIdentity, e.Applies.Applied, e.Applies.Unevidenced)
		for _, f := range e.Findings {
			fmt.Fprintf(&b, "- **Finding:** %s\n", f)
		}
		if len(e.Findings) > 0 {
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "## Approval matrix in force (version %d)\n\n", r.MatrixVersion)
	for _, l := range r.Matrix {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString("\nFloors no matrix can lower:\n\n")
	for _, l := range r.Floors {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString("\n## Rollback boundaries per template\n\n")
	for _, l := range r.Rollback {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	fmt.Fprintf(&b, "\n## Manual change path\n\n%s\n\n", r.ManualChange)
	for _, l := range r.ManualChangeRecord {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString("\nDrift detection per environment:\n\n")
	for _, l := range r.DriftDetection {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString("\n## Downstream handoff\n\n")
	for _, l := range r.Handoff {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	return b.String()
}
