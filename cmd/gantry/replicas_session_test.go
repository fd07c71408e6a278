package main

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/demo"
	"gantry/models/idempotency"
	runpkg "gantry/models/run"
)

// TestReplicasShareSignInAndLivePages: three portals on one database. A real sign-in
// on replica 1 (the OpenID Provider's login form, the authorization code flow with
// PKCE) gives a session cookie that replicas 2 and 3 honour: their pages show who is
// signed in, their CSRF-protected forms accept the session's token (masked by whichever
// replica drew the page) and refuse a form without it, and signing out on one ends the
// session on all (sessions live in the database, not in a replica). A run page's live
// stream held by replica 2 shows a decision taken on replica 1 (run changes reach every
// replica through PostgreSQL LISTEN/NOTIFY, web.Changes).
func TestReplicasShareSignInAndLivePages(t *testing.T) {
	t.Parallel()
	r := newReplicas(t)
	ctx := context.Background()
	one, two, three := r.start("--replica-id=one"), r.start("--replica-id=two"), r.start("--replica-id=three")
	// A load balancer would send each request to some replica; the test names the
	// replica of each request instead. at(p) is the browser's view of replica p.
	at := func(p *replica) *webtest.App { return &webtest.App{URL: p.URL, Issuer: r.Issuer} }

	// Two production runs, requested by the operator, wait for the admin's decision.
	var operator string
	require.NoError(t, r.DB.Raw("SELECT id FROM users WHERE subject = 'acme-operator'").Scan(&operator).Error)
	asOperator := authz.WithSubject(ctx, authz.Subject{UserID: operator, Name: "Olivia", OrganizationID: r.Orgs["acme"], Role: authz.RoleOperator})
	production := envID(t, r, "acme", "production")
	development := envID(t, r, "acme", "development")
	request := func(ws string) string {
		run, err := r.System.Runs.Requests.Request(asOperator, runpkg.Request{EnvironmentID: production, Workspace: ws, Template: "bucket",
			Kind: runpkg.KindApply, Inputs: map[string]string{"name": ws}})
		require.NoError(t, err)
		return run.ID
	}
	rejected, approved := request("sessions-rejected"), request("sessions-approved")
	current := func(id string) runpkg.Run {
		var got runpkg.Run
		require.NoError(t, r.DB.Where("id = ?", id).Take(&got).Error)
		return got
	}
	waitState := func(id string, want runpkg.State) runpkg.Run {
		t.Helper()
		return r.waitRun(id, want, 60*time.Second, one, two, three)
	}
	waitState(rejected, runpkg.PendingApproval)
	waitState(approved, runpkg.PendingApproval)

	// The admin signs in on replica 1, for real. The provider sends the browser back to
	// the portals' base URL, which the load balancer (the test) hands to replica 1.
	admin, ok := demo.Find("admin@acme.test")
	require.True(t, ok)
	browser := at(one).Client(t)
	action, authRequest := at(one).StartLogin(t, browser)
	lb := &webtest.App{URL: "http://127.0.0.1:1", Issuer: r.Issuer} // the base URL replicas.start gives them
	callback := lb.SubmitCredentials(t, browser, action, authRequest, admin.Email, admin.Password)
	callback.Host = strings.TrimPrefix(one.URL, "http://")
	req, err := http.NewRequest(http.MethodGet, callback.String(), nil)
	require.NoError(t, err)
	home := webtest.Follow(t, browser, req, nil)
	body := webtest.ReadBody(t, home)
	require.Equal(t, http.StatusOK, home.StatusCode, body)
	require.Contains(t, body, `data-testid="current-user"`, "signed in on replica 1")
	require.Contains(t, body, "Adam", "as the admin")

	// The session cookie replica 1 set, alone in fresh browsers' jars for replicas 2 and 3.
	cookies := browser.Jar.Cookies(mustURL(t, one.URL))
	require.Len(t, cookies, 1, "one cookie: the session")
	on := func(p *replica) *http.Client {
		c := at(p).Client(t)
		c.Jar.SetCookies(mustURL(t, p.URL), cookies)
		return c
	}
	browser2, browser3 := on(two), on(three)
	for _, p := range []*replica{two, three} {
		page := webtest.ReadBody(t, at(p).Get(t, on(p), "/runs/"+approved))
		require.Contains(t, page, `data-testid="current-user"`, "the session of replica 1 is valid on %s", p.URL)
		require.Contains(t, page, "Adam")
		require.Contains(t, page, `data-testid="run-state" data-state="PENDING_APPROVAL">`)
	}

	// Replica 2's live stream of a run page; the decision is taken on replica 1.
	stream := openEvents(t, browser2, two.URL+"/runs/"+rejected+"/events")
	require.Equal(t, "PENDING_APPROVAL", stream.nextRunState(t), "the stream starts with the run as it is")
	form := decision(current(rejected), at(one).CSRF(t, browser))
	form.Set("reason", "rejected on replica 1 while replica 2 streams the page")
	resp := at(one).PostForm(t, browser, "/runs/"+rejected+"/reject", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	require.Equal(t, "REJECTED", stream.nextRunState(t), "replica 2's stream shows the decision taken on replica 1")
	require.Equal(t, runpkg.Rejected, current(rejected).State)

	// CSRF-protected forms on replicas 2 and 3: refused without the session's token,
	// accepted with it, even with a token drawn by another replica.
	form = decision(current(approved), "")
	resp = at(three).PostForm(t, browser3, "/runs/"+approved+"/approve", form)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no CSRF token: %s", webtest.ReadBody(t, resp))
	form.Set("_csrf", at(one).CSRF(t, browser))
	resp = at(three).PostForm(t, browser3, "/runs/"+approved+"/approve", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "approved on replica 3: %s", webtest.ReadBody(t, resp))
	resp.Body.Close()
	waitState(approved, runpkg.Succeeded)

	requestForm := url.Values{"template": {"bucket"}, "environment": {development}, "workspace": {"sessions-requested"}, "kind": {"apply"},
		"inputs.name": {"sessions-requested"}}
	resp = at(two).PostForm(t, browser2, "/requests", requestForm)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no CSRF token: %s", webtest.ReadBody(t, resp))
	requestForm.Set("_csrf", at(two).CSRF(t, browser2))
	resp = at(two).PostForm(t, browser2, "/requests", requestForm)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "requested on replica 2: %s", webtest.ReadBody(t, resp))
	resp.Body.Close()
	requested := strings.TrimPrefix(resp.Header.Get("Location"), "/runs/")
	require.Equal(t, admin.Name, current(requested).RequestedByName, "requested by the session's person")
	waitState(requested, runpkg.Succeeded)
	var decisions []string
	require.NoError(t, r.DB.Raw("SELECT action || ' by ' || actor_name FROM audit_events WHERE target_id IN (?, ?) AND action IN ('run.rejected', 'run.approved') ORDER BY seq",
		rejected, approved).Scan(&decisions).Error)
	require.Equal(t, []string{"run.rejected by " + admin.Name, "run.approved by " + admin.Name}, decisions)

	// Signing out on replica 3 ends the session on every replica.
	resp = at(three).PostForm(t, browser3, "/logout", url.Values{"_csrf": {at(three).CSRF(t, browser3)}})
	require.Less(t, resp.StatusCode, 400, webtest.ReadBody(t, resp))
	resp.Body.Close()
	for _, c := range []struct {
		p *replica
		c *http.Client
	}{{one, browser}, {two, on(two)}} {
		resp := at(c.p).Get(t, c.c, "/runs/"+approved)
		resp.Body.Close()
		require.Equal(t, http.StatusFound, resp.StatusCode, "signed out everywhere")
		require.Contains(t, resp.Header.Get("Location"), "/login", "signed out everywhere")
	}
	stream.close()
	for _, p := range []*replica{one, two, three} {
		p.stop(t)
	}
}

