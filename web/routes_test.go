package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/risk"
	"gantry/models/run"
	"gantry/static"
	"gantry/views/paths"
)

// The route table test (issue 9): every route echo has registered, enumerated from
// Server.Echo.Routes(), so a new route is checked without editing this file:
//
//   - another tenant's id is a 404 (tenant isolation, DESIGN §4);
//   - a member without a grant gets a 404 for the objects of a restricted environment,
//     even where their role could not act on them anyway (cannot see wins over cannot
//     act); auditors, admins and owners see them;
//   - NUL and bytes that are not UTF-8 in a path parameter, the query or a form value
//     are a 4xx, and so is a body that cannot be read;
//   - no page shows another tenant's objects, nor a restricted environment's to a
//     member without a grant;
//   - return_to never leads off the site after a sign-in;
//   - nothing anywhere is a 5xx.
//
// Each route's parameters are filled from objectParams and enumParams (by parameter
// name and path prefix): a route naming an object gets the tenant and restriction
// checks for it, every GET route the leak check, every route the bad-bytes checks and
// every mutating route the malformed-body checks. A route with a parameter neither
// table knows, or a mutating route without parameters that routeChecks says nothing
// about (its form may name objects by id), fails the test: a new route forces a
// decision. The few routes given no tenant case are in routeExemptions, with reasons.
// Run with -v to see what every request was answered.

// exemption is a route the table gives no tenant or restriction case, and why; it
// still gets the bad-bytes and malformed-body checks, with fill for its parameters.
type exemption struct {
	why  string
	fill map[string]string
}

// routeExemptions holds at most eight routes.
var routeExemptions = map[string]exemption{
	"GET /static/*": {why: "embedded stylesheet, scripts and icons, public and the same for everyone: no organization's data",
		fill: map[string]string{"*": static.Hashed(static.CSS)}},
	"HEAD /static/*": {why: "the same files as GET /static/*, without their bodies",
		fill: map[string]string{"*": static.Hashed(static.CSS)}},
	"GET /api/v1/templates/:name": {why: "the shipped template catalog, as GET /catalog/:name", fill: map[string]string{"name": "bucket"}},
	"GET /catalog/:name": {why: "the shipped template catalog is the same for every organization: :name names no tenant's object " +
		"(an unknown name is a 404 from the catalog)", fill: map[string]string{"name": "bucket"}},
	echo.RouteNotFound + " /": {why: "echo's own 404 handler of a middleware group, not a route anyone calls: the test sends it an " +
		"unknown address"},
	echo.RouteNotFound + " /*": {why: "echo's own 404 handler of a middleware group (any deeper unknown address)",
		fill: map[string]string{"*": "routes/no-such-page"}},
}

// objectParam fills a path parameter that names an object of one organization.
type objectParam struct {
	param, prefix string
	what          string
	// own is acme's object (in a visible environment), other globex's, hidden the one in
	// acme's restricted environment ("" when the object does not live in an
	// environment, with noHidden saying so).
	own, other, hidden string
	noHidden           string
	// actor is who tries other's id: someone of acme allowed to act on own.
	actor routeWho
	// state: the route is the state backend, which takes a job's Basic-auth credential.
	state bool
}

// enumParam fills a path parameter that is one of a fixed set of words.
type enumParam struct {
	param, prefix string
	values        func(method string) []string
}

func (fx *routeFixtures) objectParams() []objectParam {
	return []objectParam{
		{param: "id", prefix: "/runs/", what: "run", own: fx.acme.run.ID, other: fx.globex.run.ID, hidden: fx.hidden.run.ID, actor: fx.admin},
		{param: "id", prefix: "/workspaces/", what: "workspace", own: fx.acme.ws, other: fx.globex.ws, hidden: fx.hidden.ws, actor: fx.admin},
		// The environment pages need environments.manage, which the operator lacks: for
		// a visible environment a 403 (cannot act), for the restricted one a 404 (cannot
		// see wins): these routes are about the environment itself.
		{param: "id", prefix: "/environments/", what: "environment", own: fx.acme.env, other: fx.globex.env, hidden: fx.hidden.env, actor: fx.admin},
		{param: "id", prefix: "/api/v1/runs/", what: "run", own: fx.acme.run.ID, other: fx.globex.run.ID, hidden: fx.hidden.run.ID, actor: fx.admin},
		{param: "id", prefix: "/api/v1/workspaces/", what: "workspace", own: fx.acme.ws, other: fx.globex.ws, hidden: fx.hidden.ws, actor: fx.admin},
		{param: "id", prefix: "/api/v1/audit/exports/", what: "audit export", own: fx.acme.export, other: fx.globex.export, actor: fx.auditor,
			noHidden: "an export is of the organization's whole log (as on its page)"},
		{param: "name", prefix: "/api/v1/policies/", what: "organization policy", own: fx.acme.policy, other: fx.globex.policy, actor: fx.admin,
			noHidden: "an organization policy applies to the whole organization, not to one environment"},
		{param: "id", prefix: "/api/v1/environments/", what: "environment", own: fx.acme.env, other: fx.globex.env, hidden: fx.hidden.env, actor: fx.admin},
		{param: "id", prefix: "/members/rules/", what: "group rule", own: fx.acme.groupRule, other: fx.globex.groupRule, actor: fx.owner,
			noHidden: "a group rule belongs to the organization, not to an environment"},
		{param: "id", prefix: "/api/v1/group-rules/", what: "group rule", own: fx.acme.groupRule, other: fx.globex.groupRule, actor: fx.owner,
			noHidden: "a group rule belongs to the organization, not to an environment; only owners change one"},
		{param: "id", prefix: "/members/", what: "member", own: fx.acme.member, other: fx.globex.member, actor: fx.owner,
			noHidden: "a membership belongs to the organization, not to an environment"},
		{param: "name", prefix: "/policies/", what: "organization policy", own: fx.acme.policy, other: fx.globex.policy, actor: fx.admin,
			noHidden: "an organization policy applies to the whole organization, not to one environment"},
		{param: "id", prefix: "/audit/exports/", what: "audit export", own: fx.acme.export, other: fx.globex.export, actor: fx.auditor,
			noHidden: "an export is of the organization's whole log (its filters only narrow it), not of one environment; only " +
				"auditors, admins and owners, who see restricted environments, may have one"},
		{param: "id", prefix: "/settings/webhooks/", what: "webhook", own: fx.acme.webhook, other: fx.globex.webhook, actor: fx.admin,
			noHidden: "a webhook belongs to the organization; only admins and owners, who see restricted environments, manage one"},
		{param: "id", prefix: "/settings/deliveries/", what: "webhook delivery", own: fx.acme.delivery, other: fx.globex.delivery, actor: fx.admin,
			noHidden: "a delivery belongs to its organization's webhook; only admins and owners, who see restricted environments, manage one"},
		{param: "id", prefix: "/settings/tokens/", what: "API token", own: fx.acme.token, other: fx.globex.token, actor: fx.admin,
			noHidden: "a token belongs to its holder in the organization, not to an environment"},
		{param: "id", prefix: "/breakglass/", what: "break-glass window", own: fx.acme.window, other: fx.globex.window, hidden: fx.hidden.window, actor: fx.admin},
		{param: "workspace", prefix: "/state/", what: "workspace state", own: fx.acme.ws, other: fx.globex.ws, state: true,
			noHidden: "the state backend is called by a job with its run's credential, never by a member: the grant rule is about people " +
				"(the credential reaches its own workspace only)"},
	}
}

