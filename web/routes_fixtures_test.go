package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/apitoken"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/idempotency"
	"gantry/models/notify"
	"gantry/models/org"
	"gantry/models/run"
	"gantry/models/state"
)

// The fixtures of the route table test (routes_test.go): in acme a run waiting for a
// decision with its workspace and environment, a member, an organization policy and an
// invitation; the same in globex; and in acme a restricted environment with a run and
// workspace in it, which acme's operator (and viewer) hold no grant for.

// routeWho is one signed-in person of the test and their CSRF token.
type routeWho struct {
	name   string
	client *http.Client
	csrf   string
}

// tenantObjects are one organization's objects the routes are pointed at (the hidden
// set has no member, policy or invitation: those do not live in an environment).
type tenantObjects struct {
	org        string
	run        run.Run
	ws, wsName string
	env        string
	member     string // a member's user id (the target of the member actions)
	policy     string // an organization policy's name
	invitation string // an open invitation's e-mail address
	export     string // a finished audit export's id
	webhook    string // a webhook's id
	delivery   string // one of that webhook's deliveries
	window     string // a break-glass window asked for on ws
	token      string // an API token of the organization's admin
	account    string // a service account's user id
	groupRule  string // a group rule's id
}

type routeFixtures struct {
	app *webtest.App
	// acme's people: the operator and the viewer hold no grant on the restricted
	// environment; the auditor reads everything and acts on nothing.
	admin, owner, operator, viewer, auditor routeWho
	// spare is a signed-in client the test may sign out (POST /logout).
	spare routeWho
	// acme's visible objects, globex's, and acme's restricted environment's.
	acme, globex, hidden tenantObjects
	hiddenEnvName        string
	sections             []string // the sections of the review page
	globexEnvs           []string
	runs                 map[string]run.Run // by id
	stateUser, statePass string             // a job credential of acme's run (apply phase)
}

// orgPolicy is the team label policy under another name, advisory so that it never
// holds a run back.
func orgPolicy(name string) (rego, tests string) {
	rename := strings.NewReplacer("team_label", name, `"soft_mandatory"`, `"advisory"`)
	return rename.Replace(teamLabelRego), rename.Replace(teamLabelTests)
}

