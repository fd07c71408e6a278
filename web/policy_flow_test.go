package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/errs"
	"gantry/models/idempotency"
	"gantry/models/run"
)

// The policy decision in the lifecycle (DESIGN §2, §7): a hard-mandatory failure blocks
// a run for good, a soft-mandatory one until an admin overrides it with a reason bound
// to the rule version and the result digest, and an advisory one only annotates.

func bucketRequest(env, region string) url.Values {
	return url.Values{"template": {"bucket"}, "environment": {env}, "workspace": {"assets-" + region}, "kind": {"apply"},
		"inputs.name": {"assets-" + region}, "inputs.retention_days": {"30"}, "inputs.region": {region}}
}

func postgresRequest(env, workspace, size, backups string) url.Values {
	return url.Values{"template": {"postgres"}, "environment": {env}, "workspace": {workspace}, "kind": {"apply"},
		"inputs.name": {workspace}, "inputs.engine_version": {"16"}, "inputs.size": {size}, "inputs.storage_gb": {"20"},
		"inputs.backup_retention_days": {backups}, "inputs.network_cidr": {"10.30.0.0/16"}}
}

type storedEvaluation struct {
	ID, BundleDigest, ResultDigest, Outcome string
	Results                                 json.RawMessage
}

func evaluationOf(t *testing.T, app *webtest.App, r run.Run) storedEvaluation {
	t.Helper()
	require.NotNil(t, r.PolicyEvaluationID)
	var ev storedEvaluation
	require.NoError(t, app.DB.Raw("SELECT id, bundle_digest, result_digest, outcome, results FROM policy_evaluations WHERE id = ? AND run_id = ?",
		*r.PolicyEvaluationID, r.ID).Scan(&ev).Error)
	require.Equal(t, r.PolicyBundleDigest, ev.BundleDigest)
	require.Equal(t, r.PolicyResultDigest, ev.ResultDigest)
	require.Equal(t, r.PolicyOutcome, ev.Outcome)
	require.Len(t, ev.BundleDigest, 64)
	require.Len(t, ev.ResultDigest, 64)
	return ev
}

// ruleVersion reads the version of rule id from a stored evaluation.
func ruleVersion(t *testing.T, ev storedEvaluation, id string) string {
	t.Helper()
	var results []struct {
		RuleID      string `json:"rule_id"`
		RuleVersion string `json:"rule_version"`
		Passed      bool   `json:"passed"`
	}
	require.NoError(t, json.Unmarshal(ev.Results, &results))
	for _, r := range results {
		if r.RuleID == id {
			require.False(t, r.Passed, "%s passed", id)
			return r.RuleVersion
		}
	}
	t.Fatalf("no result for %s", id)
	return ""
}

func overrideForm(t *testing.T, app *webtest.App, c *http.Client, r run.Run, rule, version, reason string) url.Values {
	t.Helper()
	form := decisionForm(t, app, c, r)
	form.Set("rule_id", rule)
	form.Set("rule_version", version)
	form.Set("reason", reason)
	return form
}

func countRows(t *testing.T, app *webtest.App, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, app.DB.Raw(query, args...).Scan(&n).Error)
	return n
}