func (fx *routeFixtures) enumParams() []enumParam {
	actions := func(string) []string {
		var out []string
		for _, a := range run.Actions {
			out = append(out, string(a))
		}
		return out
	}
	return []enumParam{
		// SCIM's resources, behind each organization's SCIM token (TestSCIMTenancyAndTokens).
		{param: "*", prefix: "/scim/v2/", values: func(string) []string { return []string{"Users", "Groups"} }},
		{param: "action", prefix: "/runs/", values: actions},
		{param: "section", prefix: "/runs/", values: func(string) []string { return fx.sections }},
		{param: "action", prefix: "/settings/webhooks/", values: func(string) []string { return []string{"enable", "disable", "delete"} }},
		{param: "action", prefix: "/breakglass/", values: func(string) []string { return paths.BreakglassActions }},
		{param: "action", prefix: "/members/", values: func(method string) []string {
			if method == http.MethodGet {
				return []string{"remove"} // the confirmation page
			}
			return []string{"role", "cloud-live", "grants", "remove"}
		}},
	}
}

// routeCase is one route, with its enumerated parameters fixed.
type routeCase struct {
	key     string // "METHOD /pattern" as registered
	method  string // what the test sends
	pattern string
	fill    map[string]string // escaped values of the other parameters
	object  *objectParam
	exempt  string
	label   string
}

// path is the case's address with its object parameter set to id (escaped) and the
// parameters in override written as given.
func (c routeCase) path(id string, override map[string]string) string {
	values := map[string]string{}
	for k, v := range c.fill {
		values[k] = v
	}
	if c.object != nil {
		values[c.object.param] = url.PathEscape(id)
	}
	for k, v := range override {
		values[k] = v
	}
	if c.method != c.routeMethod() { // echo's not-found handlers: an unknown address
		if v, ok := override["*"]; ok {
			return "/routes" + v
		}
		return "/routes/no-such-page"
	}
	var b strings.Builder
	for i := 0; i < len(c.pattern); {
		switch c.pattern[i] {
		case ':':
			j := i + 1
			for j < len(c.pattern) && c.pattern[j] != '/' {
				j++
			}
			b.WriteString(values[c.pattern[i+1:j]])
			i = j
		case '*':
			b.WriteString(values["*"])
			i++
		default:
			b.WriteByte(c.pattern[i])
			i++
		}
	}
	return b.String()
}

func (c routeCase) routeMethod() string { return strings.SplitN(c.key, " ", 2)[0] }

// paramNames lists the parameters of an echo route pattern ("*" for a wildcard).
func paramNames(pattern string) []string {
	var out []string
	for _, seg := range strings.Split(pattern, "/") {
		if name, ok := strings.CutPrefix(seg, ":"); ok {
			out = append(out, name)
		}
		if strings.HasSuffix(seg, "*") {
			out = append(out, "*")
		}
	}
	return out
}

func mutating(method string) bool { return method != http.MethodGet && method != http.MethodHead }

// routeCases turns the registered routes into cases, and lists the routes it has no
// case for, with why.
func routeCases(routes []*echo.Route, objects []objectParam, enums []enumParam) (cases []routeCase, uncovered []string) {
	for _, r := range routes {
		key := r.Method + " " + r.Path
		if ex, ok := routeExemptions[key]; ok {
			method := r.Method
			if method == echo.RouteNotFound {
				method = http.MethodGet
			}
			cases = append(cases, routeCase{key: key, method: method, pattern: r.Path, fill: ex.fill, exempt: ex.why, label: key})
			continue
		}
		base := routeCase{key: key, method: r.Method, pattern: r.Path}
		combos := []map[string]string{{}}
		var missing []string
		for _, p := range paramNames(r.Path) {
			i := slices.IndexFunc(objects, func(o objectParam) bool { return o.param == p && strings.HasPrefix(r.Path, o.prefix) })
			if i >= 0 {
				if base.object != nil {
					missing = append(missing, ":"+p+" (a second object)")
				}
				base.object = &objects[i]
				continue
			}
			j := slices.IndexFunc(enums, func(e enumParam) bool { return e.param == p && strings.HasPrefix(r.Path, e.prefix) })
			if j < 0 {
				missing = append(missing, ":"+p)
				continue
			}
			var next []map[string]string
			for _, combo := range combos {
				for _, v := range enums[j].values(r.Method) {
					m := map[string]string{p: url.PathEscape(v)}
					for k, v := range combo {
						m[k] = v
					}
					next = append(next, m)
				}
			}
			combos = next
		}
		if base.object == nil && mutating(r.Method) {
			if _, ok := routeChecks[key]; !ok {
				missing = append(missing, "no routeChecks entry (which form fields name objects, or why none do)")
			}
		}
		if len(missing) > 0 {
			uncovered = append(uncovered, key+": "+strings.Join(missing, ", "))
			continue
		}
		for _, combo := range combos {
			c := base
			c.fill, c.label = combo, key
			var words []string
			for _, p := range paramNames(r.Path) {
				if v, ok := combo[p]; ok {
					words = append(words, p+"="+v)
				}
			}
			if len(words) > 0 {
				c.label += " " + strings.Join(words, " ")
			}
			cases = append(cases, c)
		}
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].label < cases[j].label })
	sort.Strings(uncovered)
	return cases, uncovered
}

