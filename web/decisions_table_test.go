package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/risk"
	"gantry/models/run"
)

// The decision table of issue 9 (DESIGN §3, §4): who may approve, reject, override and
// cancel which run, asked of the services on real PostgreSQL with real runs, and the
// same table drawn as the review and run pages, which must show exactly the allowed
// controls. The dimensions: risk 1 to 3 (every row of the default matrix), protected or
// not, restricted or not, role, the decider being the requester, a grant, a named owner,
// escalation elapsed, a fresh sign-in, cloud.live, and the floors under a loosened matrix.

// ok is an allowed decision; anything else is the refusal's code.
const ok = errs.Code("OK")

// want is what each action answers for one row.
type want struct{ approve, reject, override, cancel errs.Code }

// all is the same answer for every action.
func all(c errs.Code) want { return want{c, c, c, c} }

// actor is the person deciding: a fresh member with exactly these facts.
type actor struct {
	role      authz.Role
	requester bool     // the run was requested by this person
	grant     bool     // an explicit grant on the run's environment
	owner     bool     // named (as a user) owner of the run's environment
	groups    []string // the ID token's groups
	cloudLive bool
	staleAuth bool // signed in an hour ago (not fresh enough for risk 3)
}

type tableRow struct {
	name     string
	scenario string // a template run, see decisionScenarios
	who      actor
	want     want
	// reauth: approving (or overriding) is refused only for the old sign-in; the page
	// offers "Sign in again to decide" instead of the form.
	reauth bool
}

const (
	forbidden = errs.CodeForbidden
	notFound  = errs.CodeNotFound
	conflict  = errs.CodeConflict
	stale     = errs.CodeStaleEvidence
	expired   = errs.CodeApprovalExpired
)