func TestHardPolicyFailureBlocksForGood(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	r := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(dev, "us-east")), run.PolicyBlocked)
	require.Equal(t, "hard_failed", r.PolicyOutcome)
	require.Contains(t, r.StateReason, "allowed_regions")
	require.True(t, r.Finished())
	require.NotNil(t, r.FinishedAt, "a hard block is the end of the run")
	ev := evaluationOf(t, app, r)
	version := ruleVersion(t, ev, "allowed_regions")

	// Nobody overrides a hard-mandatory failure, not even an owner; the run stays put.
	owner := app.LoggedIn(t, "owner@acme.test")
	resp := app.PostForm(t, owner, "/runs/"+r.ID+"/override", overrideForm(t, app, owner, r, "allowed_regions", version, "the customer asked for it"))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM policy_overrides WHERE run_id = ?", r.ID))
	require.Equal(t, run.PolicyBlocked, waitForState(t, app, r.ID, run.PolicyBlocked).State)

	// The pages show the failure and offer nothing to decide.
	page := webtest.ReadBody(t, app.Get(t, owner, "/runs/"+r.ID+"/review"))
	require.Contains(t, page, `data-rule="allowed_regions" data-passed="false"`)
	require.NotContains(t, page, `id="approve"`)
	require.NotContains(t, page, "Reason for overriding")
	page = webtest.ReadBody(t, app.Get(t, owner, "/runs/"+r.ID))
	require.NotContains(t, page, `id="cancel-run"`)
	// Not even a cancel moves it: the reason that names the rule stays.
	resp = app.PostForm(t, operator, "/runs/"+r.ID+"/cancel", url.Values{"_csrf": {app.CSRF(t, operator)}, "idempotency_key": {idempotency.NewKey()}, "confirm": {"yes"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, waitForState(t, app, r.ID, run.PolicyBlocked).StateReason, "allowed_regions")
}

func TestSoftPolicyFailureWaitsForAnAdminOverride(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "orders", "small", "3")), run.PolicyBlocked)
	require.Equal(t, "soft_failed", r.PolicyOutcome)
	require.Contains(t, r.StateReason, "database_protection")
	require.False(t, r.Finished())
	ev := evaluationOf(t, app, r)
	version := ruleVersion(t, ev, "database_protection")
	good := "backups are kept by the nightly export for this database"

	// A non-admin may not override: 403, nothing stored.
	resp := app.PostForm(t, operator, "/runs/"+r.ID+"/override", overrideForm(t, app, operator, r, "database_protection", version, good))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	admin := app.LoggedIn(t, "admin@acme.test")
	// A reason of fewer than 10 characters is a field error.
	resp = app.PostForm(t, admin, "/runs/"+r.ID+"/override", overrideForm(t, app, admin, r, "database_protection", version, "because"))
	require.Contains(t, webtest.ReadBody(t, resp), "at least 10 characters")
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	// An override bound to another rule version or result digest is stale.
	status, code, body := postDecision(t, app, admin, "/runs/"+r.ID+"/override", overrideForm(t, app, admin, r, "database_protection", "0123", good))
	require.Equal(t, http.StatusConflict, status, body)
	require.Equal(t, errs.CodeStaleEvidence, code)
	stale := overrideForm(t, app, admin, r, "database_protection", version, good)
	stale.Set("policy_result_digest", "sha256:0000")
	status, code, body = postDecision(t, app, admin, "/runs/"+r.ID+"/override", stale)
	require.Equal(t, http.StatusConflict, status, body)
	require.Equal(t, errs.CodeStaleEvidence, code)
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM policy_overrides WHERE run_id = ?", r.ID))

	// The review page offers the override to the admin.
	page := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+r.ID+"/review"))
	require.Contains(t, page, "Reason for overriding")

	resp = app.PostForm(t, admin, "/runs/"+r.ID+"/override", overrideForm(t, app, admin, r, "database_protection", version, good))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	r = waitForState(t, app, r.ID, run.PendingApproval)
	require.Contains(t, r.StateReason, "overridden by")

	// The override is audited with its binding.
	var data string
	require.NoError(t, app.DB.Raw("SELECT data::text FROM audit_events WHERE action = 'policy.overridden' AND target_id = ?", r.ID).Scan(&data).Error)
	var bound map[string]any
	require.NoError(t, json.Unmarshal([]byte(data), &bound))
	evidence, _ := bound["evidence"].(map[string]any)
	require.Equal(t, r.ID, evidence["run_id"], "the override's event carries the evidence it was given on")
	require.Equal(t, r.PlanDigest, evidence["plan_digest"])
	require.Equal(t, r.ConfigDigest, evidence["config_digest"])
	delete(bound, "evidence")
	// The override holds until the run's decision deadline, and no longer.
	require.Equal(t, map[string]any{"rule_id": "database_protection", "rule_version": version, "evaluation_id": ev.ID,
		"result_digest": ev.ResultDigest, "bundle_digest": ev.BundleDigest, "reason": good,
		"expires_at": r.DecisionDeadline.UTC().Format(time.RFC3339Nano)}, bound)
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM policy_overrides WHERE run_id = ? AND rule_version = ? AND result_digest = ?",
		r.ID, version, ev.ResultDigest))

	// The approvals inbox lists it with its risk class and who decides.
	inbox := webtest.ReadBody(t, app.Get(t, admin, "/approvals"))
	require.Contains(t, inbox, `data-testid="run-`+r.ID+`"`)
	require.Contains(t, inbox, "risk 1")
	require.Contains(t, inbox, "decided by an operator, admin or owner, not the requester")

	// Then the run is decided like any other, by someone else than who overrode it
	// (four eyes: web/policy_blocks_test.go).
	owner := app.LoggedIn(t, "owner@acme.test")
	resp = app.PostForm(t, owner, "/runs/"+r.ID+"/approve", decisionForm(t, app, owner, r))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	waitForState(t, app, r.ID, run.Succeeded)
}