func TestRouteTable(t *testing.T) {
	t.Parallel()
	fx := newRouteFixtures(t)
	routes := fx.app.Server.Echo.Routes()

	t.Run("every route has a case", func(t *testing.T) {
		cases, uncovered := routeCases(routes, fx.objectParams(), fx.enumParams())
		require.Empty(t, uncovered, "routes without a case: fill their parameters in objectParams/enumParams, "+
			"say in routeChecks what a mutating route's form names, or exempt them with a reason")
		require.LessOrEqual(t, len(routeExemptions), 8, "at most eight exemptions")
		registered := map[string]bool{}
		for _, r := range routes {
			registered[r.Method+" "+r.Path] = true
		}
		for key := range routeExemptions {
			require.True(t, registered[key], "exemption %s names no registered route", key)
		}
		for key := range routeChecks {
			require.True(t, registered[key], "routeChecks entry %s names no registered route", key)
		}
		for key := range listShows {
			require.True(t, registered["GET "+strings.SplitN(key, "?", 2)[0]], "listShows entry %s names no registered route", key)
		}
		covered := map[string]bool{}
		for _, c := range cases {
			covered[c.key] = true
		}
		require.Equal(t, registered, covered, "every registered route is a case")
	})

	cases, _ := routeCases(routes, fx.objectParams(), fx.enumParams())

	t.Run("planted routes are reported and a planted leak is caught", func(t *testing.T) {
		// Routes planted into this app (after the cases above were taken from it): one
		// whose parameter no table knows and a mutating one without parameters (its form
		// could name objects), which are reported until someone decides; one more under
		// /runs/ with an unknown parameter; and a run page, checked like every run route
		// without editing anything, whose handler reads the run without its organization.
		leaky := func(c echo.Context) error {
			var id string
			if err := fx.app.DB.Raw("SELECT id FROM runs WHERE id = ?", c.Param("id")).Scan(&id).Error; err != nil {
				return err
			}
			if id == "" {
				return echo.ErrNotFound
			}
			return c.String(http.StatusOK, "run "+id)
		}
		e := fx.app.Server.Echo
		e.GET("/planted/:id", leaky)
		e.POST("/planted", leaky)
		e.POST("/runs/:id/planted/:part", leaky)
		e.GET("/runs/:id/planted", leaky)
		planted, uncovered := routeCases(e.Routes(), fx.objectParams(), fx.enumParams())
		require.Equal(t, []string{
			"GET /planted/:id: :id",
			"POST /planted: no routeChecks entry (which form fields name objects, or why none do)",
			"POST /runs/:id/planted/:part: :part",
		}, uncovered)
		i := slices.IndexFunc(planted, func(c routeCase) bool { return c.key == "GET /runs/:id/planted" })
		require.GreaterOrEqual(t, i, 0)
		c := planted[i]
		require.Equal(t, "run", c.object.what)

		failed := failures(t, func(rt routeT) { fx.checkOtherTenant(rt, c) })
		require.Len(t, failed, 1)
		require.Contains(t, failed[0], "run of another organization")
		failed = failures(t, func(rt routeT) { fx.checkRestricted(rt, c) })
		require.Len(t, failed, 1)
		require.Contains(t, failed[0], "run in the restricted environment as operator@acme.test")
	})

	for _, c := range cases {
		t.Run(c.label, func(t *testing.T) {
			fx.checkBadBytes(t, c)
			if mutating(c.method) {
				fx.checkMalformedBodies(t, c)
			}
			if c.exempt != "" {
				if c.method != c.routeMethod() {
					a := fx.send(t, call{who: fx.admin, method: http.MethodGet, path: c.path("", nil)})
					require.Equal(t, http.StatusNotFound, a.status, "an unknown address")
				}
				return
			}
			if c.object != nil {
				fx.checkOtherTenant(t, c)
				fx.checkRestricted(t, c)
			}
			if c.method == http.MethodGet {
				fx.checkNoLeak(t, c)
			}
			if rc, ok := routeChecks[c.key]; ok && rc.check != nil {
				rc.check(t, fx, c)
			}
		})
	}

	t.Run("the auditor changes nothing", func(t *testing.T) {
		// Every mutating route, sent as acme's auditor with a well-formed body on acme's
		// own objects, is refused as forbidden, except the few that are an auditor's own.
		own := map[string]string{
			"POST /logout":                 "ends the auditor's own session",
			"POST /org/switch":             "moves the auditor's own session to another of their organizations",
			"POST /audit/exports":          "exporting the log is the auditor's work",
			"POST /settings/notifications": "the auditor's own notification preferences",
			"POST /settings/tokens":        "the auditor's own API token (an audit pipeline's, with the audit scope)",
			"POST /api/v1/audit/exports":   "exporting the log is the auditor's work",
			"POST /workload/introspect":    "a cloud's question about a workload token, outside any session: it changes nothing",
			"POST /scim/v2/*":              scimOutside,
			"PUT /scim/v2/*":               scimOutside,
			"PATCH /scim/v2/*":             scimOutside,
			"DELETE /scim/v2/*":            scimOutside,
		}
		sent := 0
		for _, c := range cases {
			if !mutating(c.method) || c.exempt != "" || (c.object != nil && c.object.state) {
				continue
			}
			if _, ok := own[c.key]; ok {
				continue
			}
			id := ""
			if c.object != nil {
				id = c.object.own
			}
			cl := call{who: fx.auditor, method: c.method, path: c.path(id, nil)}
			cl.form, cl.contentType, cl.body = fx.payload(t, c, id)
			a := fx.send(t, cl)
			require.Equal(t, http.StatusForbidden, a.status, "%s as the auditor: %s", c.label, a.body)
			sent++
		}
		require.Greater(t, sent, 15, "the mutating routes were enumerated")
	})

	// Whatever the routes were sent, no decision was taken on the fixtures' runs and
	// nothing of globex changed.
	for _, r := range []run.Run{fx.acme.run, fx.hidden.run, fx.globex.run} {
		require.Equal(t, run.PendingApproval, waitForState(t, fx.app, r.ID, run.PendingApproval).State)
	}
	require.EqualValues(t, 1, countRows(t, fx.app, "SELECT count(*) FROM invitations WHERE organization_id = ? AND email = ?", fx.globex.org, fx.globex.invitation))
	require.EqualValues(t, 1, countRows(t, fx.app, "SELECT count(*) FROM org_policies WHERE organization_id = ? AND name = ? AND active", fx.globex.org, fx.globex.policy))
	require.EqualValues(t, 6, countRows(t, fx.app, "SELECT count(*) FROM memberships WHERE organization_id = ?", fx.globex.org),
		"globex's demo members and its service account")
	require.Zero(t, countRows(t, fx.app, "SELECT count(*) FROM environments WHERE name LIKE 'routes-edit%' OR name LIKE 'routes-new%'"))
	require.Zero(t, countRows(t, fx.app, "SELECT count(*) FROM environment_grants"), "no grant was given")
	require.Zero(t, countRows(t, fx.app, "SELECT count(*) FROM environment_policy_modes"), "no policy mode was set")
	require.EqualValues(t, 3, countRows(t, fx.app, "SELECT count(*) FROM breakglass_windows WHERE state = 'REQUESTED' AND id LIKE 'bgw-routes%'"),
		"no window was decided on")
	require.EqualValues(t, 3, countRows(t, fx.app, "SELECT count(*) FROM breakglass_windows"), "no window was asked for")
}

// who sends the case's bad-bytes and malformed-body checks: acme's admin (the state
// backend: acme's job credential; signing out: a client that may be signed out).
func (fx *routeFixtures) universal(c routeCase) call {
	switch {
	case c.object != nil && c.object.state:
		return call{basic: &[2]string{fx.stateUser, fx.statePass}}
	case c.pattern == "/logout":
		return call{who: fx.spare}
	}
	return call{who: fx.admin}
}

// pathBadBytes are NUL and bytes that are not UTF-8, as a path or query carries them.
var pathBadBytes = []string{"%00", "%ff", "%c3%28"}

func is4xx(status int) bool { return status >= 400 && status < 500 }

// checkBadBytes: bad bytes in each path parameter, in the query and (mutating routes)
// in a form value or JSON string are a 4xx.
func (fx *routeFixtures) checkBadBytes(t *testing.T, c routeCase) {
	own := ""
	if c.object != nil {
		own = c.object.own
	}
	base := fx.universal(c)
	base.method = c.method
	form, contentType, body := fx.payload(t, c, own)
	send := func(path string, edit func(*call)) {
		t.Helper()
		cl := base
		cl.path, cl.form, cl.contentType, cl.body = path, form, contentType, body
		if edit != nil {
			edit(&cl)
		}
		a := fx.send(t, cl)
		require.True(t, is4xx(a.status), "%s: want a 4xx, got %d\n%s", cl, a.status, a.body)
	}
	for _, bad := range pathBadBytes {
		for _, p := range paramNames(c.pattern) {
			v := "x" + bad
			if p == "*" {
				v = "/x" + bad
			}
			send(c.path(own, map[string]string{p: v}), nil)
		}
		if c.method != c.routeMethod() && len(paramNames(c.pattern)) == 0 {
			send("/routes/x"+bad, nil)
		}
		send(c.path(own, nil)+"?routes="+bad, nil)
		send(c.path(own, nil)+"?routes"+bad+"=1", nil)
	}
	if !mutating(c.method) || (c.object != nil && c.object.state) {
		// The state backend's bodies are tofu's JSON, stored as bytes (encrypted): the
		// edge leaves them to the handler; its checks here are the path, the query and
		// (TestEdgeRefusesBadBytes) the credential, and the broken bodies below.
		return
	}
	path := c.path(own, nil)
	for _, bad := range badBytes {
		if contentType == echo.MIMEApplicationJSON {
			send(path, func(cl *call) { cl.body = `{"name":"routes-` + bad.raw + `","tier":"staging"}` })
			continue
		}
		send(path, func(cl *call) {
			cl.form = url.Values{}
			for k, v := range form {
				cl.form[k] = v
			}
			cl.form.Set("routes_note", "a"+bad.raw+"b")
		})
	}
	if contentType == echo.MIMEApplicationJSON {
		send(path, func(cl *call) { cl.body = `{"name":"routes-\u0000","tier":"staging"}` })
	}
}