var decisionTable = []tableRow{
	// Risk 1 in a protected environment (staging): one approver with provisioning.apply,
	// not the requester.
	{"r1p viewer", "r1-protected", actor{role: authz.RoleViewer}, all(forbidden), false},
	{"r1p auditor", "r1-protected", actor{role: authz.RoleAuditor}, all(forbidden), false},
	{"r1p operator", "r1-protected", actor{role: authz.RoleOperator}, want{ok, ok, forbidden, forbidden}, false},
	{"r1p operator requester", "r1-protected", actor{role: authz.RoleOperator, requester: true}, want{forbidden, forbidden, forbidden, ok}, false},
	{"r1p admin", "r1-protected", actor{role: authz.RoleAdmin}, want{ok, ok, conflict, ok}, false},
	{"r1p owner", "r1-protected", actor{role: authz.RoleOwner}, want{ok, ok, conflict, ok}, false},
	// Risk 1 outside protected environments (development): self-service, already approved.
	{"r1 admin", "r1-self-service", actor{role: authz.RoleAdmin}, want{conflict, conflict, conflict, ok}, false},
	{"r1 operator requester", "r1-self-service", actor{role: authz.RoleOperator, requester: true}, want{forbidden, forbidden, forbidden, ok}, false},
	// Risk 2 (any change in production, a floor): an admin or owner, not the requester.
	{"r2 operator", "r2-production", actor{role: authz.RoleOperator}, want{forbidden, forbidden, forbidden, forbidden}, false},
	{"r2 admin", "r2-production", actor{role: authz.RoleAdmin}, want{ok, ok, conflict, ok}, false},
	{"r2 owner", "r2-production", actor{role: authz.RoleOwner}, want{ok, ok, conflict, ok}, false},
	{"r2 admin requester", "r2-production", actor{role: authz.RoleAdmin, requester: true}, want{forbidden, forbidden, forbidden, ok}, false},
	// Risk 3 (a destroy): an owner, freshly signed in, never the requester.
	{"r3 admin", "r3-destroy", actor{role: authz.RoleAdmin}, want{forbidden, forbidden, forbidden, ok}, false},
	{"r3 owner fresh", "r3-destroy", actor{role: authz.RoleOwner}, want{ok, ok, conflict, ok}, false},
	{"r3 owner stale sign-in", "r3-destroy", actor{role: authz.RoleOwner, staleAuth: true}, want{forbidden, ok, conflict, ok}, true},
	{"r3 owner requester", "r3-destroy", actor{role: authz.RoleOwner, requester: true}, want{forbidden, forbidden, forbidden, ok}, false},
	// A soft policy block: an admin overrides; rejection needs what approving needs.
	{"soft admin", "soft-block", actor{role: authz.RoleAdmin}, want{conflict, ok, ok, ok}, false},
	{"soft operator", "soft-block", actor{role: authz.RoleOperator}, want{conflict, ok, forbidden, forbidden}, false},
	{"soft operator requester", "soft-block", actor{role: authz.RoleOperator, requester: true}, want{forbidden, forbidden, forbidden, ok}, false},
	{"soft admin requester", "soft-block", actor{role: authz.RoleAdmin, requester: true}, want{forbidden, forbidden, forbidden, ok}, false},
	// A soft block on a risk-3 plan: overriding needs what approving it would (an owner,
	// freshly signed in, not the requester).
	{"soft r3 admin", "soft-block-r3", actor{role: authz.RoleAdmin}, want{forbidden, forbidden, forbidden, ok}, false},
	{"soft r3 owner fresh", "soft-block-r3", actor{role: authz.RoleOwner}, want{conflict, ok, ok, ok}, false},
	{"soft r3 owner stale sign-in", "soft-block-r3", actor{role: authz.RoleOwner, staleAuth: true}, want{conflict, ok, forbidden, ok}, true},
	// Floors under a matrix loosened below them (saved before the floors existed):
	// destroys stay risk 3 and production changes risk 2.
	{"floor destroy admin", "floor-destroy", actor{role: authz.RoleAdmin}, want{forbidden, forbidden, forbidden, ok}, false},
	{"floor destroy owner", "floor-destroy", actor{role: authz.RoleOwner}, want{ok, ok, conflict, ok}, false},
	{"floor destroy owner stale", "floor-destroy", actor{role: authz.RoleOwner, staleAuth: true}, want{forbidden, ok, conflict, ok}, true},
	// The data-loss floor alone: a bucket replaced (its region changed) under a matrix
	// that makes replaces, destroys and data loss risk 1.
	{"floor replace admin", "floor-replace", actor{role: authz.RoleAdmin}, want{forbidden, forbidden, forbidden, ok}, false},
	{"floor replace owner", "floor-replace", actor{role: authz.RoleOwner}, want{ok, ok, conflict, ok}, false},
	{"floor replace owner stale", "floor-replace", actor{role: authz.RoleOwner, staleAuth: true}, want{forbidden, ok, conflict, ok}, true},
	{"floor production operator", "floor-production", actor{role: authz.RoleOperator}, want{forbidden, forbidden, forbidden, forbidden}, false},
	{"floor production admin", "floor-production", actor{role: authz.RoleAdmin}, want{ok, ok, conflict, ok}, false},
	// Named owners of the environment decide risk 2 (users or groups); admins after 4 h.
	{"owners group member", "named-owners", actor{role: authz.RoleOperator, groups: []string{"qa-leads"}}, want{ok, ok, forbidden, forbidden}, false},
	{"owners named user", "named-owners", actor{role: authz.RoleOperator, owner: true}, want{ok, ok, forbidden, forbidden}, false},
	{"owners other operator", "named-owners", actor{role: authz.RoleOperator, groups: []string{"developers"}}, all(forbidden), false},
	{"owners viewer in group", "named-owners", actor{role: authz.RoleViewer, groups: []string{"qa-leads"}}, all(forbidden), false},
	{"owners owner before escalation", "named-owners", actor{role: authz.RoleOwner}, want{forbidden, forbidden, forbidden, ok}, false},
	{"owners admin before escalation", "named-owners", actor{role: authz.RoleAdmin}, want{forbidden, forbidden, forbidden, ok}, false},
	{"owners member requester", "named-owners", actor{role: authz.RoleOperator, groups: []string{"qa-leads"}, requester: true}, want{forbidden, forbidden, forbidden, ok}, false},
	{"escalated admin", "escalated", actor{role: authz.RoleAdmin}, want{ok, ok, conflict, ok}, false},
	{"escalated operator", "escalated", actor{role: authz.RoleOperator}, want{forbidden, forbidden, forbidden, forbidden}, false},
	{"escalated group member", "escalated", actor{role: authz.RoleOperator, groups: []string{"qa-leads"}}, want{ok, ok, forbidden, forbidden}, false},
	// Without four eyes (the owners' choice at risk 1) the requester approves her own
	// run, but a rejection is always someone else's.
	{"two eyes requester", "no-four-eyes", actor{role: authz.RoleOperator, requester: true}, want{ok, forbidden, forbidden, ok}, false},
	{"two eyes operator", "no-four-eyes", actor{role: authz.RoleOperator}, want{ok, ok, forbidden, forbidden}, false},
	// A restricted environment: without a grant the run does not exist (404 beats 403);
	// admins, owners and auditors see it.
	{"restricted operator no grant", "restricted", actor{role: authz.RoleOperator}, all(notFound), false},
	{"restricted viewer no grant", "restricted", actor{role: authz.RoleViewer}, all(notFound), false},
	{"restricted operator grant", "restricted", actor{role: authz.RoleOperator, grant: true}, want{ok, ok, forbidden, forbidden}, false},
	{"restricted auditor", "restricted", actor{role: authz.RoleAuditor}, all(forbidden), false},
	{"restricted admin", "restricted", actor{role: authz.RoleAdmin}, want{ok, ok, conflict, ok}, false},
	// A live executor: approving needs cloud.live; rejecting and cancelling do not.
	{"live operator without cloud.live", "live", actor{role: authz.RoleOperator}, want{forbidden, ok, forbidden, forbidden}, false},
	{"live operator with cloud.live", "live", actor{role: authz.RoleOperator, cloudLive: true}, want{ok, ok, forbidden, forbidden}, false},
	{"live requester without cloud.live", "live", actor{role: authz.RoleOperator, requester: true}, want{forbidden, forbidden, forbidden, ok}, false},
	// The clocks and the state: a decision after the deadline expires the run; a STALE
	// run is stale evidence for every decision.
	{"deadline passed admin", "deadline-passed", actor{role: authz.RoleAdmin}, want{expired, expired, conflict, ok}, false},
	{"soft deadline passed admin", "soft-deadline-passed", actor{role: authz.RoleAdmin}, want{conflict, expired, expired, ok}, false},
	{"stale admin", "stale", actor{role: authz.RoleAdmin}, want{stale, stale, stale, stale}, false},
}