func TestAdvisoryPolicyOnlyAnnotates(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	// development_sizes is advisory: a large database in development still runs.
	r := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(dev, "analytics", "large", "7")), run.Succeeded)
	require.Equal(t, "advisory", r.PolicyOutcome)
	require.Equal(t, "self-service", r.ApprovalKind)
	var approved string
	require.NoError(t, app.DB.Raw("SELECT data->>'reason' FROM audit_events WHERE action = 'run.approved' AND target_id = ?", r.ID).Scan(&approved).Error)
	require.Contains(t, approved, "advisory: development_sizes")
	ruleVersion(t, evaluationOf(t, app, r), "development_sizes")
}

func TestEnvironmentModesChangeTheOutcome(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	// The environment makes allowed_regions advisory: the same request now runs.
	require.NoError(t, app.DB.Exec(`INSERT INTO environment_policy_modes (organization_id, environment_id, rule_id, enforcement)
		SELECT organization_id, id, 'allowed_regions', 'advisory' FROM environments WHERE id = ?`, dev).Error)
	r := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(dev, "us-east")), run.Succeeded)
	require.Equal(t, "advisory", r.PolicyOutcome)
}

// TestPolicyChangedAfterApprovalIsCheckedBeforeApply: an org policy added while a run
// waits for its decision changes the bundle; the worker re-evaluates before the apply,
// stores the re-evaluation and refuses the apply, touching nothing.
func TestPolicyChangedAfterApprovalIsCheckedBeforeApply(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	require.Equal(t, "pass", r.PolicyOutcome)

	const rego = `package gantry.org.no_buckets

metadata := {"id": "org.no_buckets", "title": "No new buckets this week", "enforcement": "hard_mandatory"}

deny contains msg if {
	some rc in input.plan.resource_changes
	rc.type == "sandbox_bucket"
	"create" in rc.change.actions
	msg := sprintf("%s: bucket creation is frozen", [rc.address])
}
`
	require.NoError(t, app.DB.Exec(`INSERT INTO org_policies (organization_id, name, version, title, enforcement, rego, tests, digest)
		VALUES (?, 'no_buckets', 1, 'No new buckets this week', 'hard_mandatory', ?, '', 'test')`, r.OrganizationID, rego).Error)

	admin := app.LoggedIn(t, "admin@acme.test")
	resp := app.PostForm(t, admin, "/runs/"+r.ID+"/approve", decisionForm(t, app, admin, r))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	failed := waitForState(t, app, r.ID, run.Failed)
	require.Contains(t, failed.StateReason, "policy re-check before apply")
	require.Contains(t, failed.StateReason, "org.no_buckets")
	require.Contains(t, failed.StateReason, "nothing was applied")
	require.Nil(t, failed.NewStateVersionID)
	require.EqualValues(t, 2, countRows(t, app, "SELECT count(*) FROM policy_evaluations WHERE run_id = ?", r.ID),
		"the re-evaluation is kept next to the one the approval bound")
}