// checkMalformedBodies: a body that cannot be read is a 4xx.
func (fx *routeFixtures) checkMalformedBodies(t *testing.T, c routeCase) {
	own := ""
	if c.object != nil {
		own = c.object.own
	}
	bodies := [][2]string{
		{"application/x-www-form-urlencoded", "%zz=1"},
		{"application/x-www-form-urlencoded", "name=a%"},
		{"multipart/form-data", "name=x"},
	}
	if strings.HasPrefix(c.pattern, "/api/") || (c.object != nil && c.object.state) {
		bodies = append(bodies, [2]string{"application/json", `{"name": "routes`}, [2]string{"application/json", `{"name": 1,}`})
	}
	for _, b := range bodies {
		cl := fx.universal(c)
		cl.method, cl.path, cl.contentType, cl.body = c.method, c.path(own, nil), b[0], b[1]
		a := fx.send(t, cl)
		require.True(t, is4xx(a.status), "%s with %s %q: want a 4xx, got %d\n%s", cl, b[0], b[1], a.status, a.body)
	}
}

// payload is what the case sends to object id (unescaped): a form, or a JSON or state
// body. It is what a page would send, so that a refusal comes from the object's
// lookup, not from a missing field.
func (fx *routeFixtures) payload(t routeT, c routeCase, id string) (form url.Values, contentType, body string) {
	if !mutating(c.method) {
		return nil, "", ""
	}
	if c.object != nil && c.object.state {
		// Broken on purpose: a well-formed one would change the state or take the lock
		// of acme's workspace. The credential and workspace are checked before the body.
		return nil, echo.MIMEApplicationJSON, `{"ID": "routes`
	}
	if strings.HasPrefix(c.pattern, "/api/") {
		return nil, echo.MIMEApplicationJSON, fx.apiPayload(t, c, id)
	}
	form = url.Values{}
	switch c.pattern {
	case "/runs/:id/:action":
		if r, ok := fx.runs[id]; ok {
			form = evidenceForm(r)
		}
		form.Set("rule_id", "org."+fx.acme.policy)
		form.Set("rule_version", "1")
	case "/members/:id/:action":
		form.Set("role", "viewer")
		form.Set("confirm", "yes")
	case "/environments/:id":
		form = url.Values{"name": {"routes-edit"}, "tier": {"staging"}, "requires_approval": {"on"}}
	case "/policies/:name/active":
		form.Set("active", "true")
	case "/breakglass/:id/:action":
		form.Set("terms", "sha256:routes")
		form.Set("reason", "routes fixture reason")
	case "/workspaces/:id/breakglass":
		form.Set("reason", "routes fixture reason")
		form.Set("duration", "60")
	}
	return form, "", ""
}

// apiPayload is a well-formed JSON body for API route c on object id, so that what
// answers is the route's checks, not the body's shape.
func (fx *routeFixtures) apiPayload(t routeT, c routeCase, id string) string {
	evidence := func() map[string]any {
		r, ok := fx.runs[id]
		if !ok {
			r = run.Run{ID: id}
		}
		ev := run.EvidenceOf(r)
		return map[string]any{"run_id": ev.RunID, "plan_revision": ev.PlanRevision, "plan_digest": ev.PlanDigest, "config_digest": ev.ConfigDigest,
			"prior_state_version_id": ev.Predecessor.VersionID, "prior_serial": ev.Predecessor.Serial, "prior_lineage": ev.Predecessor.Lineage,
			"prior_state_digest": ev.Predecessor.Digest, "policy_evaluation_id": ev.PolicyEvaluationID,
			"policy_result_digest": ev.PolicyResultDigest, "policy_bundle_digest": ev.PolicyBundleDigest}
	}
	var body any
	switch c.pattern {
	case "/api/v1/runs/:id/approve":
		body = map[string]any{"evidence": evidence(), "confirm": run.ConfirmWord, "reason": "checked by the route table test"}
	case "/api/v1/runs/:id/reject":
		body = map[string]any{"evidence": evidence(), "reason": "checked by the route table test"}
	case "/api/v1/runs/:id/override":
		body = map[string]any{"evidence": evidence(), "rule_id": "org." + fx.acme.policy, "rule_version": "1", "reason": "checked by the route table test"}
	case "/api/v1/runs/:id/cancel":
		body = map[string]any{"reason": "checked by the route table test"}
	case "/api/v1/runs/:id/plan-again":
		return ""
	case "/api/v1/workspaces/:id/destroy":
		body = map[string]any{"confirm": "routes-confirm"}
	case "/api/v1/requests":
		body = map[string]any{"template": "bucket", "environment_id": fx.acme.env, "workspace": "routes-new",
			"inputs": map[string]string{"name": "routes-new", "retention_days": "30", "region": "eu-west"}}
	case "/api/v1/approval-matrix":
		body = map[string]any{"base_version": 1, "matrix": risk.Default(), "comment": "routes"}
	case "/api/v1/workspaces/:id/rollback":
		body = map[string]any{"version_id": "sv-routes-none"}
	case "/api/v1/environments/:id/policy-modes":
		body = map[string]any{"modes": map[string]string{}}
	case "/api/v1/policies/:name/active":
		body = map[string]any{"active": true}
	case "/api/v1/policies":
		body = map[string]any{"name": "routes-new", "rego": "package x", "tests": ""}
	case "/api/v1/audit/exports":
		body = map[string]any{"format": "jsonl", "from": "2000-01-01T00:00:00Z", "to": "2100-01-01T00:00:00Z"}
	case "/api/v1/group-rules", "/api/v1/group-rules/preview":
		body = map[string]any{"group": "routes-new-group", "role": "viewer"}
	default:
		body = map[string]any{"name": "routes-edit", "tier": "staging"}
	}
	return jsonBody(t, body)
}

// object sends the case to object id as who.
func (fx *routeFixtures) object(t routeT, c routeCase, who routeWho, id string) answer {
	t.Helper()
	cl := call{who: who, method: c.method, path: c.path(id, nil)}
	if c.object.state {
		cl.who, cl.basic = routeWho{}, &[2]string{fx.stateUser, fx.statePass}
	}
	cl.form, cl.contentType, cl.body = fx.payload(t, c, id)
	return fx.send(t, cl)
}

