package run

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/classify"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/risk"
	"gantry/policies"
)

// The decision table of issue 9 again, asked of PermissionsOf alone (issue 33): plain
// runs built in Go, no database, milliseconds. It is the pure twin of
// web/decisions_table_test.go's decisionTable: every row there has a row here with the
// same name and the same codes, and where that table looks at a page (the approve,
// reject, override and cancel controls, "Sign in again to decide", plan again, 404) this
// one asserts the Permissions field that draws it. That table stays as the end-to-end
// proof (real runs on PostgreSQL, the services, the pages, the inbox); this one says in
// milliseconds which rule a change broke.
//
// The runs are planned as planning plans them (Plans.FinishPlan without its
// transaction): a bucket plan classified with the template's facts, assessed under a
// matrix raised to the floors (assessRisk), recorded as Plans.record records it and
// routed by route, which applies codifyFloor. So removing a floor from Floors, or
// breaking codifyFloor, changes what these runs require and fails rows here
// (TestFloorsHold has the rows where only one floor holds).

// okCode is an allowed verdict; anything else is the refusal's code.
const okCode = errs.Code("OK")

const (
	forbidden     = errs.CodeForbidden
	notFound      = errs.CodeNotFound
	conflict      = errs.CodeConflict
	staleEvidence = errs.CodeStaleEvidence
	expired       = errs.CodeApprovalExpired
)

// verdicts is what each decision answers for one row.
type verdicts struct{ approve, reject, override, cancel errs.Code }

// all is the same answer for every decision.
func all(c errs.Code) verdicts { return verdicts{c, c, c, c} }

// actor is the person deciding, as in the HTTP table: a member with exactly these facts.
type actor struct {
	role      authz.Role
	requester bool     // the run was requested by this person
	grant     bool     // an explicit grant on the run's environment
	owner     bool     // named (as a user) owner of the run's environment
	groups    []string // the ID token's groups
	cloudLive bool
	staleAuth bool // signed in an hour ago (not fresh enough for risk 3)
	// maker: made the changes a codification accepts (one of the run's
	// PriorRequesters); only TestFloorsHold's codification rows use it.
	maker bool
	// overrider: overrode the run's soft policy failure (Actor.Overrode); only
	// TestOverriderDoesNotApprove's rows use it.
	overrider bool
}

type decisionRow struct {
	name     string
	scenario string // a planned run, see decisionScenarios
	who      actor
	want     verdicts
	// reauth: approving (or overriding) is refused only for the old sign-in
	// (Permissions.FreshSignIn); the page offers "Sign in again to decide".
	reauth bool
}