// decisionFixture holds the template runs the table's rows are cloned from.
type decisionFixture struct {
	app       *webtest.App
	orgID     string
	templates map[string]run.Run
	evidence  map[string]overrideRule // the soft block's failed rule
	next      int
}

type overrideRule struct{ id, version string }

func TestDecisionTable(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	f := newDecisionFixture(t, app)
	// The table's runs must stay as the rows make them: no worker applies an approved
	// clone (its state would make the others STALE).
	app.StopQueue(t)

	covered := map[string]bool{}
	for _, row := range decisionTable {
		covered[row.scenario] = true
		t.Run(row.name, func(t *testing.T) {
			who := f.member(t, row)
			// The pages, drawn for the same person on a fresh clone, show exactly the
			// allowed controls.
			r := f.clone(t, row, who)
			f.requirePageControls(t, row, who, r)
			f.requireInbox(t, row, who, r)
			for act, code := range map[run.Action]errs.Code{run.ActionApprove: row.want.approve, run.ActionReject: row.want.reject,
				run.ActionOverride: row.want.override, run.ActionCancel: row.want.cancel} {
				r := f.clone(t, row, who)
				got, err := f.decide(t, row, who, act, r)
				if code == ok {
					require.NoError(t, err, "%s: %s", row.name, act)
					require.Equal(t, map[run.Action]run.State{run.ActionApprove: run.Approved, run.ActionReject: run.Rejected,
						run.ActionOverride: run.PendingApproval, run.ActionCancel: run.Cancelled}[act], got.State, "%s: %s", row.name, act)
					continue
				}
				require.Error(t, err, "%s: %s should be refused with %s", row.name, act, code)
				require.Equal(t, code, errs.CodeOf(err), "%s: %s: %v", row.name, act, err)
				after := f.read(t, r.ID)
				if code == expired {
					// Judged at commit: the run ends EXPIRED with that reason, and nothing else.
					require.Equal(t, run.Expired, after.State, row.name)
					require.Nil(t, after.ApprovedBy)
					require.Nil(t, after.RejectedBy)
					continue
				}
				require.Equal(t, r.State, after.State, "%s: a refused %s changes nothing", row.name, act)
			}
		})
	}
	for name := range f.templates {
		require.True(t, covered[name], "scenario %s has no row", name)
	}
	// Every row of the default matrix is in the table: levels 1, 1-protected, 2 and 3
	// have their scenarios (level 0 never waits for anyone: dry runs are PLANNED).
	for _, s := range []string{"r1-self-service", "r1-protected", "r2-production", "r3-destroy"} {
		require.True(t, covered[s], s)
	}
	require.Equal(t, "1", f.templates["r1-self-service"].RiskLevel)
	require.Equal(t, "1-protected", f.templates["r1-protected"].RiskLevel)
	require.Equal(t, "2", f.templates["r2-production"].RiskLevel)
	require.Equal(t, "3", f.templates["r3-destroy"].RiskLevel)
	// The floors held under the loosened matrix.
	require.Equal(t, "3", f.templates["floor-destroy"].RiskLevel)
	require.Equal(t, "2", f.templates["floor-production"].RiskLevel)
	require.Equal(t, "3", f.templates["floor-replace"].RiskLevel)
	require.Equal(t, 1, f.templates["floor-replace"].PlanSummary.Replace, "the floor-replace plan replaces the bucket")
	require.Zero(t, f.templates["floor-replace"].PlanSummary.Delete)
}