// checkOtherTenant: the route with globex's id is a 404 for acme's actor. The same
// request with acme's id is not (a page is a 2xx): the 404 is the tenant's, not the
// route's.
func (fx *routeFixtures) checkOtherTenant(t routeT, c routeCase) {
	o := c.object
	a := fx.object(t, c, o.actor, o.other)
	require.Equal(t, http.StatusNotFound, a.status, "%s of another organization: %s", o.what, a.body)
	for _, m := range fx.globexMarkers() {
		require.NotContains(t, a.body, m, "the 404 names globex's %s", o.what)
	}

	switch {
	case c.method == http.MethodGet:
		a = fx.object(t, c, o.actor, o.own)
		require.True(t, a.status >= 200 && a.status < 300, "%s with acme's %s as %s: want a 2xx, got %d\n%s", c.method, o.what, o.actor.name, a.status, a.body)
	case o.state:
		a = fx.object(t, c, o.actor, o.own)
		require.Equal(t, http.StatusBadRequest, a.status, "acme's job credential on acme's workspace reaches the (broken) body: %s", a.body)
	default:
		// The auditor sees every object and may act on none: a refusal after the lookup,
		// and nothing changes.
		a = fx.object(t, c, fx.auditor, o.own)
		require.NotEqual(t, http.StatusNotFound, a.status, "%s %s on acme's %s as the auditor: %s", c.method, c.pattern, o.what, a.body)
		require.True(t, is4xx(a.status), "the auditor never acts: %d", a.status)
	}
}

// checkRestricted: the route with the restricted environment's object is a 404 for
// acme's operator and viewer, who hold no grant; the operator gets anything but a 404
// for the same route on a visible object, and the auditor (and for pages the admin)
// anything but a 404 on the restricted one.
func (fx *routeFixtures) checkRestricted(t routeT, c routeCase) {
	o := c.object
	if o.hidden == "" {
		require.NotEmpty(t, o.noHidden, "%s: say why it has no restricted case", o.what)
		return
	}
	for _, who := range []routeWho{fx.operator, fx.viewer} {
		a := fx.object(t, c, who, o.hidden)
		require.Equal(t, http.StatusNotFound, a.status, "%s %s in the restricted environment as %s, who holds no grant: %s",
			c.method, o.what, who.name, a.body)
		for _, m := range fx.hiddenMarkers() {
			require.NotContains(t, a.body, m)
		}
	}
	if c.method == http.MethodGet {
		a := fx.object(t, c, fx.operator, o.own)
		require.NotEqual(t, http.StatusNotFound, a.status, "the operator on acme's visible %s: %s", o.what, a.body)
		a = fx.object(t, c, fx.admin, o.hidden)
		require.True(t, a.status >= 200 && a.status < 300, "the admin on the restricted %s: %d\n%s", o.what, a.status, a.body)
	}
	a := fx.object(t, c, fx.auditor, o.hidden)
	require.NotEqual(t, http.StatusNotFound, a.status, "the auditor reads the restricted %s: %s", o.what, a.body)
	// Run and workspace pages are read; the cancel, change, destroy, rollback and
	// promotion forms ask for an action the auditor may not take (their 403 comes after
	// the object was found).
	asks := slices.ContainsFunc([]string{"/cancel", "/change", "/destroy", "/rollback", "/promote", "/breakglass"}, func(s string) bool { return strings.HasSuffix(c.pattern, s) })
	if c.method == http.MethodGet && (strings.HasPrefix(c.pattern, "/runs/") || strings.HasPrefix(c.pattern, "/workspaces/")) && !asks {
		require.True(t, a.status >= 200 && a.status < 300, "the auditor reads the restricted %s: %d\n%s", o.what, a.status, a.body)
	}
}

// listQuery is the query a page without parameters needs to show anything.
var listQuery = map[string]string{"/requests/new": "?template=bucket"}

// listShows: what pages that list objects show, so that their not showing globex's or
// the restricted environment's objects means something. Keys are paths (with query);
// values name who sees which of the fixtures' ids.
var listShows = map[string]func(fx *routeFixtures) map[*routeWho][]string{
	"/workspaces": func(fx *routeFixtures) map[*routeWho][]string {
		return map[*routeWho][]string{&fx.admin: {fx.acme.ws, fx.hidden.ws}, &fx.auditor: {fx.hidden.ws}, &fx.operator: {fx.acme.ws}}
	},
	"/runs": func(fx *routeFixtures) map[*routeWho][]string {
		return map[*routeWho][]string{&fx.admin: {fx.acme.run.ID, fx.hidden.run.ID}, &fx.auditor: {fx.hidden.run.ID}, &fx.operator: {fx.acme.run.ID}}
	},
	"/approvals": func(fx *routeFixtures) map[*routeWho][]string {
		return map[*routeWho][]string{&fx.admin: {fx.acme.run.ID, fx.hidden.run.ID}, &fx.operator: {fx.acme.run.ID}}
	},
	"/requests/new?template=bucket": func(fx *routeFixtures) map[*routeWho][]string {
		return map[*routeWho][]string{&fx.admin: {fx.acme.env, fx.hidden.env}, &fx.operator: {fx.acme.env}}
	},
	"/breakglass": func(fx *routeFixtures) map[*routeWho][]string {
		return map[*routeWho][]string{&fx.admin: {fx.acme.window, fx.hidden.window}, &fx.auditor: {fx.hidden.window}, &fx.operator: {fx.acme.window}}
	},
	"/environments": func(fx *routeFixtures) map[*routeWho][]string {
		return map[*routeWho][]string{&fx.admin: {fx.acme.env, fx.hidden.env}}
	},
	"/api/v1/environments": func(fx *routeFixtures) map[*routeWho][]string {
		return map[*routeWho][]string{&fx.admin: {fx.acme.env, fx.hidden.env}}
	},
	"/api/v1/group-rules": func(fx *routeFixtures) map[*routeWho][]string {
		return map[*routeWho][]string{&fx.admin: {fx.acme.groupRule}, &fx.owner: {fx.acme.groupRule}}
	},
	"/members": func(fx *routeFixtures) map[*routeWho][]string {
		return map[*routeWho][]string{&fx.admin: {fx.acme.member, fx.hidden.env}}
	},
	"/policies": func(fx *routeFixtures) map[*routeWho][]string {
		return map[*routeWho][]string{&fx.admin: {fx.acme.policy, fx.hidden.env}, &fx.operator: {fx.acme.policy, fx.acme.env}}
	},
}

// checkNoLeak: the page shows none of globex's objects to anyone of acme, and none of
// the restricted environment's to the operator and viewer.
func (fx *routeFixtures) checkNoLeak(t *testing.T, c routeCase) {
	path := c.path("", nil)
	if c.object != nil {
		path = c.path(c.object.own, nil)
	}
	path += listQuery[path]
	if c.object != nil && c.object.state {
		a := fx.send(t, call{basic: &[2]string{fx.stateUser, fx.statePass}, method: http.MethodGet, path: path})
		for _, m := range fx.globexMarkers() {
			require.NotContains(t, a.body, m, "acme's state shows globex's objects")
		}
		return
	}
	for _, who := range []routeWho{fx.admin, fx.owner, fx.operator, fx.viewer, fx.auditor} {
		cl := call{who: who, method: http.MethodGet, path: path}
		a := fx.send(t, cl)
		for _, m := range fx.globexMarkers() {
			require.NotContains(t, a.body, m, "%s shows globex's objects", cl)
		}
		if who.name == fx.operator.name || who.name == fx.viewer.name {
			for _, m := range fx.hiddenMarkers() {
				require.NotContains(t, a.body, m, "%s shows the restricted environment's objects to a member without a grant", cl)
			}
		}
	}
	if shows, ok := listShows[path]; ok {
		for who, ids := range shows(fx) {
			a := fx.send(t, call{who: *who, method: http.MethodGet, path: path})
			require.Equal(t, http.StatusOK, a.status, "%s as %s", path, who.name)
			for _, id := range ids {
				require.Contains(t, a.body, id, "%s as %s", path, who.name)
			}
		}
	}
}

