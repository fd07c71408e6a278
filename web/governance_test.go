package web_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/governance"
	"gantry/models/risk"
	"gantry/models/run"
)

// govOrg is an organization of its own for one configuration of the governance table:
// a development environment that requires no approval and a protected staging one.
type govOrg struct {
	id, slug   string
	sys, owner context.Context
	auditor    context.Context
	envs       map[string]string // name -> id
}

// newGovOrg makes organization slug with dev and stg and saves the default matrix
// changed by edit (nil: the default, never saved).
func newGovOrg(t *testing.T, app *webtest.App, slug string, edit func(*risk.Matrix)) govOrg {
	t.Helper()
	ctx := context.Background()
	o, err := app.System.Orgs.EnsureOrganization(ctx, slug, "Org "+slug)
	require.NoError(t, err)
	app.Orgs[slug] = o.ID // the table runs one configuration at a time
	g := govOrg{id: o.ID, slug: slug, sys: authz.WithSubject(ctx, authz.System(o.ID)), envs: map[string]string{},
		owner:   authz.WithSubject(ctx, app.NewMember(t, slug, "Owen", authz.RoleOwner, true).Subject(time.Now())),
		auditor: authz.WithSubject(ctx, app.NewMember(t, slug, "Aude", authz.RoleAuditor, false).Subject(time.Now()))}
	no, yes := false, true
	for _, in := range []environment.Input{{Name: "dev", Tier: "development", RequiresApproval: &no}, {Name: "stg", Tier: "staging", RequiresApproval: &yes}} {
		env, err := app.System.Environments.Create(g.sys, in)
		require.NoError(t, err)
		g.envs[in.Name] = env.ID
	}
	if edit != nil {
		app.SaveMatrix(t, slug, edit)
	}
	return g
}

// report is the organization's report, by environment name.
func (g govOrg) report(t *testing.T, app *webtest.App) map[string]governance.EnvironmentReport {
	t.Helper()
	rep, err := app.System.Governance.Report(g.auditor)
	require.NoError(t, err)
	out := map[string]governance.EnvironmentReport{}
	for _, e := range rep.Environments {
		out[e.Name] = e
	}
	return out
}

// gates are an environment's gate statuses by id.
func gates(e governance.EnvironmentReport) map[string]string {
	out := map[string]string{}
	for _, g := range e.Gates {
		out[g.ID] = g.Status
	}
	return out
}

// gate is one gate of an environment.
func gate(t *testing.T, e governance.EnvironmentReport, id string) governance.Gate {
	t.Helper()
	for _, g := range e.Gates {
		if g.ID == id {
			return g
		}
	}
	t.Fatalf("no gate %s in %s", id, e.Name)
	return governance.Gate{}
}

// findings are an environment's findings as "text | setting | runs".
func findings(e governance.EnvironmentReport) []string {
	var out []string
	for _, f := range e.Findings {
		var runs []string
		for _, r := range f.Runs {
			runs = append(runs, fmt.Sprintf("#%d", r.Number))
		}
		out = append(out, timeless(f.Text+" | "+f.Setting.Name+" | "+strings.Join(runs, " ")))
	}
	return out
}