// newDecisionFixture plans the template runs: under the default matrix, then under a
// matrix loosened below the floors, then under one naming the environment's owners.
func newDecisionFixture(t *testing.T, app *webtest.App) *decisionFixture {
	ctx := context.Background()
	f := &decisionFixture{app: app, orgID: app.Orgs["acme"], templates: map[string]run.Run{}, evidence: map[string]overrideRule{}, next: 1000}
	requester := app.NewMember(t, "acme", "Rita Requester", authz.RoleOperator, false)
	owner := app.NewMember(t, "acme", "Otto Owner", authz.RoleOwner, false)
	admin := app.NewMember(t, "acme", "Ada Admin", authz.RoleAdmin, false)
	as := func(m webtest.Member) context.Context { return authz.WithSubject(ctx, m.Subject(time.Now())) }
	envs := map[string]string{}
	for _, name := range []string{"development", "staging", "production"} {
		envs[name] = app.OrgEnvironmentID(t, "acme", name)
	}
	protected := true
	secure, err := app.System.Environments.Create(as(admin), environment.Input{Name: "secure", Tier: "staging", Restricted: true,
		RequiresApproval: &protected, Grants: []string{requester.UserID}})
	require.NoError(t, err)
	bucket := func(env, ws string, kind run.Kind) run.Request {
		return run.Request{EnvironmentID: env, Workspace: ws, Template: "bucket", Kind: kind,
			Inputs: map[string]string{"name": ws, "retention_days": "30", "region": "eu-west"}}
	}
	request := func(who webtest.Member, req run.Request, state run.State) run.Run {
		t.Helper()
		r, err := app.System.Runs.Requests.Request(as(who), req)
		require.NoError(t, err)
		return waitForState(t, app, r.ID, state)
	}
	f.templates["r1-protected"] = request(requester, bucket(envs["staging"], "table-r1p", run.KindApply), run.PendingApproval)
	// Self-service: approved by the system and applied at once (clones go back to the
	// moment of the approval).
	f.templates["r1-self-service"] = request(requester, bucket(envs["development"], "table-r1", run.KindApply), run.Succeeded)
	require.Equal(t, "self-service", f.templates["r1-self-service"].ApprovalKind)
	f.templates["r2-production"] = request(requester, bucket(envs["production"], "table-r2", run.KindApply), run.PendingApproval)
	// A destroy needs something to destroy.
	base := request(requester, bucket(envs["staging"], "table-r3", run.KindApply), run.PendingApproval)
	_, err = app.System.Runs.Decisions.Approve(as(admin), base.ID, run.Approval{Evidence: run.EvidenceOf(base)})
	require.NoError(t, err)
	waitForState(t, app, base.ID, run.Succeeded)
	f.templates["r3-destroy"] = request(requester, bucket(envs["staging"], "table-r3", run.KindDestroy), run.PendingApproval)
	soft := request(requester, run.Request{EnvironmentID: envs["staging"], Workspace: "table-soft", Template: "postgres", Kind: run.KindApply,
		Inputs: map[string]string{"name": "table-soft", "engine_version": "16", "size": "small", "storage_gb": "20",
			"backup_retention_days": "3", "network_cidr": "10.30.0.0/16"}}, run.PolicyBlocked)
	f.templates["soft-block"] = soft
	ev := evaluationOf(t, app, soft)
	f.evidence["soft-block"] = overrideRule{"database_protection", ruleVersion(t, ev, "database_protection")}
	f.templates["restricted"] = request(requester, bucket(secure.ID, "table-secure", run.KindApply), run.PendingApproval)
	f.templates["live"] = f.templates["r1-protected"]
	f.templates["deadline-passed"] = f.templates["r1-protected"]
	f.templates["stale"] = f.templates["r1-protected"]
	f.templates["soft-deadline-passed"] = soft
	// Policies and risk are independent: the same soft block on a plan at risk 3 (the
	// level and its decision set on the clones).
	f.templates["soft-block-r3"] = soft

	// A matrix saved before the floors existed: destroys self-service, production risk
	// 1, risk 3 by an admin without elevation or four eyes. The store refuses such a
	// matrix now, so it goes into the table as an old version would be.
	loose := risk.Default()
	for i := range loose.Rules {
		switch loose.Rules[i].Condition {
		case risk.CondDestroy, risk.CondProduction, risk.CondIrreversible, risk.CondReplace:
			loose.Rules[i].Class = 1
		}
	}
	for i := range loose.Decisions {
		if loose.Decisions[i].Level == risk.Level3 {
			loose.Decisions[i] = risk.Decision{Level: risk.Level3, Approver: risk.ApproverAdmin}
		}
	}
	_, err = app.System.Matrix.Save(as(owner), loose, "")
	require.Error(t, err, "the store refuses a matrix below the floors")
	raw, err := json.Marshal(loose)
	require.NoError(t, err)
	require.NoError(t, app.DB.Exec(`INSERT INTO risk_matrix_versions (organization_id, version, matrix, comment, created_by_name)
		VALUES (?, 1, ?, 'before the floors', 'history')`, f.orgID, string(raw)).Error)
	floorBase := request(requester, bucket(envs["staging"], "table-floor", run.KindApply), run.PendingApproval)
	_, err = app.System.Runs.Decisions.Approve(as(admin), floorBase.ID, run.Approval{Evidence: run.EvidenceOf(floorBase)})
	require.NoError(t, err)
	waitForState(t, app, floorBase.ID, run.Succeeded)
	f.templates["floor-destroy"] = request(requester, bucket(envs["staging"], "table-floor", run.KindDestroy), run.PendingApproval)
	f.templates["floor-production"] = request(requester, bucket(envs["production"], "table-floor-prod", run.KindApply), run.PendingApproval)
	replaceBase := request(requester, bucket(envs["staging"], "table-floor-replace", run.KindApply), run.PendingApproval)
	_, err = app.System.Runs.Decisions.Approve(as(admin), replaceBase.ID, run.Approval{Evidence: run.EvidenceOf(replaceBase)})
	require.NoError(t, err)
	waitForState(t, app, replaceBase.ID, run.Succeeded)
	moved := bucket(envs["staging"], "table-floor-replace", run.KindApply)
	moved.Inputs["region"] = "eu-central" // forces a new bucket: the old one and its objects go
	f.templates["floor-replace"] = request(requester, moved, run.PendingApproval)

	// Risk 2 decided by the production environment's named owners; admins after 4 h.
	named := risk.Default()
	for i := range named.Decisions {
		switch named.Decisions[i].Level {
		case risk.Level2:
			named.Decisions[i].Approver, named.Decisions[i].Escalation, named.Decisions[i].EscalateAfterHours = risk.ApproverEnvOwners, risk.ApproverAdmin, 4
		case risk.Level1Protected:
			// Four eyes is the owners' choice below the floors: here the requester may
			// approve her own run, and still never reject it.
			named.Decisions[i].FourEyes = false
		}
	}
	_, err = app.System.Matrix.Save(as(owner), named, "named owners")
	require.NoError(t, err)
	groups := []string{"qa-leads"}
	_, err = app.System.Environments.Update(as(admin), envs["production"], environment.Input{Name: "production", Tier: "production",
		OwnerGroups: &groups})
	require.NoError(t, err)
	f.templates["named-owners"] = request(requester, bucket(envs["production"], "table-named", run.KindApply), run.PendingApproval)
	f.templates["no-four-eyes"] = request(requester, bucket(envs["staging"], "table-two-eyes", run.KindApply), run.PendingApproval)
	f.templates["escalated"] = f.templates["named-owners"]
	return f
}