// routeCheck says what a route's form names by id, or why it names nothing, and checks
// it. Every mutating route without path parameters needs one.
type routeCheck struct {
	why   string
	check func(t *testing.T, fx *routeFixtures, c routeCase)
}

var fieldError = regexp.MustCompile(`data-testid="error-([a-z0-9._-]+)"[^>]*>([^<]*)<`)

// refusal is what a refused answer says: its status and its field messages (HTML or
// a problem document), without anything that differs between two requests.
func refusal(a answer) string {
	fields := map[string]string{}
	if strings.Contains(a.contentType, "json") {
		var p struct {
			Code   string
			Fields map[string]string
		}
		_ = json.Unmarshal([]byte(a.body), &p)
		fields = p.Fields
		fields["(code)"] = p.Code
	}
	for _, m := range fieldError.FindAllStringSubmatch(a.body, -1) {
		fields[m[1]] = m[2]
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d", a.status)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%q", k, fields[k])
	}
	return b.String()
}

// sameAsMadeUp sends form (or a JSON body) twice, naming in field the id of another
// tenant (or of the restricted environment) and then an id that exists nowhere: both
// are refused alike, so the answer tells nothing about the other object.
func (fx *routeFixtures) sameAsMadeUp(t *testing.T, who routeWho, method, path string, build func(id string) (url.Values, string), real, madeUp string) {
	t.Helper()
	send := func(id string) answer {
		form, body := build(id)
		cl := call{who: who, method: method, path: path, form: form}
		if body != "" {
			cl.form, cl.contentType, cl.body = nil, echo.MIMEApplicationJSON, body
		}
		return fx.send(t, cl)
	}
	a, b := send(real), send(madeUp)
	require.True(t, is4xx(a.status), "%s %s naming %s: want a refusal, got %d\n%s", method, path, real, a.status, a.body)
	require.Equal(t, refusal(b), refusal(a), "%s %s: naming %s is answered unlike naming an id that exists nowhere", method, path, real)
	require.NotContains(t, a.body, real)
}

// scimOutside: SCIM takes an organization's SCIM token, never a session: the auditor's
// session is a 401 there (TestSCIMTenancyAndTokens), not a 403.
const scimOutside = "a directory's call with its organization's SCIM token, outside any session: a session is a 401"