func newRouteFixtures(t *testing.T) *routeFixtures {
	t.Helper()
	app := webtest.Start(t)
	fx := &routeFixtures{app: app, runs: map[string]run.Run{}}
	who := func(email string) routeWho {
		c := app.LoggedIn(t, email)
		return routeWho{name: email, client: c, csrf: app.CSRF(t, c)}
	}
	fx.admin, fx.owner, fx.operator = who("admin@acme.test"), who("owner@acme.test"), who("operator@acme.test")
	fx.viewer, fx.auditor, fx.spare = who("viewer@acme.test"), who("auditor@acme.test"), who("viewer@acme.test")
	globexOperator, globexAdmin := who("operator@globex.test"), who("admin@globex.test")

	userID := func(email string) string {
		var id string
		require.NoError(t, app.DB.Raw("SELECT id FROM users WHERE email = ?", email).Scan(&id).Error)
		require.NotEmpty(t, id, email)
		return id
	}
	fx.acme = tenantObjects{org: app.Orgs["acme"], env: app.OrgEnvironmentID(t, "acme", "staging"), member: userID("viewer@acme.test"),
		policy: "acme_label", invitation: "routes-invitee@acme.test", wsName: "routes-acme"}
	fx.globex = tenantObjects{org: app.Orgs["globex"], env: app.OrgEnvironmentID(t, "globex", "staging"), member: userID("operator@globex.test"),
		policy: "globex_label", invitation: "routes-invitee@globex.test", wsName: "routes-globex"}
	for _, name := range []string{"development", "staging", "production"} {
		fx.globexEnvs = append(fx.globexEnvs, app.OrgEnvironmentID(t, "globex", name))
	}

	// Organization policies first (advisory), so the runs' evidence already binds the
	// bundle that holds them.
	for _, p := range []struct {
		who  routeWho
		name string
	}{{fx.admin, fx.acme.policy}, {globexAdmin, fx.globex.policy}} {
		rego, tests := orgPolicy(p.name)
		resp := app.PostForm(t, p.who.client, "/policies/upload", uploadForm(p.who.csrf, p.name, rego, tests))
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "uploading %s: %s", p.name, body)
	}

	// The restricted environment: staging-like, approval required, no grants.
	fx.hiddenEnvName = "routes-restricted"
	resp := app.PostForm(t, fx.admin.client, "/environments", url.Values{"_csrf": {fx.admin.csrf}, "name": {fx.hiddenEnvName},
		"tier": {"staging"}, "requires_approval": {"on"}, "restricted": {"on"}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	fx.hidden = tenantObjects{org: app.Orgs["acme"], env: app.OrgEnvironmentID(t, "acme", fx.hiddenEnvName), wsName: "routes-hidden"}

	// A webhook each, on a receiver that takes everything, so that the runs below leave a
	// delivery each (the decision waiting).
	sink := newReceiver(t, http.StatusNoContent)
	fx.acme.webhook, _ = addHook(t, app, fx.admin.client, "routes-acme-hook", sink.URL, "json", notify.DecisionWaiting)
	fx.globex.webhook, _ = addHook(t, app, globexAdmin.client, "routes-globex-hook", sink.URL, "json", notify.DecisionWaiting)

	// One run each, all waiting for a decision: acme's requested by its operator, the
	// restricted one by acme's admin (the operator may not use that environment), globex's
	// by globex's operator.
	bucket := func(env, ws string) url.Values {
		return url.Values{"template": {"bucket"}, "environment": {env}, "workspace": {ws}, "kind": {"apply"},
			"inputs.name": {ws}, "inputs.retention_days": {"30"}, "inputs.region": {"eu-west"}}
	}
	acmeRun := app.RequestRun(t, fx.operator.client, bucket(fx.acme.env, fx.acme.wsName))
	hiddenRun := app.RequestRun(t, fx.admin.client, bucket(fx.hidden.env, fx.hidden.wsName))
	globexRun := app.RequestRun(t, globexOperator.client, bucket(fx.globex.env, fx.globex.wsName))
	for _, x := range []struct {
		id  string
		dst *tenantObjects
	}{{acmeRun, &fx.acme}, {hiddenRun, &fx.hidden}, {globexRun, &fx.globex}} {
		r := waitForState(t, app, x.id, run.PendingApproval)
		x.dst.run, x.dst.ws = r, r.WorkspaceID
		fx.runs[r.ID] = r
	}

	// A delivery row appears when the notice's fan-out job has run: woken by each.
	fannedOut := jobsFinished(t, app, "notify.fanout")
	for _, x := range []*tenantObjects{&fx.acme, &fx.globex} {
		bench.Eventually(t, "a delivery of "+x.webhook, 40*time.Second, func() (bool, any) {
			require.NoError(t, app.DB.Raw("SELECT id FROM webhook_deliveries WHERE webhook_id = ? ORDER BY created_at LIMIT 1", x.webhook).
				Scan(&x.delivery).Error)
			return x.delivery != "", "none yet"
		}, bench.Wake(fannedOut))
	}

	// The review page's sections, as it draws them (each has its own pager route).
	review := webtest.ReadBody(t, app.Get(t, fx.admin.client, "/runs/"+fx.acme.run.ID+"/review"))
	for _, m := range reviewSection.FindAllStringSubmatch(review, -1) {
		fx.sections = append(fx.sections, m[1])
	}
	require.NotEmpty(t, fx.sections, "the review page has no sections: %s", review)

	// A break-glass window each, asked for on the run's workspace. Written directly: the
	// mock executor has no live cloud, so the service refuses to open a window on it.
	for _, x := range []*tenantObjects{&fx.acme, &fx.hidden, &fx.globex} {
		x.window = "bgw-routes" + strings.TrimPrefix(x.ws, "ws-")
		require.NoError(t, app.DB.Exec(`INSERT INTO breakglass_windows (id, organization_id, environment_id, workspace_id, state, reason,
			duration_minutes, terms_digest, requested_by, requested_by_name, decision_deadline)
			VALUES (?, ?, ?, ?, 'REQUESTED', 'routes fixture window', 60, 'sha256:routes', ?, 'Routes', now() + interval '1 day')`,
			x.window, x.org, x.env, x.ws, x.run.RequestedBy).Error)
	}

	orgs := org.NewService(app.DB, audit.New(app.DB))
	require.NoError(t, orgs.Invite(t.Context(), fx.acme.org, fx.acme.invitation, authz.RoleOperator))
	require.NoError(t, orgs.Invite(t.Context(), fx.globex.org, fx.globex.invitation, authz.RoleOperator))

	// One finished audit export each, asked for by acme's auditor and globex's admin.
	fx.acme.export = requestExport(t, app, fx.auditor.client, fx.auditor.csrf, nil)
	fx.globex.export = requestExport(t, app, globexAdmin.client, globexAdmin.csrf, nil)

	// An API token of each organization's admin, and a service account each.
	for _, x := range []struct {
		dst   *tenantObjects
		admin string
	}{{&fx.acme, "admin@acme.test"}, {&fx.globex, "admin@globex.test"}} {
		ctx := authz.WithSubject(t.Context(), authz.Subject{UserID: userID(x.admin), OrganizationID: x.dst.org, Role: authz.RoleAdmin})
		sa, err := app.System.Members.AddServiceAccount(ctx, "routes-account", authz.RoleOperator)
		require.NoError(t, err)
		tok, err := app.System.Tokens.Issue(ctx, apitoken.Issue{Name: "routes-token", Scopes: []string{"read"}})
		require.NoError(t, err)
		x.dst.account, x.dst.token = sa.ID, tok.ID
	}

	// A group rule each, added by the organization's owner, for a group no one is in.
	for _, x := range []struct {
		dst   *tenantObjects
		owner string
	}{{&fx.acme, "owner@acme.test"}, {&fx.globex, "owner@globex.test"}} {
		ctx := authz.WithSubject(t.Context(), authz.Subject{UserID: userID(x.owner), OrganizationID: x.dst.org, Role: authz.RoleOwner})
		rule, err := app.System.GroupRules.AddRule(ctx, org.RuleInput{Group: "routes-group-" + x.dst.wsName, Role: authz.RoleViewer})
		require.NoError(t, err)
		x.dst.groupRule = rule.ID
	}

	var err error
	fx.stateUser, fx.statePass, err = app.System.State.IssueCredentials(t.Context(), fx.acme.org, fx.acme.ws, fx.acme.run.ID, state.PhaseApply, time.Hour)
	require.NoError(t, err)
	return fx
}

var reviewSection = regexp.MustCompile(`data-testid="section-([a-z-]+)"`)

// globexMarkers are strings only globex's objects carry: no acme page may hold one.
func (fx *routeFixtures) globexMarkers() []string {
	m := []string{fx.globex.org, fx.globex.run.ID, fx.globex.ws, fx.globex.wsName, fx.globex.member, fx.globex.policy,
		fx.globex.invitation, fx.globex.export, fx.globex.webhook, fx.globex.delivery, fx.globex.window, fx.globex.token, fx.globex.account, fx.globex.groupRule, "routes-group-" + fx.globex.wsName, "routes-globex-hook", "@globex.test", "Globex"}
	return append(m, fx.globexEnvs...)
}

// hiddenMarkers are strings only the restricted environment's objects carry: no page
// of a member without a grant may hold one.
func (fx *routeFixtures) hiddenMarkers() []string {
	return []string{fx.hidden.run.ID, fx.hidden.ws, fx.hidden.wsName, fx.hidden.env, fx.hiddenEnvName, fx.hidden.window}
}

// routeT is what the route checks need of a test: a *testing.T, or the stand-in that
// records a check's failures (failures).
type routeT interface {
	require.TestingT
	Helper()
	Logf(format string, args ...any)
	Context() context.Context
}

// recordingT records failures instead of failing the test.
type recordingT struct {
	*testing.T
	failed []string
}

func (r *recordingT) Errorf(format string, args ...any) {
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

// FailNow ends the check, as it ends a test.
func (r *recordingT) FailNow() { runtime.Goexit() }

// failures runs check on a stand-in for t and returns the failures it reported: how a
// test shows that a check can fail.
func failures(t *testing.T, check func(routeT)) []string {
	r := &recordingT{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.failed
}

// call is one request of the test.
type call struct {
	who         routeWho   // the signed-in person (zero: nobody)
	basic       *[2]string // the state backend's Basic-auth credential
	method      string
	path        string     // escaped path and query, sent as written
	form        url.Values // sent urlencoded, with who's CSRF token and a fresh idempotency key
	contentType string     // with body: a raw body instead of form
	body        string
}

func (c call) String() string {
	who := c.who.name
	if c.basic != nil {
		who = "state credential"
	}
	if who == "" {
		who = "nobody"
	}
	return fmt.Sprintf("%s %s as %s", c.method, c.path, who)
}

type answer struct {
	status           int
	body, location   string
	contentType, csp string
}

// send makes the call and reads the answer: all of it, or of a live stream its first
// event. Whatever the call, the answer is never a 5xx.
func (fx *routeFixtures) send(t routeT, c call) answer {
	t.Helper()
	ctx, cancel := bench.Context(t.Context(), 10*time.Second)
	defer cancel()
	var body io.Reader
	contentType := c.contentType
	switch {
	case c.contentType != "":
		body = strings.NewReader(c.body)
	case c.form != nil:
		form := url.Values{}
		for k, v := range c.form {
			form[k] = append([]string(nil), v...)
		}
		if c.who.csrf != "" && !form.Has("_csrf") {
			form.Set("_csrf", c.who.csrf)
		}
		if !form.Has(idempotency.Field) {
			form.Set(idempotency.Field, idempotency.NewKey())
		}
		body, contentType = strings.NewReader(form.Encode()), "application/x-www-form-urlencoded"
	}
	req, err := http.NewRequestWithContext(ctx, c.method, fx.app.URL+c.path, body)
	require.NoError(t, err, c.String())
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.who.csrf != "" && c.method != http.MethodGet {
		req.Header.Set("X-CSRF-Token", c.who.csrf)
	}
	if strings.HasPrefix(c.path, "/api/") && c.method != http.MethodGet && c.method != http.MethodHead {
		req.Header.Set(idempotency.Header, idempotency.NewKey()) // as every API client sends one
	}
	if c.basic != nil {
		req.SetBasicAuth(c.basic[0], c.basic[1])
	}
	client := c.who.client
	if client == nil { // nobody: no cookies, every hop seen
		client = &http.Client{Timeout: 15 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := client.Do(req)
	require.NoError(t, err, "%s (%v)", c, context.Cause(ctx))
	defer resp.Body.Close()
	var b []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A live stream stays open: its first event is what it shows.
		var buf bytes.Buffer
		chunk := make([]byte, 4096)
		for !bytes.Contains(buf.Bytes(), []byte("\n\n")) {
			n, err := resp.Body.Read(chunk)
			buf.Write(chunk[:n])
			if err != nil {
				break
			}
		}
		b = buf.Bytes()
	} else {
		b, err = io.ReadAll(resp.Body)
		require.NoError(t, err, "%s (%v)", c, context.Cause(ctx))
	}
	a := answer{status: resp.StatusCode, body: string(b), location: resp.Header.Get("Location"),
		contentType: resp.Header.Get("Content-Type")}
	t.Logf("%s -> %d", c, a.status) // -v shows what every route answered
	require.Less(t, a.status, 500, "%s: a server error\n%s", c, a.body)
	return a
}

// evidenceForm is what a review page submits with a decision on r: its evidence, a
// reason long enough for any decision, and the typed confirmation.
func evidenceForm(r run.Run) url.Values {
	v := url.Values{}
	for field, value := range run.EvidenceOf(r).Fields() {
		v.Set(field, value)
	}
	v.Set("reason", "checked by the route table test")
	v.Set("confirm", "yes")
	if run.RequirementOf(r).Elevated {
		v.Set("confirm", run.ConfirmWord)
	}
	return v
}

// jsonBody encodes v for an API call.
func jsonBody(t routeT, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