// member makes the row's person.
func (f *decisionFixture) member(t *testing.T, row tableRow) webtest.Member {
	t.Helper()
	return f.app.NewMember(t, "acme", strings.ReplaceAll(row.name, " ", "-"), row.who.role, row.who.cloudLive, row.who.groups...)
}

// clone copies the row's template run into a fresh one of the same workspace (with its
// own policy evaluation), changed as the row's scenario and person need.
func (f *decisionFixture) clone(t *testing.T, row tableRow, who webtest.Member) run.Run {
	t.Helper()
	tpl := f.templates[row.scenario]
	f.next++
	id := db.NewID("run")
	set := map[string]any{"id": id, "number": f.next}
	switch row.scenario {
	case "r1-self-service":
		// As it was the moment the system approved it, before its apply began.
		set["state"], set["finished_at"], set["new_state_version_id"], set["apply_log_artifact_id"], set["verify_log_artifact_id"] = run.Approved, nil, nil, nil, nil
	case "live":
		set["simulated"] = false
	case "deadline-passed", "soft-deadline-passed":
		set["decision_deadline"] = time.Now().Add(-time.Minute).UTC()
	case "soft-block-r3":
		// What planning writes for a risk-3 plan: the level and the decision it needs.
		set["risk_level"], set["risk_class"], set["required_approver"], set["four_eyes"], set["elevated"] = "3", 3, "owner", true, true
	case "stale":
		set["state"], set["state_reason"] = run.Stale, "the workspace state moved"
	case "escalated":
		set["waiting_since"] = time.Now().Add(-5 * time.Hour).UTC()
	}
	if row.who.requester {
		set["requested_by"], set["requested_by_name"] = who.UserID, who.Name
	}
	raw, err := json.Marshal(set)
	require.NoError(t, err)
	require.NoError(t, f.app.DB.Exec(`INSERT INTO runs SELECT (jsonb_populate_record(NULL::runs, to_jsonb(r) || ?::jsonb)).* FROM runs r WHERE r.id = ?`,
		string(raw), tpl.ID).Error)
	if tpl.PolicyEvaluationID != nil {
		ev := db.NewID("pev")
		require.NoError(t, f.app.DB.Exec(`INSERT INTO policy_evaluations SELECT (jsonb_populate_record(NULL::policy_evaluations,
			to_jsonb(e) || jsonb_build_object('id', ?::text, 'run_id', ?::text))).* FROM policy_evaluations e WHERE e.id = ?`,
			ev, id, *tpl.PolicyEvaluationID).Error)
		require.NoError(t, f.app.DB.Exec("UPDATE runs SET policy_evaluation_id = ? WHERE id = ?", ev, id).Error)
	}
	r := f.read(t, id)
	if row.who.grant {
		require.NoError(t, f.app.DB.Exec("INSERT INTO environment_grants (organization_id, environment_id, user_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
			f.orgID, r.EnvironmentID, who.UserID).Error)
	}
	if row.who.owner {
		require.NoError(t, f.app.DB.Exec("INSERT INTO environment_owners (organization_id, environment_id, user_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
			f.orgID, r.EnvironmentID, who.UserID).Error)
	}
	return r
}