var routeChecks = map[string]routeCheck{
	"POST /scim/v2/*":   {why: "SCIM: authenticated by an organization's SCIM token, never a session or form; another organization's token gets 401/404 (TestSCIMTenancyAndTokens)"},
	"PUT /scim/v2/*":    {why: "SCIM: authenticated by an organization's SCIM token, never a session or form; another organization's token gets 401/404 (TestSCIMTenancyAndTokens)"},
	"PATCH /scim/v2/*":  {why: "SCIM: authenticated by an organization's SCIM token, never a session or form; another organization's token gets 401/404 (TestSCIMTenancyAndTokens)"},
	"DELETE /scim/v2/*": {why: "SCIM: authenticated by an organization's SCIM token, never a session or form; another organization's token gets 401/404 (TestSCIMTenancyAndTokens)"},
	"GET /login":        {why: "return_to after a sign-in (covers GET /auth/callback too)", check: checkReturnTo},
	"POST /logout":      {why: "ends the caller's own session: it names nothing"},
	"POST /org/switch": {why: "organization_id names an organization", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		for _, id := range []string{fx.globex.org, "org-routes-made-up"} {
			a := fx.send(t, call{who: fx.admin, method: http.MethodPost, path: c.pattern, form: url.Values{"organization_id": {id}}})
			require.Equal(t, http.StatusNotFound, a.status, "switching to %s, which admin@acme.test is no member of", id)
		}
		a := fx.send(t, call{who: fx.admin, method: http.MethodPost, path: c.pattern, form: url.Values{"organization_id": {fx.acme.org}}})
		require.Equal(t, http.StatusSeeOther, a.status, "switching to the own organization: %s", a.body)
	}},
	"POST /members/invitations/revoke": {why: "email names an invitation", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		for _, email := range []string{fx.globex.invitation, "routes-made-up@acme.test"} {
			a := fx.send(t, call{who: fx.owner, method: http.MethodPost, path: c.pattern, form: url.Values{"email": {email}}})
			require.Equal(t, http.StatusNotFound, a.status, "revoking %s: %s", email, a.body)
		}
		a := fx.send(t, call{who: fx.owner, method: http.MethodPost, path: c.pattern, form: url.Values{"email": {fx.acme.invitation}}})
		require.Equal(t, http.StatusSeeOther, a.status, "revoking acme's own invitation: %s", a.body)
	}},
	"POST /audit/exports": {why: "a time range and filters over the signed-in organization's own log: an id in a filter only " +
		"narrows that log (another organization's id matches nothing), and the export belongs to the organization"},
	"POST /members/rules": {why: "a group name, a role and cloud.live, added in the signed-in organization: no object by id"},
	"POST /members/rules/preview": {why: "a group name and a role, read against the signed-in organization's own members and directory: " +
		"it writes nothing and names no object by id"},
	"POST /members/invite": {why: "an e-mail address and a role, invited into the signed-in organization: no object by id"},
	"POST /policies/upload": {why: "Rego uploaded into the signed-in organization: a name is a new version of the organization's own policy, " +
		"never another's (POST /policies/:name/active checks names across tenants)"},
	"POST /workload/introspect": {why: "token is a workload token, and its own authorization (no session): the answer says only whether " +
		"that token is live, which its holder may know, and names nothing the token does not"},
	"POST /settings/notifications": {why: "the signed-in member's own notification preferences: event names, no object"},
	"POST /settings/webhooks":      {why: "a webhook added to the signed-in organization: a name, an address, a format and event names, no object"},
	"POST /settings/scim": {why: "makes the signed-in organization's own SCIM token (owners): no form field names an object " +
		"(TestSCIMTokenPage: another organization's owner cannot touch it)"},
	"POST /settings/service-accounts": {why: "a service account added to the signed-in organization: a name and a role, no object"},
	"POST /settings/tokens": {why: "holder names a service account", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		form := func(holder string) (url.Values, string) {
			return url.Values{"name": {"routes-new-token"}, "scopes": {"read"}, "days": {"1"}, "holder": {holder}}, ""
		}
		fx.sameAsMadeUp(t, fx.admin, http.MethodPost, c.pattern, form, fx.globex.account, "usr-routesmadeup")
		require.Zero(t, countRows(t, fx.app, "SELECT count(*) FROM api_tokens WHERE name = 'routes-new-token'"))
		a := fx.send(t, call{who: fx.admin, method: http.MethodPost, path: c.pattern, form: url.Values{"name": {"routes-new-token"},
			"scopes": {"read"}, "days": {"1"}, "holder": {fx.acme.account}}})
		require.Equal(t, http.StatusCreated, a.status, "a token for acme's own service account: %s", a.body)
	}},
	"PUT /api/v1/approval-matrix": {why: "the signed-in organization's matrix; base_version numbers that matrix's own versions"},
	"POST /api/v1/policies":       {why: "Rego uploaded into the signed-in organization, as POST /policies/upload"},
	"POST /api/v1/audit/exports":  {why: "a time range and filters over the signed-in organization's own log, as POST /audit/exports"},
	"POST /api/v1/group-rules": {why: "a group name and a role for the signed-in organization's own rules: no object by id (only owners add one)",
		check: func(t *testing.T, fx *routeFixtures, _ routeCase) {
			require.Zero(t, countRows(t, fx.app, "SELECT count(*) FROM group_rules WHERE group_name = 'routes-new-group'"))
		}},
	"POST /api/v1/group-rules/preview": {why: "a group name and a role, read against the signed-in organization's own members and directory: " +
		"it writes nothing and names no object by id"},
	"POST /api/v1/requests": {why: "environment_id names an environment", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		body := func(env string) (url.Values, string) {
			return nil, jsonBody(t, map[string]any{"template": "bucket", "environment_id": env, "workspace": "routes-new",
				"inputs": map[string]string{"name": "routes-new", "retention_days": "30", "region": "eu-west"}})
		}
		fx.sameAsMadeUp(t, fx.admin, http.MethodPost, c.pattern, body, fx.globex.env, "env-routesmadeup")
		fx.sameAsMadeUp(t, fx.operator, http.MethodPost, c.pattern, body, fx.hidden.env, "env-routesmadeup")
		require.Zero(t, countRows(t, fx.app, "SELECT count(*) FROM workspaces WHERE name = 'routes-new'"))
	}},
	"POST /settings/approval-matrix": {why: "the signed-in organization's matrix; base_version numbers that matrix's own versions"},
	"POST /requests": {why: "environment names an environment", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		form := func(env string) (url.Values, string) {
			return url.Values{"template": {"bucket"}, "environment": {env}, "workspace": {"routes-new"}, "kind": {"apply"},
				"inputs.name": {"routes-new"}, "inputs.retention_days": {"30"}, "inputs.region": {"eu-west"}}, ""
		}
		fx.sameAsMadeUp(t, fx.admin, http.MethodPost, c.pattern, form, fx.globex.env, "env-routesmadeup")
		fx.sameAsMadeUp(t, fx.operator, http.MethodPost, c.pattern, form, fx.hidden.env, "env-routesmadeup")
		require.Zero(t, countRows(t, fx.app, "SELECT count(*) FROM workspaces WHERE name = 'routes-new'"))
	}},
	"POST /workspaces/:id/promote": {why: "environment names an environment", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		// An applied workspace in development, so the refusal is the target's, not
		// "nothing to promote".
		req := bucketRequest(fx.app.OrgEnvironmentID(t, "acme", "development"), "eu-west")
		req.Set("workspace", "routes-promote")
		applied := waitForState(t, fx.app, fx.app.RequestRun(t, fx.app.LoggedIn(t, "operator@acme.test"), req), run.Succeeded)
		form := func(env string) (url.Values, string) {
			return url.Values{"template": {"bucket"}, "kind": {"apply"}, "environment": {env}, "workspace": {"routes-promote"},
				"inputs.name": {"assets-eu-west"}, "inputs.retention_days": {"30"}, "inputs.region": {"eu-west"}}, ""
		}
		path := strings.Replace(c.pattern, ":id", applied.WorkspaceID, 1)
		fx.sameAsMadeUp(t, fx.admin, http.MethodPost, path, form, fx.globex.env, "env-routesmadeup")
		fx.sameAsMadeUp(t, fx.operator, http.MethodPost, path, form, fx.hidden.env, "env-routesmadeup")
		var promoted int64
		require.NoError(t, fx.app.DB.Raw("SELECT count(*) FROM runs WHERE promoted_from_run_id IS NOT NULL").Scan(&promoted).Error)
		require.Zero(t, promoted)
	}},
	"POST /workspaces/:id/rollback": {why: "version names a state version", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		// Another organization's version on acme's workspace is refused as one that exists
		// nowhere, and names nothing of it.
		form := func(id string) (url.Values, string) { return url.Values{"version": {id}}, "" }
		// A version globex's own applied run wrote.
		globexRun := bucketRequest(fx.app.OrgEnvironmentID(t, "globex", "development"), "eu-west")
		globexRun.Set("workspace", "routes-rollback")
		applied := waitForState(t, fx.app, fx.app.RequestRun(t, fx.app.LoggedIn(t, "operator@globex.test"), globexRun), run.Succeeded)
		var globexVersion string
		require.NoError(t, fx.app.DB.Raw("SELECT id FROM state_versions WHERE workspace_id = ?", applied.WorkspaceID).Scan(&globexVersion).Error)
		require.NotEmpty(t, globexVersion)
		path := strings.Replace(c.pattern, ":id", fx.acme.ws, 1)
		fx.sameAsMadeUp(t, fx.admin, http.MethodPost, path, form, globexVersion, "sv-routesmadeup")
		require.Zero(t, countRows(t, fx.app, "SELECT count(*) FROM runs WHERE rollback_version_id IS NOT NULL"))
	}},
	"POST /requests/preview": {why: "environment names an environment", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		send := func(who routeWho, env string) answer {
			return fx.send(t, call{who: who, method: http.MethodPost, path: c.pattern, form: url.Values{"template": {"bucket"}, "environment": {env},
				"workspace": {"routes-new"}, "kind": {"apply"}, "inputs.name": {"routes-new"}, "inputs.retention_days": {"30"}, "inputs.region": {"eu-west"}}})
		}
		// The preview answers 200 either way: another tenant's or a hidden environment
		// must read exactly as an id that exists nowhere, and name nothing of it.
		for _, x := range []struct {
			who routeWho
			env string
		}{{fx.admin, fx.globex.env}, {fx.operator, fx.hidden.env}} {
			a, b := send(x.who, x.env), send(x.who, "env-routesmadeup")
			require.Equal(t, http.StatusOK, a.status)
			require.Equal(t, b.body, a.body, "previewing %s as %s", x.env, x.who.name)
			require.Contains(t, a.body, "Choose an environment to see who decides.")
			require.NotContains(t, a.body, x.env)
		}
		require.Contains(t, send(fx.operator, fx.acme.env).body, `data-testid="preview-decider"><strong>Risk 1`)
		require.Zero(t, countRows(t, fx.app, "SELECT count(*) FROM workspaces WHERE name = 'routes-new'"), "a preview writes nothing")
	}},
	"POST /requests/validate": {why: "environment names an environment", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		form := func(env string) (url.Values, string) {
			return url.Values{"template": {"bucket"}, "environment": {env}, "workspace": {"routes-new"}, "kind": {"apply"}, "_field": {"environment"}}, ""
		}
		send := func(who routeWho, env string) answer {
			f, _ := form(env)
			return fx.send(t, call{who: who, method: http.MethodPost, path: c.pattern, form: f})
		}
		// The inline check answers 200 with the field's message, which must be the one an
		// id that exists nowhere gets.
		for _, x := range []struct {
			who routeWho
			env string
		}{{fx.admin, fx.globex.env}, {fx.operator, fx.hidden.env}} {
			a, b := send(x.who, x.env), send(x.who, "env-routesmadeup")
			require.Equal(t, refusal(b), refusal(a), "validating %s as %s", x.env, x.who.name)
			require.Regexp(t, `environment="[^"]+"`, refusal(a), "the field says something")
			require.NotContains(t, a.body, x.env)
		}
		ok := send(fx.operator, fx.acme.env)
		require.Contains(t, refusal(ok), `environment=""`, "acme's staging is a fine choice")
	}},
	"POST /environments": {why: "grants and owners name members", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		for _, field := range []string{"grants", "owners"} {
			form := func(id string) (url.Values, string) {
				return url.Values{"name": {"routes-new"}, "tier": {"development"}, "requires_approval": {"default"}, field: {id}}, ""
			}
			fx.sameAsMadeUp(t, fx.admin, http.MethodPost, c.pattern, form, fx.globex.member, "usr-routesmadeup")
		}
	}},
	"POST /api/v1/environments": {why: "grants and owners name members", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		for _, field := range []string{"grants", "owners"} {
			body := func(id string) (url.Values, string) {
				return nil, jsonBody(t, map[string]any{"name": "routes-new", "tier": "development", field: []string{id}})
			}
			fx.sameAsMadeUp(t, fx.admin, http.MethodPost, c.pattern, body, fx.globex.member, "usr-routesmadeup")
		}
	}},
	// Routes with an object in the path whose form names more objects.
	"POST /environments/:id": {why: "grants and owners name members", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		for _, field := range []string{"grants", "owners"} {
			form := func(id string) (url.Values, string) {
				return url.Values{"name": {"routes-edit"}, "tier": {"staging"}, "requires_approval": {"on"}, field: {id}}, ""
			}
			fx.sameAsMadeUp(t, fx.admin, http.MethodPost, c.path(fx.acme.env, nil), form, fx.globex.member, "usr-routesmadeup")
		}
	}},
	"PUT /api/v1/environments/:id": {why: "grants and owners name members", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		for _, field := range []string{"grants", "owners"} {
			body := func(id string) (url.Values, string) {
				return nil, jsonBody(t, map[string]any{"name": "routes-edit", "tier": "staging", field: []string{id}})
			}
			fx.sameAsMadeUp(t, fx.admin, http.MethodPut, c.path(fx.acme.env, nil), body, fx.globex.member, "usr-routesmadeup")
		}
	}},
	"POST /members/:id/:action": {why: "grants name environments", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		if c.fill["action"] != "grants" {
			return
		}
		form := func(id string) (url.Values, string) { return url.Values{"grants": {id}}, "" }
		fx.sameAsMadeUp(t, fx.owner, http.MethodPost, c.path(fx.acme.member, nil), form, fx.globex.env, "env-routesmadeup")
	}},
	"POST /environments/:id/policies": {why: "mode.<rule> names a rule, an organization policy's among them", check: func(t *testing.T, fx *routeFixtures, c routeCase) {
		form := func(rule string) (url.Values, string) { return url.Values{"mode." + rule: {"advisory"}}, "" }
		fx.sameAsMadeUp(t, fx.admin, http.MethodPost, c.path(fx.acme.env, nil), form, "org."+fx.globex.policy, "org.routes_made_up")
	}},
}