// decisionTable is web/decisions_table_test.go's decisionTable, row for row.
var decisionTable = []decisionRow{
	// Risk 1 in a protected environment (staging): one approver with provisioning.apply,
	// not the requester.
	{"r1p viewer", "r1-protected", actor{role: authz.RoleViewer}, all(forbidden), false},
	{"r1p auditor", "r1-protected", actor{role: authz.RoleAuditor}, all(forbidden), false},
	{"r1p operator", "r1-protected", actor{role: authz.RoleOperator}, verdicts{okCode, okCode, forbidden, forbidden}, false},
	{"r1p operator requester", "r1-protected", actor{role: authz.RoleOperator, requester: true}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	{"r1p admin", "r1-protected", actor{role: authz.RoleAdmin}, verdicts{okCode, okCode, conflict, okCode}, false},
	{"r1p owner", "r1-protected", actor{role: authz.RoleOwner}, verdicts{okCode, okCode, conflict, okCode}, false},
	// Risk 1 outside protected environments (development): self-service, already approved.
	{"r1 admin", "r1-self-service", actor{role: authz.RoleAdmin}, verdicts{conflict, conflict, conflict, okCode}, false},
	{"r1 operator requester", "r1-self-service", actor{role: authz.RoleOperator, requester: true}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	// Risk 2 (any change in production, a floor): an admin or owner, not the requester.
	{"r2 operator", "r2-production", actor{role: authz.RoleOperator}, verdicts{forbidden, forbidden, forbidden, forbidden}, false},
	{"r2 admin", "r2-production", actor{role: authz.RoleAdmin}, verdicts{okCode, okCode, conflict, okCode}, false},
	{"r2 owner", "r2-production", actor{role: authz.RoleOwner}, verdicts{okCode, okCode, conflict, okCode}, false},
	{"r2 admin requester", "r2-production", actor{role: authz.RoleAdmin, requester: true}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	// Risk 3 (a destroy): an owner, freshly signed in, never the requester.
	{"r3 admin", "r3-destroy", actor{role: authz.RoleAdmin}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	{"r3 owner fresh", "r3-destroy", actor{role: authz.RoleOwner}, verdicts{okCode, okCode, conflict, okCode}, false},
	{"r3 owner stale sign-in", "r3-destroy", actor{role: authz.RoleOwner, staleAuth: true}, verdicts{forbidden, okCode, conflict, okCode}, true},
	{"r3 owner requester", "r3-destroy", actor{role: authz.RoleOwner, requester: true}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	// A soft policy block: an admin overrides; rejection needs what approving needs.
	{"soft admin", "soft-block", actor{role: authz.RoleAdmin}, verdicts{conflict, okCode, okCode, okCode}, false},
	{"soft operator", "soft-block", actor{role: authz.RoleOperator}, verdicts{conflict, okCode, forbidden, forbidden}, false},
	{"soft operator requester", "soft-block", actor{role: authz.RoleOperator, requester: true}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	{"soft admin requester", "soft-block", actor{role: authz.RoleAdmin, requester: true}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	// A soft block on a risk-3 plan: overriding needs what approving it would (an owner,
	// freshly signed in, not the requester).
	{"soft r3 admin", "soft-block-r3", actor{role: authz.RoleAdmin}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	{"soft r3 owner fresh", "soft-block-r3", actor{role: authz.RoleOwner}, verdicts{conflict, okCode, okCode, okCode}, false},
	{"soft r3 owner stale sign-in", "soft-block-r3", actor{role: authz.RoleOwner, staleAuth: true}, verdicts{conflict, okCode, forbidden, okCode}, true},
	// Floors under a matrix loosened below them (saved before the floors existed):
	// destroys stay risk 3 and production changes risk 2.
	{"floor destroy admin", "floor-destroy", actor{role: authz.RoleAdmin}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	{"floor destroy owner", "floor-destroy", actor{role: authz.RoleOwner}, verdicts{okCode, okCode, conflict, okCode}, false},
	{"floor destroy owner stale", "floor-destroy", actor{role: authz.RoleOwner, staleAuth: true}, verdicts{forbidden, okCode, conflict, okCode}, true},
	// The data-loss floor alone: a bucket replaced (its region changed) under a matrix
	// that makes replaces, destroys and data loss risk 1.
	{"floor replace admin", "floor-replace", actor{role: authz.RoleAdmin}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	{"floor replace owner", "floor-replace", actor{role: authz.RoleOwner}, verdicts{okCode, okCode, conflict, okCode}, false},
	{"floor replace owner stale", "floor-replace", actor{role: authz.RoleOwner, staleAuth: true}, verdicts{forbidden, okCode, conflict, okCode}, true},
	{"floor production operator", "floor-production", actor{role: authz.RoleOperator}, verdicts{forbidden, forbidden, forbidden, forbidden}, false},
	{"floor production admin", "floor-production", actor{role: authz.RoleAdmin}, verdicts{okCode, okCode, conflict, okCode}, false},
	// Named owners of the environment decide risk 2 (users or groups); admins after 4 h.
	{"owners group member", "named-owners", actor{role: authz.RoleOperator, groups: []string{"qa-leads"}}, verdicts{okCode, okCode, forbidden, forbidden}, false},
	{"owners named user", "named-owners", actor{role: authz.RoleOperator, owner: true}, verdicts{okCode, okCode, forbidden, forbidden}, false},
	{"owners other operator", "named-owners", actor{role: authz.RoleOperator, groups: []string{"developers"}}, all(forbidden), false},
	{"owners viewer in group", "named-owners", actor{role: authz.RoleViewer, groups: []string{"qa-leads"}}, all(forbidden), false},
	{"owners owner before escalation", "named-owners", actor{role: authz.RoleOwner}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	{"owners admin before escalation", "named-owners", actor{role: authz.RoleAdmin}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	{"owners member requester", "named-owners", actor{role: authz.RoleOperator, groups: []string{"qa-leads"}, requester: true}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	{"escalated admin", "escalated", actor{role: authz.RoleAdmin}, verdicts{okCode, okCode, conflict, okCode}, false},
	{"escalated operator", "escalated", actor{role: authz.RoleOperator}, verdicts{forbidden, forbidden, forbidden, forbidden}, false},
	{"escalated group member", "escalated", actor{role: authz.RoleOperator, groups: []string{"qa-leads"}}, verdicts{okCode, okCode, forbidden, forbidden}, false},
	// Without four eyes (the owners' choice at risk 1) the requester approves her own
	// run, but a rejection is always someone else's.
	{"two eyes requester", "no-four-eyes", actor{role: authz.RoleOperator, requester: true}, verdicts{okCode, forbidden, forbidden, okCode}, false},
	{"two eyes operator", "no-four-eyes", actor{role: authz.RoleOperator}, verdicts{okCode, okCode, forbidden, forbidden}, false},
	// A restricted environment: without a grant the run does not exist (404 beats 403);
	// admins, owners and auditors see it.
	{"restricted operator no grant", "restricted", actor{role: authz.RoleOperator}, all(notFound), false},
	{"restricted viewer no grant", "restricted", actor{role: authz.RoleViewer}, all(notFound), false},
	{"restricted operator grant", "restricted", actor{role: authz.RoleOperator, grant: true}, verdicts{okCode, okCode, forbidden, forbidden}, false},
	{"restricted auditor", "restricted", actor{role: authz.RoleAuditor}, all(forbidden), false},
	{"restricted admin", "restricted", actor{role: authz.RoleAdmin}, verdicts{okCode, okCode, conflict, okCode}, false},
	// A live executor: approving needs cloud.live; rejecting and cancelling do not.
	{"live operator without cloud.live", "live", actor{role: authz.RoleOperator}, verdicts{forbidden, okCode, forbidden, forbidden}, false},
	{"live operator with cloud.live", "live", actor{role: authz.RoleOperator, cloudLive: true}, verdicts{okCode, okCode, forbidden, forbidden}, false},
	{"live requester without cloud.live", "live", actor{role: authz.RoleOperator, requester: true}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	// The clocks and the state: a decision after the deadline expires the run; a STALE
	// run is stale evidence for every decision.
	{"deadline passed admin", "deadline-passed", actor{role: authz.RoleAdmin}, verdicts{expired, expired, conflict, okCode}, false},
	{"soft deadline passed admin", "soft-deadline-passed", actor{role: authz.RoleAdmin}, verdicts{conflict, expired, expired, okCode}, false},
	{"stale admin", "stale", actor{role: authz.RoleAdmin}, verdicts{staleEvidence, staleEvidence, staleEvidence, staleEvidence}, false},
}

// t0 is the database clock of every decision here; runs are planned a minute before.
var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

const (
	tableOrg       = "org-1"
	tableRequester = "usr-rita" // an operator who requests every run, as in the HTTP table
)

// The environments of the HTTP table's organization: staging is protected (as the demo
// seeds it), production has the named owner group the named-owners scenario gives it
// (at decision time every production run sees it there too), secure is restricted.
var (
	devEnv = environment.Environment{ID: "env-dev", OrganizationID: tableOrg, Name: "development",
		Tier: environment.TierDevelopment}
	stagingEnv = environment.Environment{ID: "env-staging", OrganizationID: tableOrg, Name: "staging",
		Tier: environment.TierStaging, RequiresApproval: true}
	productionEnv = environment.Environment{ID: "env-production", OrganizationID: tableOrg, Name: "production",
		Tier: environment.TierProduction, RequiresApproval: true, OwnerGroups: []string{"qa-leads"}}
	secureEnv = environment.Environment{ID: "env-secure", OrganizationID: tableOrg, Name: "secure",
		Tier: environment.TierStaging, RequiresApproval: true, Restricted: true}
)

// bucketFacts are the bucket template's facts: its bucket holds data, so replacing or
// destroying it is irreversible (catalog/templates/bucket/template.yaml).
var bucketFacts = TemplateFacts{Irreversible: []string{"sandbox_bucket"}}

// looseMatrix is a matrix saved before the floors existed: destroys, replaces, data
// loss and production risk 1 (so self-service outside protected environments), risk 3
// by an admin without elevation or four eyes. The store refuses it now.
func looseMatrix() risk.Matrix {
	m := risk.Default()
	for i := range m.Rules {
		switch m.Rules[i].Condition {
		case risk.CondDestroy, risk.CondProduction, risk.CondIrreversible, risk.CondReplace:
			m.Rules[i].Class = 1
		}
	}
	for i := range m.Decisions {
		if m.Decisions[i].Level == risk.Level3 {
			m.Decisions[i] = risk.Decision{Level: risk.Level3, Approver: risk.ApproverAdmin}
		}
	}
	return m
}

// namedMatrix has risk 2 decided by the environment's named owners, admins after 4 h,
// and risk 1 in protected environments without four eyes.
func namedMatrix() risk.Matrix {
	m := risk.Default()
	for i := range m.Decisions {
		switch m.Decisions[i].Level {
		case risk.Level2:
			m.Decisions[i].Approver, m.Decisions[i].Escalation, m.Decisions[i].EscalateAfterHours = risk.ApproverEnvOwners, risk.ApproverAdmin, 4
		case risk.Level1Protected:
			m.Decisions[i].FourEyes = false
		}
	}
	return m
}

// planning is what a run is planned from.
type planning struct {
	env     environment.Environment
	matrix  risk.Matrix
	kind    Kind
	actions []string // the plan's resource changes, as planWith takes them
	facts   TemplateFacts
	// softFailed: a soft-mandatory policy failed, so the run waits for an override.
	softFailed bool
}

// planned is the run p plans, as Plans.FinishPlan leaves it: classified, assessed
// under the matrix raised to the floors, recorded (the fields Plans.record sets) and
// routed, or held by a soft policy block. The requester is tableRequester.
func planned(t *testing.T, p planning) Run {
	t.Helper()
	planJSON := planWith(p.actions...)
	res, err := classify.Classify(planJSON, p.facts.ClassifyOptions())
	require.NoError(t, err)
	summary, err := SummarizePlan(planJSON)
	require.NoError(t, err)
	r := Run{ID: "run-1", OrganizationID: tableOrg, WorkspaceID: "ws-1", EnvironmentID: p.env.ID, Number: 1, Kind: p.kind,
		State: Planning, RequestedBy: tableRequester, RequestedByName: "Rita Requester", Simulated: true,
		PlanSummary: summary, PlanDigest: "sha256:plan"}
	a := assessRisk(p.matrix, factsOf(r, p.env, res, p.facts))
	class := int(a.Class)
	r.RiskClass, r.RiskLevel, r.RiskRule, r.RiskReason = &class, string(a.Level), a.Rule.ID, a.Reason
	d := a.Decision
	r.RequiredApprover, r.FourEyes, r.Elevated = string(d.Approver), d.FourEyes, d.Elevated
	r.Escalation, r.EscalateAfterMinutes = string(d.Escalation), d.EscalateAfterHours*60
	at := t0.Add(-time.Minute)
	if p.softFailed {
		r.PolicyOutcome = string(policies.OutcomeSoft)
		r.waitFor(decisionWindow(p.env), at)
		require.NoError(t, r.FinishPlanAs(PolicyBlocked, "", "blocked by soft-mandatory policy database_protection"))
		return r
	}
	r.PolicyOutcome = string(policies.OutcomePass)
	require.NoError(t, route(&r, p.env, at, a.Reason))
	return r
}

// scenario is a planned run and the environment it is decided in.
type scenario struct {
	run Run
	env environment.Environment
}

// decisionScenarios are the HTTP table's template runs, each changed as its clone is
// there (web/decisions_table_test.go, newDecisionFixture and clone).
func decisionScenarios(t *testing.T) map[string]scenario {
	t.Helper()
	bucket := func(env environment.Environment, m risk.Matrix, kind Kind, actions ...string) scenario {
		return scenario{planned(t, planning{env: env, matrix: m, kind: kind, actions: actions, facts: bucketFacts}), env}
	}
	create, destroy, replace := `["create"]`, `["delete"]`, `["delete","create"]`
	out := map[string]scenario{
		"r1-protected":    bucket(stagingEnv, risk.Default(), KindApply, create),
		"r1-self-service": bucket(devEnv, risk.Default(), KindApply, create),
		"r2-production":   bucket(productionEnv, risk.Default(), KindApply, create),
		"r3-destroy":      bucket(stagingEnv, risk.Default(), KindDestroy, destroy),
		"restricted":      bucket(secureEnv, risk.Default(), KindApply, create),
		// A database whose backups are off: the database_protection rule (soft) fails.
		"soft-block": {planned(t, planning{env: stagingEnv, matrix: risk.Default(), kind: KindApply,
			actions: []string{create}, softFailed: true}), stagingEnv},
		"floor-destroy":    bucket(stagingEnv, looseMatrix(), KindDestroy, destroy),
		"floor-production": bucket(productionEnv, looseMatrix(), KindApply, create),
		// The bucket's region changed: it is replaced, and its objects go.
		"floor-replace": bucket(stagingEnv, looseMatrix(), KindApply, replace),
		"named-owners":  bucket(productionEnv, namedMatrix(), KindApply, create),
		"no-four-eyes":  bucket(stagingEnv, namedMatrix(), KindApply, create),
	}
	change := func(from string, f func(r *Run)) scenario {
		s := out[from]
		f(&s.run)
		return s
	}
	out["live"] = change("r1-protected", func(r *Run) { r.Simulated = false })
	out["deadline-passed"] = change("r1-protected", func(r *Run) { r.DecisionDeadline = ptr(t0.Add(-time.Minute)) })
	out["stale"] = change("r1-protected", func(r *Run) { r.State, r.StateReason = Stale, "the workspace state moved" })
	out["soft-deadline-passed"] = change("soft-block", func(r *Run) { r.DecisionDeadline = ptr(t0.Add(-time.Minute)) })
	// Policies and risk are independent: the same soft block on a plan at risk 3, with
	// what planning writes for one.
	out["soft-block-r3"] = change("soft-block", func(r *Run) {
		r.RiskLevel, r.RiskClass, r.RequiredApprover, r.FourEyes, r.Elevated = "3", ptr(3), string(risk.ApproverOwner), true, true
	})
	out["escalated"] = change("named-owners", func(r *Run) { r.WaitingSince = ptr(t0.Add(-5 * time.Hour)) })
	return out
}

// decideRow asks PermissionsOf what row.who may do to the row's run and checks every
// verdict and the fields that draw the pages' controls.
func decideRow(t *testing.T, row decisionRow, s scenario) {
	t.Helper()
	r, env := s.run, s.env
	who := Actor{Subject: authz.Subject{UserID: "usr-" + strings.ReplaceAll(row.name, " ", "-"), Name: row.name,
		OrganizationID: tableOrg, Role: row.who.role, AuthenticatedAt: t0},
		Granted: row.who.grant, CloudLive: row.who.cloudLive, Groups: row.who.groups, Overrode: row.who.overrider}
	if row.who.staleAuth {
		who.AuthenticatedAt = t0.Add(-time.Hour)
	}
	if row.who.requester {
		r.RequestedBy, r.RequestedByName = who.UserID, who.Name
	}
	if row.who.maker {
		r.PriorRequesters = append(slices.Clone(r.PriorRequesters), who.UserID)
	}
	if row.who.owner {
		env.Owners = append(slices.Clone(env.Owners), who.UserID)
	}

	p := PermissionsOf(r, who, env, t0)
	got := verdicts{verdictCode(p.Approve), verdictCode(p.Reject), verdictCode(p.Override), verdictCode(p.Cancel)}
	require.Equal(t, row.want, got, "%s: approve %q, reject %q, override %q, cancel %q", row.name,
		p.Approve.Reason(), p.Reject.Reason(), p.Override.Reason(), p.Cancel.Reason())
	// What the pages draw from the same Permissions: the run at all (404), "Sign in
	// again to decide", and plan again (only a run that ended without applying).
	require.Equal(t, row.want != all(notFound), p.Visible, "%s: visible", row.name)
	require.Equal(t, row.reauth, p.FreshSignIn, "%s: sign in again", row.name)
	require.Equal(t, r.State == Stale, p.PlanAgain.Allowed(), "%s: plan again: %s", row.name, p.PlanAgain.Reason())
}

func verdictCode(v Verdict) errs.Code {
	if v.Allowed() {
		return okCode
	}
	return v.Code()
}

// TestPermissionsOfDecisionTable is the HTTP decision table without HTTP or a database.
func TestPermissionsOfDecisionTable(t *testing.T) {
	t.Parallel()
	scenarios := decisionScenarios(t)
	covered := map[string]bool{}
	for _, row := range decisionTable {
		s, ok := scenarios[row.scenario]
		require.True(t, ok, "row %s: no scenario %s", row.name, row.scenario)
		covered[row.scenario] = true
		t.Run(row.name, func(t *testing.T) { decideRow(t, row, s) })
	}
	for name := range scenarios {
		require.True(t, covered[name], "scenario %s has no row", name)
	}

	// Every row of the default matrix is in the table, as the HTTP table checks.
	require.Equal(t, "1", scenarios["r1-self-service"].run.RiskLevel)
	require.Equal(t, Approved, scenarios["r1-self-service"].run.State)
	require.Equal(t, "self-service", scenarios["r1-self-service"].run.ApprovalKind)
	require.Equal(t, "1-protected", scenarios["r1-protected"].run.RiskLevel)
	require.Equal(t, "2", scenarios["r2-production"].run.RiskLevel)
	require.Equal(t, "3", scenarios["r3-destroy"].run.RiskLevel)
	// The loosened matrix really is below the floors (the store would refuse it), and
	// the floors held under it.
	require.Error(t, Floors.Check(looseMatrix()))
	require.Equal(t, "3", scenarios["floor-destroy"].run.RiskLevel)
	require.Equal(t, "2", scenarios["floor-production"].run.RiskLevel)
	require.Equal(t, "3", scenarios["floor-replace"].run.RiskLevel)
	require.Equal(t, 1, scenarios["floor-replace"].run.PlanSummary.Replace, "the floor-replace plan replaces the bucket")
	require.Zero(t, scenarios["floor-replace"].run.PlanSummary.Delete)
	// Who may decide, for the review page: the escalation took effect only after 4 h.
	admin := Actor{Subject: authz.Subject{UserID: "usr-admin", OrganizationID: tableOrg, Role: authz.RoleAdmin, AuthenticatedAt: t0}}
	waiting := scenarios["named-owners"].run
	before := PermissionsOf(waiting, admin, productionEnv, t0).Deciders
	require.False(t, before.Escalated)
	require.Equal(t, waiting.WaitingSince.Add(4*time.Hour), *before.EscalatesAt)
	require.True(t, PermissionsOf(scenarios["escalated"].run, admin, productionEnv, t0).Deciders.Escalated)
}

// TestFloorsHold: runs where one floor alone keeps the decision where DESIGN §3 puts
// it, so that removing that floor from Floors (or breaking codifyFloor) fails a row.
// Outside protected environments the loosened matrix makes risk 1 self-service: without
// the floor the run would be approved by the system (CONFLICT for everyone) instead of
// waiting for an owner. A destroy also meets RequirementOf's own check (a destroy run
// is decided as risk 3 whatever it recorded), so what planning recorded is asserted
// too: that is where the destroy floor and the level-3 decision's four eyes and
// elevation show.
func TestFloorsHold(t *testing.T) {
	t.Parallel()
	loose := looseMatrix()
	scenarios := decisionScenarios(t)
	for name, p := range map[string]planning{
		// A destroy of a resource that holds no data: only the destroy floor applies.
		"destroy-development": {env: devEnv, matrix: loose, kind: KindDestroy, actions: []string{`["delete"]`}},
		// A data-bearing bucket replaced: only the irreversible-loss floor applies.
		"replace-development": {env: devEnv, matrix: loose, kind: KindApply, actions: []string{`["delete","create"]`}, facts: bucketFacts},
		// Accepting hand-made changes, small enough for self-service under the default
		// matrix: codifyFloor makes it an operator's, never the maker's.
		"codify-development": {env: devEnv, matrix: risk.Default(), kind: KindCodify, actions: []string{`["update"]`}},
	} {
		scenarios[name] = scenario{planned(t, p), p.env}
	}

	// What planning recorded: the floors' level and decision, not the loosened matrix's.
	// Each is a subtest, so a broken floor also reaches the rows below.
	for _, want := range []struct {
		scenario string
		level    string
		approver risk.Approver
		fourEyes bool
		elevated bool
	}{
		{"floor-destroy", "3", risk.ApproverOwner, true, true},
		{"floor-replace", "3", risk.ApproverOwner, true, true},
		{"floor-production", "2", risk.ApproverAdmin, true, false},
		{"destroy-development", "3", risk.ApproverOwner, true, true},
		{"replace-development", "3", risk.ApproverOwner, true, true},
		{"codify-development", "1", risk.ApproverOperator, true, false},
	} {
		t.Run("recorded "+want.scenario, func(t *testing.T) {
			r := scenarios[want.scenario].run
			require.Equal(t, PendingApproval, r.State, "waits for a person (%s)", r.StateReason)
			require.Equal(t, want.level, r.RiskLevel, r.RiskReason)
			require.Equal(t, string(want.approver), r.RequiredApprover, "approver")
			require.Equal(t, want.fourEyes, r.FourEyes, "four eyes")
			require.Equal(t, want.elevated, r.Elevated, "elevated")
		})
	}

	for _, row := range []decisionRow{
		{"destroy dev admin", "destroy-development", actor{role: authz.RoleAdmin}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
		{"destroy dev owner", "destroy-development", actor{role: authz.RoleOwner}, verdicts{okCode, okCode, conflict, okCode}, false},
		{"destroy dev owner stale", "destroy-development", actor{role: authz.RoleOwner, staleAuth: true}, verdicts{forbidden, okCode, conflict, okCode}, true},
		{"destroy dev owner requester", "destroy-development", actor{role: authz.RoleOwner, requester: true}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
		{"replace dev admin", "replace-development", actor{role: authz.RoleAdmin}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
		{"replace dev owner", "replace-development", actor{role: authz.RoleOwner}, verdicts{okCode, okCode, conflict, okCode}, false},
		{"replace dev owner stale", "replace-development", actor{role: authz.RoleOwner, staleAuth: true}, verdicts{forbidden, okCode, conflict, okCode}, true},
		{"codify operator", "codify-development", actor{role: authz.RoleOperator}, verdicts{okCode, okCode, forbidden, forbidden}, false},
		{"codify maker", "codify-development", actor{role: authz.RoleOperator, maker: true}, verdicts{forbidden, forbidden, forbidden, forbidden}, false},
		{"codify requester", "codify-development", actor{role: authz.RoleOperator, requester: true}, verdicts{forbidden, forbidden, forbidden, okCode}, false},
	} {
		t.Run(row.name, func(t *testing.T) { decideRow(t, row, scenarios[row.scenario]) })
	}
}

// TestHardBlockIsRejectedWithAReason: a run a hard-mandatory policy blocked is final,
// but a person who decides runs may reject it with a reason (DESIGN §2; seed 004: "a
// closed policy gate still permits rejection"), never approve or override it; in a
// self-service environment an operator who is not the requester may, as RequirementOf
// asks of any run that waits for a person there.
func TestHardBlockIsRejectedWithAReason(t *testing.T) {
	t.Parallel()
	hard := func(env environment.Environment) scenario {
		r := planned(t, planning{env: env, matrix: risk.Default(), kind: KindApply, actions: []string{`["create"]`}, facts: bucketFacts})
		r.State, r.PolicyOutcome, r.Ending = PolicyBlocked, string(policies.OutcomeHard), EndPolicyHardBlocked
		r.ApprovedBy, r.ApprovedByName, r.ApprovedAt, r.ApprovalKind, r.ApprovalExpiresAt, r.DecisionDeadline = nil, "", nil, "", nil, nil
		return scenario{r, env}
	}
	dev, staging := hard(devEnv), hard(stagingEnv)
	for _, c := range []struct {
		row decisionRow
		s   scenario
	}{
		{decisionRow{name: "hard dev operator", who: actor{role: authz.RoleOperator}, want: verdicts{conflict, okCode, forbidden, forbidden}}, dev},
		{decisionRow{name: "hard dev admin", who: actor{role: authz.RoleAdmin}, want: verdicts{conflict, okCode, forbidden, conflict}}, dev},
		{decisionRow{name: "hard dev viewer", who: actor{role: authz.RoleViewer}, want: all(forbidden)}, dev},
		{decisionRow{name: "hard dev operator requester", who: actor{role: authz.RoleOperator, requester: true}, want: verdicts{forbidden, forbidden, forbidden, conflict}}, dev},
		{decisionRow{name: "hard staging operator", who: actor{role: authz.RoleOperator}, want: verdicts{conflict, okCode, forbidden, forbidden}}, staging},
		{decisionRow{name: "hard staging auditor", who: actor{role: authz.RoleAuditor}, want: all(forbidden)}, staging},
	} {
		decideRow(t, c.row, c.s)
	}
}