// TestModeChangedAfterApprovalIsCheckedBeforeApply: the environment makes an advisory
// failure hard-mandatory after the approval; the re-check before the apply sees it.
func TestModeChangedAfterApprovalIsCheckedBeforeApply(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "ledger", "small", "7")), run.PendingApproval)
	require.Equal(t, "pass", r.PolicyOutcome)
	require.NoError(t, app.DB.Exec(`INSERT INTO environment_policy_modes (organization_id, environment_id, rule_id, enforcement)
		SELECT organization_id, id, 'database_protection', 'hard_mandatory' FROM environments WHERE id = ?`, staging).Error)
	// The mode alone changes nothing for a passing plan: the apply goes ahead.
	admin := app.LoggedIn(t, "admin@acme.test")
	resp := app.PostForm(t, admin, "/runs/"+r.ID+"/approve", decisionForm(t, app, admin, r))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	waitForState(t, app, r.ID, run.Succeeded)
	// Neither the bundle changed nor is the run risk 3, and the worker evaluated again
	// all the same: it does before every apply (README), and stored the new result (the
	// rule's mode is part of it) under the unchanged bundle.
	require.NotNil(t, r.RiskClass)
	require.Less(t, *r.RiskClass, 3)
	var bundles []string
	require.NoError(t, app.DB.Raw("SELECT bundle_digest FROM policy_evaluations WHERE run_id = ? ORDER BY created_at", r.ID).Scan(&bundles).Error)
	require.Equal(t, []string{r.PolicyBundleDigest, r.PolicyBundleDigest}, bundles, "the approved evaluation and the one before the apply")

	// With the mode in force the same failure blocks for good at plan time.
	blocked := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "billing", "small", "3")), run.PolicyBlocked)
	require.Equal(t, "hard_failed", blocked.PolicyOutcome)

	// A soft failure overridden, then made hard by the environment before the apply.
	require.NoError(t, app.DB.Exec("DELETE FROM environment_policy_modes WHERE environment_id = ?", staging).Error)
	blocked = waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "billing2", "small", "3")), run.PolicyBlocked)
	ev := evaluationOf(t, app, blocked)
	resp = app.PostForm(t, admin, "/runs/"+blocked.ID+"/override",
		overrideForm(t, app, admin, blocked, "database_protection", ruleVersion(t, ev, "database_protection"), "exported nightly to the archive"))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	pending := waitForState(t, app, blocked.ID, run.PendingApproval)
	require.NoError(t, app.DB.Exec(`INSERT INTO environment_policy_modes (organization_id, environment_id, rule_id, enforcement)
		SELECT organization_id, id, 'database_protection', 'hard_mandatory' FROM environments WHERE id = ?`, staging).Error)
	// Approved by someone else than who overrode it (four eyes).
	owner := app.LoggedIn(t, "owner@acme.test")
	resp = app.PostForm(t, owner, "/runs/"+pending.ID+"/approve", decisionForm(t, app, owner, pending))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	failed := waitForState(t, app, pending.ID, run.Failed)
	require.Contains(t, failed.StateReason, "database_protection (hard-mandatory)")
	require.Nil(t, failed.NewStateVersionID)
}

// TestBrokenBundleFailsThePlan: an org bundle that does not compile fails the run with
// the reason instead of leaving it planning.
func TestBrokenBundleFailsThePlan(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	require.NoError(t, app.DB.Exec(`INSERT INTO org_policies (organization_id, name, version, title, enforcement, rego, tests, digest)
		VALUES (?, 'broken', 1, 'Broken', 'advisory', 'package gantry.org.broken\n\ndeny contains msg if {', '', 'x')`, app.Orgs["acme"]).Error)
	r := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(app.OrgEnvironmentID(t, "acme", "development"), "eu-west")), run.Failed)
	require.Contains(t, r.StateReason, "the plan gates could not run")
	require.NotNil(t, r.FinishedAt)
}