// Tricks a return_to may try, which TestReturnToStaysOnSite (edge_test.go) does not send
// through a sign-in: percent-encoded CR and LF (a header split), more backslash and
// scheme-relative spellings, other schemes, dot segments.
var returnToTricks = []string{
	"/%0d/evil.example", "/%0a/evil.example", "/%0D%0ALocation:%20https://evil.example", "/%0d%0a//evil.example",
	"\\evil.example", "\\\\evil.example", "/\\/evil.example", "/%5C%5Cevil.example", "/%5c/evil.example",
	"///evil.example", "/%2F%2Fevil.example", "%2F%2Fevil.example", "/.//evil.example", "/..//evil.example", "/%2e%2e//evil.example",
	"https:evil.example", "HTTPS://evil.example", " https://evil.example", "javascript:alert(1)", "//evil.example:443@gantry/",
}

// Tricks TestReturnToStaysOnSite already sends through a sign-in (or refuses at the
// edge); here they go through the other two ways return_to is followed.
var returnToCovered = []string{
	"/%09/evil.example", "/%2F/evil.example", "/%252F/evil.example", "//evil.example", "/\\evil.example", "/%5Cevil.example",
	"https://evil.example", "evil.example",
}

// staysOnSite: a Location answered after a sign-in leads to Gantry's own origin, also as
// a browser reads it (tab, CR and LF dropped, a backslash a slash) and after one more
// percent-decoding.
func staysOnSite(t *testing.T, app *webtest.App, returnTo, loc string) {
	t.Helper()
	base, err := url.Parse(app.URL)
	require.NoError(t, err)
	browser := strings.NewReplacer("\t", "", "\r", "", "\n", "", "\\", "/").Replace(loc)
	decoded, err := url.PathUnescape(browser)
	if err != nil {
		decoded = browser
	}
	for _, l := range []string{loc, browser, decoded} {
		require.True(t, strings.HasPrefix(l, "/") && !strings.HasPrefix(l, "//"), "return_to %q led to %q", returnTo, loc)
		u, err := url.Parse(l)
		require.NoError(t, err, "return_to %q led to %q", returnTo, loc)
		to := base.ResolveReference(u)
		require.Equal(t, base.Scheme+"://"+base.Host, to.Scheme+"://"+to.Host, "return_to %q led to %q", returnTo, loc)
	}
}

// checkReturnTo: return_to never leads off the site, after a genuine sign-in through the
// provider (plain and re-authenticating), and when the person is already signed in.
func checkReturnTo(t *testing.T, fx *routeFixtures, _ routeCase) {
	app := fx.app
	signIn := func(query string) string {
		t.Helper()
		c := app.Client(t)
		action, id := app.StartLoginAt(t, c, "/login?"+query)
		callback := app.SubmitCredentials(t, c, action, id, "admin@acme.test", "admin-acme")
		a := fx.send(t, call{who: routeWho{name: "signing in", client: c}, method: http.MethodGet, path: strings.TrimPrefix(callback.String(), app.URL)})
		require.Equal(t, http.StatusSeeOther, a.status, a.body)
		return a.location
	}
	for _, to := range returnToTricks {
		staysOnSite(t, app, to, signIn(url.Values{"return_to": {to}}.Encode()))
	}
	for _, to := range []string{"//evil.example", "/%0d%0a//evil.example", "/\\evil.example"} {
		staysOnSite(t, app, to, signIn(url.Values{"reauth": {"1"}, "return_to": {to}}.Encode()))
	}
	// A good return_to still works, so the answers above are the tricks' refusal.
	require.Equal(t, "/runs/"+fx.acme.run.ID+"/review", signIn(url.Values{"return_to": {"/runs/" + fx.acme.run.ID + "/review"}}.Encode()))

	// Signed in already, /login goes straight to return_to.
	for _, to := range append(slices.Clone(returnToTricks), returnToCovered...) {
		a := fx.send(t, call{who: fx.viewer, method: http.MethodGet, path: "/login?" + url.Values{"return_to": {to}}.Encode()})
		require.Equal(t, http.StatusFound, a.status, to)
		staysOnSite(t, app, to, a.location)
	}
	// Raw tab, CR and LF are refused at the edge, signed in or not, and lead nowhere.
	for _, to := range []string{"/\t/evil.example", "/\r\n/evil.example", "\n//evil.example"} {
		for _, who := range []routeWho{fx.viewer, {}} {
			a := fx.send(t, call{who: who, method: http.MethodGet, path: "/login?" + url.Values{"return_to": {to}}.Encode()})
			require.Equal(t, http.StatusBadRequest, a.status, "%q", to)
			require.Empty(t, a.location)
		}
	}
}