// timeless is s with its times and dates as <time> and <date>: when a credential was set.
func timeless(s string) string {
	s = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`).ReplaceAllString(s, "<time>")
	return regexp.MustCompile(`\d{4}-\d\d-\d\d`).ReplaceAllString(s, "<date>")
}

// The gates of the two environments under the default configuration: everything holds
// but what Gantry approves alone in development (risk 1 without requires_approval) and
// the drift checks development never schedules. Each configuration below says what it
// changes of these.
var (
	devDefault = map[string]string{"plan": governance.Simulated, "policy": governance.Enforced, "approval-create-update": governance.SelfService,
		"approval-replace": governance.Enforced, "approval-destroy": governance.Enforced, "approval-data-loss": governance.Enforced,
		"approval-org-scoped": governance.Enforced, "approval-org-policy": governance.Enforced, "apply-binding": governance.Enforced,
		"verification": governance.Enforced, "entitlements": governance.Enforced, "credentials": governance.Enforced, "drift": governance.UnenforcedUnknown}
	stgDefault = with(devDefault, map[string]string{"approval-create-update": governance.Enforced, "drift": governance.Enforced})
	driftOff   = "manual changes: no scheduled drift check: a change made by hand outside a window goes unnoticed until the workspace's next run | this environment's drift check interval | "
)

// with is gates changed by changes.
func with(gates, changes map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range gates {
		out[k] = v
	}
	for k, v := range changes {
		out[k] = v
	}
	return out
}

// TestGovernanceReportFromLiveConfiguration: the governance report over a table of
// configurations (requires_approval on and off, four eyes on and off per risk, matrix
// rows moved within the floors, a static credential, a self-approved apply, a
// self-service apply, an unevidenced apply planted in the chain), each in an
// organization of its own on the real services and PostgreSQL, gives the exact gate
// words and findings; then, on the demo organization's page and Markdown, removing an
// enforcement from the configuration flips its gate to a finding and putting it back
// flips it back; and the report is the auditor's (the viewer gets 403).
func TestGovernanceReportFromLiveConfiguration(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	selfService := func(kinds string, applies int, runs string) string {
		verb := "is"
		if strings.Contains(kinds, ",") {
			verb = "are"
		}
		return fmt.Sprintf("self-service (no person's gate): %s %s approved by Gantry alone, without a person's decision; %d %s so far | "+
			"this environment's requires_approval (on: a person decides risk 1), or the risk class of rule create_update_only%s in the approval matrix | %s",
			kinds, verb, applies, map[bool]string{true: "apply", false: "applies"}[applies == 1], map[bool]string{true: ", replace", false: ""}[strings.Contains(kinds, "replace")], runs)
	}
	cases := []struct {
		name   string
		matrix func(*risk.Matrix)
		// setup changes the organization's configuration and history; it returns the
		// run numbers the findings name.
		setup              func(t *testing.T, g govOrg)
		dev, stg           map[string]string
		devFinds, stgFinds []string
		// words: gate id -> what its "enforced by" says, per environment.
		words map[string]map[string]string
	}{{
		name: "default: no requires_approval in dev, a protected staging",
		dev:  devDefault, stg: stgDefault,
		devFinds: []string{driftOff, selfService("create or update in place", 0, "")},
		words: map[string]map[string]string{
			"dev": {
				"approval-create-update": "the default approval matrix (never edited), risk 1 (rule create_update_only): Gantry approves it by itself, bound to the same evidence as a person's approval; no person decides (risk 1 in an environment that does not require approval)",
				"approval-replace":       "the default approval matrix (never edited), risk 2 (rule replace): an admin or owner, not the requester",
				"approval-destroy":       "the default approval matrix (never edited), risk 3 (rule destroy): an owner, not the requester, freshly authenticated, typing DESTROY with a reason of 10+ characters",
				"plan":                   "executor mock simulates every phase (it says so of itself): nothing real is planned or applied",
				"apply-binding":          "the state table starts an apply only from an approval, and the apply re-checks the approved digest and the predecessor state; checked in the audit chain: 0 applies, each after an approval of the same plan digest",
				"verification":           "the state table lets a run succeed only through its verification; in the audit chain: 0 runs verified, 0 failed their verification",
				"entitlements":           "roles: operators, admins and owners request and decide; viewers and auditors only read; not restricted: every member sees it; the live-cloud entitlement is not asked: the executor changes nothing real",
			},
			"stg": {
				"approval-create-update": "the default approval matrix (never edited), risk 1-protected (rule create_update_only): one operator, admin or owner, not the requester",
				"drift":                  "a drift check of each workspace every 240 minutes (a refresh-only plan, run once across replicas)",
			},
		},
	}, {
		name:   "four eyes off for risk 1-protected, and a self-approved apply",
		matrix: func(m *risk.Matrix) { webtest.Decision(m, risk.Level1Protected).FourEyes = false },
		setup: func(t *testing.T, g govOrg) {
			operator := app.NewMember(t, g.slug, "Olga", authz.RoleOperator, false)
			r := waitForState(t, app, app.RequestRun(t, app.SessionFor(t, operator.UserID, g.id, time.Now()), bucketRequest(g.envs["stg"], "eu-west")), run.PendingApproval)
			_, err := app.System.Runs.Decisions.Approve(authz.WithSubject(context.Background(), operator.Subject(time.Now())), r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
			require.NoError(t, err, "four eyes off: the requester approves her own run")
			require.True(t, waitForState(t, app, r.ID, run.Succeeded).SelfApproved())
		},
		dev: devDefault, stg: with(stgDefault, map[string]string{"approval-create-update": governance.Flagged}),
		devFinds: []string{driftOff, selfService("create or update in place", 0, "")},
		stgFinds: []string{
			"self-approval possible: four eyes is off for risk 1-protected (create or update in place): the requester may approve her own run | four eyes on risk 1-protected in the approval matrix | ",
			"self-approved: 1 apply approved by their own requester | four eyes in the approval matrix (off here for risk 1-protected) | #1",
		},
		words: map[string]map[string]string{"stg": {
			"approval-create-update": "approval matrix version 1, risk 1-protected (rule create_update_only): one operator, admin or owner decides, but four eyes is off: the requester may approve her own run",
			"verification":           "the state table lets a run succeed only through its verification; in the audit chain: 1 run verified, 0 failed their verification",
		}},
	}, {
		name:   "four eyes off for risk 2",
		matrix: func(m *risk.Matrix) { webtest.Decision(m, risk.Level2).FourEyes = false },
		dev:    with(devDefault, map[string]string{"approval-replace": governance.Flagged, "approval-org-scoped": governance.Flagged}),
		stg:    with(stgDefault, map[string]string{"approval-replace": governance.Flagged, "approval-org-scoped": governance.Flagged}),
		devFinds: []string{driftOff, selfService("create or update in place", 0, ""),
			"self-approval possible: four eyes is off for risk 2 (replace, change to an org-scoped resource (IAM, policy)): the requester may approve her own run | four eyes on risk 2 in the approval matrix | "},
		stgFinds: []string{"self-approval possible: four eyes is off for risk 2 (replace, change to an org-scoped resource (IAM, policy)): the requester may approve her own run | four eyes on risk 2 in the approval matrix | "},
	}, {
		name: "replace moved to risk 1, within the floors (which refuse four eyes off for risk 3)",
		matrix: func(m *risk.Matrix) {
			for i := range m.Rules {
				if m.Rules[i].Condition == risk.CondReplace {
					m.Rules[i].Class = 1
				}
			}
		},
		setup: func(t *testing.T, g govOrg) {
			below := risk.Default()
			webtest.Decision(&below, risk.Level3).FourEyes = false
			_, err := app.System.Matrix.Save(g.owner, below, "four eyes off for risk 3")
			require.ErrorContains(t, err, "Risk 3 always needs four eyes", "the floors refuse four eyes off for risk 3")
		},
		dev:      with(devDefault, map[string]string{"approval-replace": governance.SelfService}),
		stg:      stgDefault,
		devFinds: []string{driftOff, selfService("create or update in place, replace", 0, "")},
		words: map[string]map[string]string{"stg": {
			"approval-replace": "approval matrix version 1, risk 1-protected (rule replace): one operator, admin or owner, not the requester",
		}},
	}, {
		name: "requires_approval off in staging, and a static credential",
		setup: func(t *testing.T, g govOrg) {
			no := false
			_, err := app.System.Environments.Update(g.sys, g.envs["stg"], environment.Input{Name: "stg", Tier: "staging", RequiresApproval: &no})
			require.NoError(t, err)
			require.NoError(t, app.System.Credentials.SetStaticReadCredential(g.owner, g.envs["stg"], "AKIA-static-read-value"))
			require.NoError(t, app.System.Credentials.SetStaticCredential(g.owner, g.envs["stg"], "AKIA-static-secret-value"))
		},
		dev: devDefault, stg: with(stgDefault, map[string]string{"approval-create-update": governance.SelfService, "credentials": governance.Flagged}),
		devFinds: []string{driftOff, selfService("create or update in place", 0, "")},
		stgFinds: []string{"standing credential: a static write credential (used by applies) has been set on this environment since <time>; " +
			"a static read credential (used by plans and verifications) has been set on this environment since <time>; workload identity should replace them | " +
			"this environment's static credentials (clear them) | ", selfService("create or update in place", 0, "")},
		words: map[string]map[string]string{"stg": {
			"credentials": "applies: a static write credential (standing access), set <date>; plans and verifications: a static read credential (standing access), set <date> (never the write credential)",
		}},
	}, {
		name: "a self-service apply, and an unevidenced apply planted in the chain",
		setup: func(t *testing.T, g govOrg) {
			operator := app.NewMember(t, g.slug, "Otto", authz.RoleOperator, false)
			r := waitForState(t, app, app.RequestRun(t, app.SessionFor(t, operator.UserID, g.id, time.Now()), bucketRequest(g.envs["dev"], "eu-west")), run.Succeeded)
			require.Equal(t, "self-service", r.ApprovalKind)
			require.False(t, r.SelfApproved(), "Gantry's approval is not the requester's")
			require.NoError(t, app.System.Audit.RecordAs(context.Background(), authz.System(g.id), audit.Entry{Action: "run.running", TargetType: "run",
				TargetID: "run-planted", EnvironmentID: g.envs["stg"], Data: map[string]any{"number": 7, "plan_digest": "sha256:planted"}}))
		},
		dev:      devDefault,
		stg:      with(stgDefault, map[string]string{"apply-binding": governance.Flagged}),
		devFinds: []string{driftOff, selfService("create or update in place", 1, "#1")},
		stgFinds: []string{"unevidenced: 1 apply started without a matching approval record (no approval before the apply, or one that bound another plan digest) | " +
			"none allows this: no setting lets an apply start without an approval in force; compare these runs' events in the audit history | #7"},
		words: map[string]map[string]string{"stg": {
			"apply-binding": "the state table starts an apply only from an approval, yet the audit chain holds 1 apply without a matching approval record (below)",
		}},
	}}
	for i, c := range cases {
		ok := t.Run(c.name, func(t *testing.T) {
			g := newGovOrg(t, app, fmt.Sprintf("gov%d", i), c.matrix)
			if c.setup != nil {
				c.setup(t, g)
			}
			envs := g.report(t, app)
			require.Equal(t, c.dev, gates(envs["dev"]), "dev")
			require.Equal(t, c.stg, gates(envs["stg"]), "stg")
			require.Equal(t, c.devFinds, findings(envs["dev"]), "dev")
			require.Equal(t, c.stgFinds, findings(envs["stg"]), "stg")
			for env, words := range c.words {
				for id, want := range words {
					require.Equal(t, want, timeless(gate(t, envs[env], id).EnforcedBy), "%s %s", env, id)
				}
			}
		})
		require.True(t, ok, c.name)
	}

	// On the page and in the Markdown: removing an enforcement flips its gate to a
	// finding, and putting it back flips it back.
	auditor := app.LoggedIn(t, "auditor@acme.test")
	statusOn := func(page, env, gate string) string {
		t.Helper()
		section := regexp.MustCompile(`(?s)data-testid="governance-env-` + env + `">.*?</section>`).FindString(page)
		require.NotEmpty(t, section, "no section for %s", env)
		m := regexp.MustCompile(`(?s)data-testid="gate-` + gate + `">.*?data-status="([^"]+)"`).FindStringSubmatch(section)
		require.NotNil(t, m, section)
		return m[1]
	}
	page := func() string {
		t.Helper()
		resp := app.Get(t, auditor, "/governance")
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		return body
	}
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	acme := authz.WithSubject(context.Background(), authz.Subject{UserID: "usr-admin", Name: "Adam", OrganizationID: app.Orgs["acme"], Role: authz.RoleOwner})
	body := page()
	require.Equal(t, "self-service (no person&#39;s gate)", statusOn(body, "development", "approval-create-update"))
	require.Equal(t, "enforced", statusOn(body, "development", "approval-replace"), "no requires_approval, yet a replace goes to an admin: a gate")
	for _, id := range []string{"approval-create-update", "credentials", "drift", "policy"} {
		require.Equal(t, "enforced", statusOn(body, "staging", id), id)
	}
	require.Contains(t, body, "Last 90 days: 0 break-glass windows")
	no, off := false, 0
	_, err := app.System.Environments.Update(acme, staging, environment.Input{Name: "staging", Tier: "staging", RequiresApproval: &no, DriftIntervalMinutes: &off})
	require.NoError(t, err)
	require.NoError(t, app.System.Credentials.SetStaticReadCredential(acme, staging, "AKIA-static-read-value"))
	require.NoError(t, app.System.Policies.SetModes(acme, staging, modesOf(t, app, acme, true)))
	body = page()
	require.Equal(t, "self-service (no person&#39;s gate)", statusOn(body, "staging", "approval-create-update"))
	require.Equal(t, "finding", statusOn(body, "staging", "credentials"))
	require.Equal(t, "unenforced-unknown", statusOn(body, "staging", "drift"))
	require.Equal(t, "annotating", statusOn(body, "staging", "policy"))
	require.Contains(t, body, "standing credential: a static read credential (used by plans and verifications) has been set on this environment since")
	require.Contains(t, body, "policy annotates only: every rule is advisory in this environment")
	require.Contains(t, body, `href="/environments/`+staging+`/policies"`, "a finding links to its setting")
	// The environment's settings form is linked for who may edit it, not for the auditor.
	require.NotContains(t, body, `href="/environments/`+staging+`/edit"`, "the auditor may not edit the environment")
	asAdmin := webtest.ReadBody(t, app.Get(t, app.LoggedIn(t, "admin@acme.test"), "/governance"))
	require.Contains(t, asAdmin, `href="/environments/`+staging+`/edit"`)
	require.NotContains(t, body, "AKIA-static-read-value", "the finding never shows the secret")
	resp := app.Get(t, auditor, "/governance.md")
	md := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Disposition"), "gantry-governance.md")
	require.True(t, strings.HasPrefix(md, "# Governance report: "+app.Orgs["acme"]))
	require.Regexp(t, `\| Approval: create or update in place \| [^|]+ \| self-service \(no person's gate\) \|`, md)
	require.Contains(t, md, "**Finding:** standing credential")
	require.Contains(t, md, "Setting: this environment's static credentials (clear them).")

	yes, hourly := true, 60
	_, err = app.System.Environments.Update(acme, staging, environment.Input{Name: "staging", Tier: "staging", RequiresApproval: &yes, DriftIntervalMinutes: &hourly})
	require.NoError(t, err)
	require.NoError(t, app.System.Credentials.ClearStaticReadCredential(acme, staging))
	require.NoError(t, app.System.Policies.SetModes(acme, staging, modesOf(t, app, acme, false)))
	body = page()
	for _, id := range []string{"approval-create-update", "credentials", "drift", "policy"} {
		require.Equal(t, "enforced", statusOn(body, "staging", id), id)
	}
	require.NotContains(t, regexp.MustCompile(`(?s)data-testid="governance-env-staging">.*?</section>`).FindString(body), `data-testid="findings"`)

	viewer := app.LoggedIn(t, "viewer@acme.test")
	resp = app.Get(t, viewer, "/governance")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// modesOf are modes for every rule of the organization's bundle: advisory, or each
// rule's own default.
func modesOf(t *testing.T, app *webtest.App, ctx context.Context, advisory bool) map[string]string {
	t.Helper()
	subject, _ := authz.SubjectFrom(ctx)
	b, err := app.System.Policies.Bundle(ctx, subject.OrganizationID)
	require.NoError(t, err)
	modes := map[string]string{}
	for _, r := range b.Rules() {
		modes[r.ID] = map[bool]string{true: "advisory", false: string(r.Enforcement)}[advisory]
	}
	return modes
}