// TestElevatedDecisionNeedsAFreshSignIn: a risk-3 decision needs a sign-in at the
// provider within 15 minutes (the ID token's auth_time). An older sign-in is refused
// and the page offers a re-authentication that asks the provider for a new login
// (prompt=login, max_age=0); after it the owner decides.
func TestElevatedDecisionNeedsAFreshSignIn(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	first := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(dev, "eu-west")), run.Succeeded)
	form := bucketRequest(dev, "eu-west")
	form.Set("kind", "destroy")
	r := waitForState(t, app, app.RequestRun(t, operator, form), run.PendingApproval)
	require.Equal(t, first.WorkspaceID, r.WorkspaceID)
	require.Equal(t, 3, *r.RiskClass)
	require.True(t, r.Elevated)
	require.Equal(t, "owner", r.RequiredApprover)

	owner := app.LoggedIn(t, "owner@acme.test")
	// The owner's sign-in ages past the window.
	require.NoError(t, app.DB.Exec(`UPDATE sessions SET data = jsonb_set(data, '{auth_time}', to_jsonb(?::text))
		WHERE user_id = (SELECT id FROM users WHERE email = 'owner@acme.test')`, time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)).Error)
	page := webtest.ReadBody(t, app.Get(t, owner, "/runs/"+r.ID+"/review"))
	require.Contains(t, page, `id="reauthenticate"`)
	require.NotContains(t, page, `id="approve"`)
	resp := app.PostForm(t, owner, "/runs/"+r.ID+"/approve", decisionForm(t, app, owner, r))
	require.Contains(t, webtest.ReadBody(t, resp), "sign-in within the last 15 minutes")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	// Re-authenticate: the provider is asked for a new login, not a single sign-on.
	req, _ := http.NewRequest(http.MethodGet, app.URL+"/login?reauth=1&return_to=/runs/"+r.ID+"/review", nil)
	toProvider := webtest.Follow(t, owner, req, func(u *url.URL) bool { return strings.HasPrefix(u.String(), app.Issuer) })
	webtest.ReadBody(t, toProvider)
	authorize, err := toProvider.Location()
	require.NoError(t, err)
	require.Equal(t, "login", authorize.Query().Get("prompt"))
	require.Equal(t, "0", authorize.Query().Get("max_age"))
	loginPage := webtest.Follow(t, owner, must(http.NewRequest(http.MethodGet, authorize.String(), nil)), nil)
	body := webtest.ReadBody(t, loginPage)
	id := regexp.MustCompile(`name="id" value="([^"]+)"`).FindStringSubmatch(body)
	action := regexp.MustCompile(`<form method="post" action="([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, id, body)
	require.NotNil(t, action, body)
	target := strings.ReplaceAll(action[1], "&amp;", "&")
	if strings.HasPrefix(target, "/") {
		target = app.Issuer + target
	}
	callback := app.SubmitCredentials(t, owner, target, id[1], "owner@acme.test", "owner-acme")
	back := webtest.Follow(t, owner, must(http.NewRequest(http.MethodGet, callback.String(), nil)), nil)
	page = webtest.ReadBody(t, back)
	require.Equal(t, http.StatusOK, back.StatusCode)
	require.Contains(t, page, `id="approve"`, "back on the review page, the decision is open")

	noConfirm := decisionForm(t, app, owner, r)
	noConfirm.Del("confirm")
	resp = app.PostForm(t, owner, "/runs/"+r.ID+"/approve", noConfirm)
	require.Contains(t, webtest.ReadBody(t, resp), "Type DESTROY")
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	resp = app.PostForm(t, owner, "/runs/"+r.ID+"/approve", decisionForm(t, app, owner, r))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	waitForState(t, app, r.ID, run.Succeeded)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