func (f *decisionFixture) read(t *testing.T, id string) run.Run {
	t.Helper()
	var r run.Run
	require.NoError(t, f.app.DB.Where("id = ?", id).Take(&r).Error)
	return r
}

func (f *decisionFixture) authTime(who actor) time.Time {
	if who.staleAuth {
		return time.Now().Add(-time.Hour)
	}
	return time.Now()
}

// decide takes the action on r as the service would be asked by the row's person.
func (f *decisionFixture) decide(t *testing.T, row tableRow, who webtest.Member, act run.Action, r run.Run) (run.Run, error) {
	t.Helper()
	ctx := authz.WithSubject(context.Background(), who.Subject(f.authTime(row.who)))
	runs := f.app.System.Runs.Decisions
	ev := run.EvidenceOf(r)
	switch act {
	case run.ActionApprove:
		return runs.Approve(ctx, r.ID, run.Approval{Evidence: ev, Confirm: run.ConfirmWord, Reason: "checked with the data owner"})
	case run.ActionReject:
		return runs.Reject(ctx, r.ID, ev, "not this quarter")
	case run.ActionOverride:
		rule := f.evidence["soft-block"]
		return runs.Override(ctx, r.ID, ev, rule.id, rule.version, "backups come from the nightly export")
	case run.ActionCancel:
		return runs.Cancel(ctx, r.ID, run.Cancellation{})
	}
	return run.Run{}, fmt.Errorf("unknown action %s", act)
}