// envID is the id of environment name of organization slug.
func envID(t *testing.T, r *replicas, slug, name string) string {
	t.Helper()
	var id string
	require.NoError(t, r.DB.Raw("SELECT id FROM environments WHERE organization_id = ? AND name = ?", r.Orgs[slug], name).Scan(&id).Error)
	require.NotEmpty(t, id, "%s/%s", slug, name)
	return id
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}

// decision is the form a review page submits to decide on run: its evidence, the
// CSRF token ("" none), a fresh idempotency key and, for an elevated decision, the
// typed confirmation and a reason.
func decision(run runpkg.Run, csrf string) url.Values {
	v := url.Values{idempotency.Field: {idempotency.NewKey()}}
	if csrf != "" {
		v.Set("_csrf", csrf)
	}
	for field, value := range runpkg.EvidenceOf(run).Fields() {
		v.Set(field, value)
	}
	if runpkg.RequirementOf(run).Elevated {
		v.Set("confirm", runpkg.ConfirmWord)
		v.Set("reason", "checked with the data owner")
	}
	return v
}

// events is a live stream read as an EventSource reads it.
type events struct {
	frames chan frame // closed when the stream ends
	close  context.CancelFunc
}

// frame is one event of a stream.
type frame struct{ name, data string }

// openEvents opens a live stream with c's cookies and no overall timeout.
func openEvents(t testing.TB, c *http.Client, address string) *events {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, address, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	streaming := *c
	streaming.Timeout = 0
	resp, err := streaming.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	e := &events{frames: make(chan frame, 256), close: cancel}
	go func() {
		defer close(e.frames)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var name string
		var data []string
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			case line == "" && name != "":
				select {
				case e.frames <- frame{name, strings.Join(data, "\n")}:
				case <-ctx.Done():
					return
				}
				name, data = "", nil
			}
		}
	}()
	return e
}

var runStateShown = regexp.MustCompile(`data-testid="run-state" data-state="([A-Z_]+)">`)

// nextRunState reads events until the next run event and returns the state it shows.
// Each event comes within a minute of idle-machine time, or the test fails: a hang, not
// a timing assertion.
func (e *events) nextRunState(t *testing.T) string {
	t.Helper()
	for {
		f := bench.Receive(t, "the next event on the stream", time.Minute, e.frames)
		require.NotEmpty(t, f.name, "the stream ended")
		if f.name != "run" {
			continue
		}
		m := runStateShown.FindStringSubmatch(f.data)
		require.NotNil(t, m, "a run event without the run's state: %s", f.data)
		return m[1]
	}
}

// wakes turns the stream's events into a wake-up for bench.Eventually (coalescing: the
// waiter reads what it waits for again); the stream's end wakes it too. The events
// themselves are dropped: use either wakes or nextRunState.
func (e *events) wakes() <-chan struct{} {
	wake := make(chan struct{}, 1)
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	go func() {
		for range e.frames {
			signal()
		}
		signal()
	}()
	return wake
}