// requirePageControls draws the review page and the run page of r for the row's
// person and checks that exactly the allowed controls are there.
func (f *decisionFixture) requirePageControls(t *testing.T, row tableRow, who webtest.Member, r run.Run) {
	t.Helper()
	c := f.app.SessionFor(t, who.UserID, f.orgID, f.authTime(row.who))
	review := f.app.Get(t, c, "/runs/"+r.ID+"/review")
	body := webtest.ReadBody(t, review)
	page := f.app.Get(t, c, "/runs/"+r.ID)
	runPage := webtest.ReadBody(t, page)
	if row.want == all(notFound) {
		require.Equal(t, http.StatusNotFound, review.StatusCode, row.name)
		require.Equal(t, http.StatusNotFound, page.StatusCode, row.name)
		return
	}
	require.Equal(t, http.StatusOK, review.StatusCode, row.name)
	require.Equal(t, http.StatusOK, page.StatusCode, row.name)
	for _, p := range []struct{ where, body string }{{"review", body}, {"run page", runPage}} {
		require.Equal(t, row.want.approve == ok, strings.Contains(p.body, `id="approve"`), "%s %s: approve form", row.name, p.where)
		require.Equal(t, row.reauth, strings.Contains(p.body, `id="reauthenticate"`), "%s %s: sign in again", row.name, p.where)
		require.Equal(t, row.want.reject == ok, strings.Contains(p.body, `id="reject"`), "%s %s: reject form", row.name, p.where)
	}
	require.Equal(t, row.want.override == ok, strings.Contains(body, `/override"`), "%s: override form", row.name)
	require.Equal(t, row.want.cancel == ok, strings.Contains(runPage, `id="cancel-run"`), "%s: cancel", row.name)
	// Only a run that ended without applying offers planning again.
	require.Equal(t, r.State == run.Stale, strings.Contains(body, `id="plan-again"`), "%s: plan again", row.name)
}

// requireInbox checks that "Waiting for you" lists r for the row's person exactly when
// Permissions lets them take the decision r waits for (approve, or override a soft
// block; a decision that only needs a fresh sign-in is listed, marked), and "Waiting
// for others" lists it when they see it but may not. The clone was written behind the
// run service's back, so its deciders are written as a member change writes them.
func (f *decisionFixture) requireInbox(t *testing.T, row tableRow, who webtest.Member, r run.Run) {
	t.Helper()
	ctx := authz.WithSubject(context.Background(), who.Subject(f.authTime(row.who)))
	require.NoError(t, f.app.System.Runs.Eligibility.RefreshDecidersOf(context.Background(), f.orgID, who.UserID))
	waiting := r.State == run.PendingApproval || r.SoftBlocked()
	open := r.DecisionDeadline != nil && r.DecisionDeadline.After(time.Now())
	decides := row.want.approve == ok || row.want.override == ok || row.reauth
	if r.SoftBlocked() {
		decides = row.want.override == ok || (row.reauth && row.want.reject == ok)
	}
	mine := allPages(t, func(after *run.InboxCursor) ([]run.InboxEntry, error) {
		return f.app.System.Runs.Inbox.WaitingForYou(ctx, after, 7)
	})
	others := allPages(t, func(after *run.InboxCursor) ([]run.InboxEntry, error) {
		return f.app.System.Runs.Inbox.WaitingForOthers(ctx, after, 7)
	})
	listed := func(entries []run.InboxEntry) *run.InboxEntry {
		for i := range entries {
			if entries[i].ID == r.ID {
				return &entries[i]
			}
		}
		return nil
	}
	inMine, inOthers := listed(mine), listed(others)
	require.Equal(t, waiting && open && decides, inMine != nil, "%s: waiting for you", row.name)
	require.Equal(t, waiting && open && !decides && row.want != all(notFound), inOthers != nil, "%s: waiting for others", row.name)
	if inMine != nil {
		require.Equal(t, run.RequirementOf(r).Elevated, inMine.NeedsFreshSignIn, "%s: marked as needing a fresh sign-in", row.name)
	}
	n, err := f.app.System.Runs.Inbox.CountWaitingForYou(ctx)
	require.NoError(t, err)
	require.EqualValues(t, len(mine), n, "%s: the count is the list's", row.name)
}

// allPages reads every page of an inbox (small pages: the keyset paging is exercised),
// checking that no run comes twice and the order is by deadline.
func allPages(t *testing.T, page func(after *run.InboxCursor) ([]run.InboxEntry, error)) []run.InboxEntry {
	t.Helper()
	var out []run.InboxEntry
	seen := map[string]bool{}
	var after *run.InboxCursor
	for {
		entries, err := page(after)
		require.NoError(t, err)
		for _, e := range entries {
			require.False(t, seen[e.ID], "run %s listed twice", e.ID)
			seen[e.ID] = true
			if len(out) > 0 {
				require.False(t, e.DecisionDeadline.Before(*out[len(out)-1].DecisionDeadline), "deadline order")
			}
			out = append(out, e)
		}
		if len(entries) < 7 {
			return out
		}
		last := entries[len(entries)-1]
		after = &run.InboxCursor{Deadline: *last.DecisionDeadline, ID: last.ID}
	}
}
