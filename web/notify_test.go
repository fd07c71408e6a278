package web_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/notify"
	"gantry/models/risk"
	"gantry/models/run"
	"gantry/web/devmail"
)

// received is one request a test webhook receiver got.
type received struct {
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is a webhook receiver on loopback that answers with the statuses it is
// given in turn (the last one from then on) and keeps what it got.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	got      []received
	statuses []int
	arrived  chan struct{}
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses, arrived: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: body, at: time.Now()})
		status := r.statuses[min(len(r.got), len(r.statuses))-1]
		r.mu.Unlock()
		r.arrived <- struct{}{}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

// wait returns the first request for which match holds, waiting for it (woken by each
// request that arrives).
func (r *receiver) wait(t *testing.T, match func(received) bool) received {
	t.Helper()
	var found received
	bench.Eventually(t, "a matching webhook request", 40*time.Second, func() (bool, any) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, g := range r.got {
			if match(g) {
				found = g
				return true, nil
			}
		}
		return false, fmt.Sprintf("%d requests, none matching", len(r.got))
	}, bench.Wake(r.arrived))
	return found
}

// jobsFinished signals whenever the portal's job queue has stored the outcome of an
// attempt at a job of one of kinds (completed, failed, cancelled or snoozed): the event a
// test waiting for what such a job writes wakes on. Signals coalesce (one pending at
// most): the waiter reads what it waits for again after each.
func jobsFinished(t testing.TB, app *webtest.App, kinds ...string) <-chan struct{} {
	t.Helper()
	events, cancel := app.System.Queue.Client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed,
		river.EventKindJobCancelled, river.EventKindJobSnoozed)
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range events { // ends when cancel (or the queue stopping) closes events
			if ev.Job != nil && slices.Contains(kinds, ev.Job.Kind) {
				select {
				case wake <- struct{}{}:
				default: // a signal is already pending
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return wake
}

var deliveryStatus = regexp.MustCompile(`data-status="([a-z]+)"`)

// deliveryStatuses are the statuses a hook's delivery log shows, for a wait's report.
func deliveryStatuses(page string) []string {
	var out []string
	for _, m := range deliveryStatus.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	return out
}

func event(e notify.Event) func(received) bool {
	return func(g received) bool { return g.header.Get("Gantry-Event") == string(e) }
}

var secretPattern = regexp.MustCompile(`data-testid="webhook-secret-value">(whsec_[A-Za-z0-9_-]+)<`)

// addHook adds a webhook as admin through the form and returns its id and secret.
func addHook(t *testing.T, app *webtest.App, admin *http.Client, name, target, format string, events ...notify.Event) (string, string) {
	t.Helper()
	form := url.Values{"name": {name}, "url": {target}, "format": {format}, "_csrf": {app.CSRF(t, admin)}}
	for _, e := range events {
		form.Add("events", string(e))
	}
	resp := app.PostForm(t, admin, "/settings/webhooks", form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	m := secretPattern.FindStringSubmatch(body)
	require.NotNil(t, m, body)
	var id string
	require.NoError(t, app.DB.Raw("SELECT id FROM webhooks WHERE name = ?", name).Scan(&id).Error)
	return id, m[1]
}

// signature is HMAC-SHA256(secret, timestamp "." body), computed here without Gantry's code.
func signature(secret, ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

func waitForMail(t *testing.T, app *webtest.App, match func(devmail.Message) bool) devmail.Message {
	t.Helper()
	ctx, cancel := bench.Context(context.Background(), 40*time.Second)
	defer cancel()
	m, err := app.Mail.Wait(ctx, match)
	require.NoError(t, err, "waiting for mail (%v)", context.Cause(ctx))
	return m
}

func mailTo(addr string, e notify.Event, runLabel string) func(devmail.Message) bool {
	return func(m devmail.Message) bool {
		return len(m.To) == 1 && m.To[0] == addr && m.Headers["X-Gantry-Event"] == string(e) && strings.Contains(m.Subject, runLabel)
	}
}

// TestNotificationsEndToEnd: a run that waits for a decision reaches a signed JSON
// webhook and a Slack-compatible one on loopback, and mails everyone who may decide it
// (not the requester) with the review link, which decides nothing when followed; the
// decision reaches the requester and the hook. The secret is shown once; another
// organization's hook is not found and an operator may not manage hooks.
func TestNotificationsEndToEnd(t *testing.T) {
	t.Parallel()
	app := webtest.StartWith(t, webtest.Options{Mail: true})
	admin := app.LoggedIn(t, "admin@acme.test")
	operator := app.LoggedIn(t, "operator@acme.test")
	hooks := newReceiver(t, http.StatusOK)
	slack := newReceiver(t, http.StatusOK)
	hookID, secret := addHook(t, app, admin, "platform-alerts", hooks.URL+"/gantry?token=abc", "json", notify.DecisionWaiting, notify.RunDecided)
	addHook(t, app, admin, "chat", slack.URL, "slack", notify.DecisionWaiting)
	require.NotContains(t, webtest.ReadBody(t, app.Get(t, admin, "/settings/webhooks")), secret, "the secret is shown once")
	var stored []byte
	require.NoError(t, app.DB.Raw("SELECT secret_ciphertext FROM webhooks WHERE id = ?", hookID).Row().Scan(&stored))
	require.NotEmpty(t, stored)
	require.NotContains(t, string(stored), secret, "sealed at rest")
	var audited string
	require.NoError(t, app.DB.Raw("SELECT data::text FROM audit_events WHERE action = 'webhook.created' AND target_id = ?", hookID).Scan(&audited).Error)
	require.NotContains(t, audited, "token=abc", "a query string may carry the receiver's token")

	r := waitingIn(t, app, operator, "notify")
	label := "notify " + r.Label()
	review := app.URL + "/runs/" + r.ID + "/review"

	// The JSON hook: signed over timestamp and body, and says what waits.
	got := hooks.wait(t, event(notify.DecisionWaiting))
	ts := got.header.Get("Gantry-Timestamp")
	require.Equal(t, signature(secret, ts, got.body), got.header.Get("Gantry-Signature"))
	require.NoError(t, notify.Verify(secret, got.header, got.body, time.Now(), 5*time.Minute))
	require.Error(t, notify.Verify("whsec_other", got.header, got.body, time.Now(), 5*time.Minute), "another secret does not verify")
	var p notify.Payload
	require.NoError(t, json.Unmarshal(got.body, &p))
	require.Equal(t, notify.DecisionWaiting, p.Event)
	require.Equal(t, r.ID, p.Run.ID)
	require.Equal(t, label, p.Run.Label)
	require.Equal(t, "staging", p.Run.Environment)
	require.Equal(t, review, p.Run.ReviewURL)
	require.Equal(t, 1, p.Run.Changes["create"])
	require.NotNil(t, p.Run.DecisionDeadline)
	require.True(t, p.Run.Simulated, "the mock executor's runs say so")
	require.Contains(t, p.Summary, "waits for your decision")

	// The Slack-compatible body: one linked line of mrkdwn.
	sg := slack.wait(t, event(notify.DecisionWaiting))
	var sb map[string]string
	require.NoError(t, json.Unmarshal(sg.body, &sb))
	require.True(t, strings.HasPrefix(sb["text"], "<"+review+"|"+label+" (SIMULATED) in staging waits for your decision>"), sb["text"])

	// Mail to each member who may decide, never to the requester.
	var deciders []string
	require.NoError(t, app.DB.Raw(`SELECT u.email FROM run_deciders d JOIN users u ON u.id = d.user_id WHERE d.run_id = ? AND d.decides ORDER BY 1`, r.ID).Scan(&deciders).Error)
	require.Contains(t, deciders, "admin@acme.test")
	for _, addr := range deciders {
		m := waitForMail(t, app, mailTo(addr, notify.DecisionWaiting, label))
		require.Contains(t, m.Text, "Review it: "+review)
		require.Contains(t, m.Text, "Nothing is decided by following this link")
	}
	require.NotContains(t, deciders, "operator@acme.test")
	var requesterMails int64
	require.NoError(t, app.DB.Raw(`SELECT count(*) FROM river_job WHERE kind = 'notify.mail' AND args->'mail'->>'to' = 'operator@acme.test'
		AND args->'mail'->>'event' = 'decision.waiting'`).Scan(&requesterMails).Error)
	require.Zero(t, requesterMails, "the requester does not decide her own run")

	// Following the link shows the review page; nothing is decided.
	resp := app.Get(t, admin, "/runs/"+r.ID+"/review")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	webtest.ReadBody(t, resp)
	require.Equal(t, run.PendingApproval, waitForState(t, app, r.ID, run.PendingApproval).State)

	// The decision reaches the requester and the hook, naming who decided.
	approve(t, app, admin, r)
	decided := hooks.wait(t, event(notify.RunDecided))
	require.NoError(t, json.Unmarshal(decided.body, &p))
	require.Equal(t, "APPROVED", p.Run.State)
	require.True(t, strings.HasPrefix(p.Actor, "Adam ("), p.Actor)
	m := waitForMail(t, app, mailTo("operator@acme.test", notify.RunDecided, label))
	require.Contains(t, m.Subject, "was approved by Adam (")

	// The hook's delivery log, as the admin sees it: the delivery job records the answer
	// once the hook has answered, so the page may say pending for a moment.
	var page string
	delivered := jobsFinished(t, app, "notify.webhook")
	bench.Eventually(t, "every delivery recorded as delivered", 20*time.Second, func() (bool, any) {
		page = webtest.ReadBody(t, app.Get(t, admin, "/settings/webhooks/"+hookID))
		return strings.Contains(page, `data-status="delivered"`) && !strings.Contains(page, `data-status="pending"`), deliveryStatuses(page)
	}, bench.Wake(delivered))
	require.Contains(t, page, "HTTP 200")

	// Another organization's admin finds nothing; an operator manages no hooks.
	globex := app.LoggedIn(t, "admin@globex.test")
	resp = app.Get(t, globex, "/settings/webhooks/"+hookID)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp = app.PostForm(t, globex, "/settings/webhooks/"+hookID+"/disable", url.Values{"_csrf": {app.CSRF(t, globex)}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp = app.Get(t, operator, "/settings/webhooks")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp = app.PostForm(t, operator, "/settings/webhooks", url.Values{"name": {"x"}, "url": {hooks.URL}, "format": {"json"},
		"events": {"run.failed"}, "_csrf": {app.CSRF(t, operator)}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// TestFailingWebhookIsRetriedWithBackoff: a receiver that answers 500 is tried again
// after a wait that doubles, every attempt in the hook's log with its status; after its
// last attempt the delivery is failed; enough failures in a row turn the hook off
// (audited), a turned-off hook cannot redeliver, and once on again a redelivery arrives.
func TestFailingWebhookIsRetriedWithBackoff(t *testing.T) {
	t.Parallel()
	opts := notify.HookOptions{AllowPrivateTargets: true, RetryBase: 300 * time.Millisecond, RetryMax: 10 * time.Second,
		MaxAttempts: 3, DisableAfter: 5, Timeout: 5 * time.Second}
	app := webtest.StartWith(t, webtest.Options{Hooks: &opts})
	admin := app.LoggedIn(t, "admin@acme.test")
	operator := app.LoggedIn(t, "operator@acme.test")
	failing := newReceiver(t, http.StatusInternalServerError)
	hookID, _ := addHook(t, app, admin, "flaky", failing.URL, "json", notify.DecisionWaiting)

	// Woken by each attempt the fan-out and the deliveries make; the gaps between attempts
	// are the hook's backoff, the subject below.
	attempted := jobsFinished(t, app, "notify.fanout", "notify.webhook")
	first := waitingIn(t, app, operator, "flaky-one")
	var d notify.Delivery
	bench.Eventually(t, "the delivery to fail after its last attempt", 60*time.Second, func() (bool, any) {
		// The delivery appears when the fan-out job has run: until then, not yet.
		err := app.DB.Where("webhook_id = ? AND run_id = ?", hookID, first.ID).Take(&d).Error
		if err != nil {
			return false, err
		}
		return d.Status == notify.DeliveryFailed, fmt.Sprintf("%s after %d attempts", d.Status, d.Attempts)
	}, bench.Wake(attempted))
	require.Equal(t, 3, d.Attempts)
	require.Equal(t, 500, *d.LastStatusCode)
	var tries []notify.Attempt
	require.NoError(t, app.DB.Where("delivery_id = ?", d.ID).Order("attempt").Find(&tries).Error)
	require.Len(t, tries, 3)
	for _, try := range tries {
		require.Equal(t, 500, *try.StatusCode)
		require.Contains(t, try.Error, "500")
	}
	// The receiver's own clock: the waits between attempts double (300 ms, then 600 ms).
	failing.mu.Lock()
	gaps := []time.Duration{failing.got[1].at.Sub(failing.got[0].at), failing.got[2].at.Sub(failing.got[1].at)}
	failing.mu.Unlock()
	require.GreaterOrEqual(t, gaps[0], 300*time.Millisecond)
	require.GreaterOrEqual(t, gaps[1], 600*time.Millisecond)
	page := webtest.ReadBody(t, app.Get(t, admin, "/settings/webhooks/"+hookID))
	require.Contains(t, page, `data-status="failed"`)
	require.Contains(t, page, "the receiver answered 500 Internal Server Error")

	// Two more failures turn the hook off after the fifth in a row.
	waitingIn(t, app, operator, "flaky-two")
	bench.Eventually(t, "the hook to be turned off", 60*time.Second, func() (bool, any) {
		var on bool
		require.NoError(t, app.DB.Raw("SELECT enabled FROM webhooks WHERE id = ?", hookID).Scan(&on).Error)
		return !on, "still on"
	}, bench.Wake(attempted))
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM audit_events WHERE action = 'webhook.disabled' AND target_id = ?", hookID))
	require.Contains(t, webtest.ReadBody(t, app.Get(t, admin, "/settings/webhooks/"+hookID)), "turned off by Gantry after 5 failed attempts in a row")

	// Off: no redelivery. On again, with a receiver that now answers: it arrives.
	resp := app.PostForm(t, admin, "/settings/deliveries/"+d.ID+"/redeliver", url.Values{"_csrf": {app.CSRF(t, admin)}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	failing.mu.Lock()
	failing.statuses = []int{http.StatusNoContent}
	failing.mu.Unlock()
	mark := time.Now()
	resp = app.PostForm(t, admin, "/settings/webhooks/"+hookID+"/enable", url.Values{"_csrf": {app.CSRF(t, admin)}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp = app.PostForm(t, admin, "/settings/deliveries/"+d.ID+"/redeliver", url.Values{"_csrf": {app.CSRF(t, admin)}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	again := failing.wait(t, func(g received) bool { return g.at.After(mark) })
	require.Equal(t, string(notify.DecisionWaiting), again.header.Get("Gantry-Event"))
	var redelivered notify.Delivery
	bench.Eventually(t, "the redelivery to be recorded delivered", 20*time.Second, func() (bool, any) {
		err := app.DB.Where("redelivery_of = ?", d.ID).Take(&redelivered).Error
		if err != nil {
			return false, err
		}
		return redelivered.Status == notify.DeliveryDelivered, redelivered.Status
	}, bench.Wake(attempted))
}

// TestWebhookTargetsAreGuarded: without --webhook-allow-private, loopback, private,
// link-local and metadata addresses are refused with a message beside the URL field,
// and nothing is saved; other bad input gets its own field message.
func TestWebhookTargetsAreGuarded(t *testing.T) {
	t.Parallel()
	app := webtest.StartWith(t, webtest.Options{Hooks: &notify.HookOptions{}})
	admin := app.LoggedIn(t, "admin@acme.test")
	post := func(form url.Values) (int, string) {
		form.Set("_csrf", app.CSRF(t, admin))
		resp := app.PostForm(t, admin, "/settings/webhooks", form)
		return resp.StatusCode, webtest.ReadBody(t, resp)
	}
	for _, target := range []string{"http://127.0.0.1:8080/hook", "http://localhost/hook", "http://10.1.2.3/hook",
		"http://169.254.169.254/latest/meta-data", "http://[::1]/hook", "http://192.168.1.10/", "ftp://example.com/x",
		"https://user:pw@hooks.example.com/", "not a url"} {
		status, body := post(url.Values{"name": {"guarded"}, "url": {target}, "format": {"json"}, "events": {"run.failed"}})
		require.Equal(t, http.StatusUnprocessableEntity, status, target)
		require.Contains(t, body, `data-testid="error-url"`, target)
		require.Contains(t, body, `value="guarded"`, "what was typed is kept")
	}
	status, body := post(url.Values{"name": {strings.Repeat("n", 81)}, "url": {"https://hooks.example.com/x"}, "format": {"xml"}, "events": {"run.nope"}})
	require.Equal(t, http.StatusUnprocessableEntity, status)
	for _, f := range []string{"name", "format", "events"} {
		require.Contains(t, body, `data-testid="error-`+f+`"`)
	}
	status, _ = post(url.Values{"name": {"a\x00b"}, "url": {"https://hooks.example.com/x"}, "format": {"json"}, "events": {"run.failed"}})
	require.Equal(t, http.StatusBadRequest, status, "NUL bytes are refused at the edge")
	require.EqualValues(t, 0, countRows(t, app, "SELECT count(*) FROM webhooks"))
}

// TestNotificationPreferences: a member who turns "a decision waits" off gets no such
// mail while another decider of the same run does; the page shows the choice.
func TestNotificationPreferences(t *testing.T) {
	t.Parallel()
	app := webtest.StartWith(t, webtest.Options{Mail: true})
	admin := app.LoggedIn(t, "admin@acme.test")
	operator := app.LoggedIn(t, "operator@acme.test")
	form := url.Values{"_csrf": {app.CSRF(t, admin)}}
	for _, e := range notify.Events {
		if e != notify.DecisionWaiting {
			form.Add("email", string(e))
		}
	}
	resp := app.PostForm(t, admin, "/settings/notifications", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	page := webtest.ReadBody(t, app.Get(t, admin, "/settings/notifications"))
	require.Regexp(t, `value="decision.waiting" data-testid="pref-decision.waiting"\s*/?>`, page, "unchecked")
	require.Regexp(t, `value="run.decided" checked`, page)

	r := waitingIn(t, app, operator, "prefs")
	// The owner decides too and still gets the mail; by then the fan-out has queued
	// every mail of the notice.
	waitForMail(t, app, mailTo("owner@acme.test", notify.DecisionWaiting, "prefs "+r.Label()))
	var adminMails int64
	require.NoError(t, app.DB.Raw(`SELECT count(*) FROM river_job WHERE kind = 'notify.mail' AND args->'mail'->>'to' = 'admin@acme.test'`).Scan(&adminMails).Error)
	require.Zero(t, adminMails)
	var adminDecides bool
	require.NoError(t, app.DB.Raw(`SELECT d.decides FROM run_deciders d JOIN users u ON u.id = d.user_id WHERE d.run_id = ? AND u.email = 'admin@acme.test'`, r.ID).Scan(&adminDecides).Error)
	require.True(t, adminDecides, "the admin may decide: only the preference kept the mail away")

	// Unknown events are refused and nothing is saved.
	resp = app.PostForm(t, admin, "/settings/notifications", url.Values{"_csrf": {app.CSRF(t, admin)}, "email": {"run.exploded"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
}

// TestEscalationMail: when a waiting run escalates, everyone who may decide it now is
// mailed again, the escalation's deciders included.
func TestEscalationMail(t *testing.T) {
	t.Parallel()
	app := webtest.StartWith(t, webtest.Options{Mail: true})
	ctx := context.Background()
	owner := app.NewMember(t, "acme", "Matrix Owner", authz.RoleOwner, true, "qa-leads")
	m := risk.Default()
	for i := range m.Decisions {
		if m.Decisions[i].Level == risk.Level1Protected {
			m.Decisions[i].Approver, m.Decisions[i].Escalation, m.Decisions[i].EscalateAfterHours = risk.ApproverEnvOwners, risk.ApproverAdmin, 1
		}
	}
	asOwner := authz.WithSubject(ctx, owner.Subject(time.Now()))
	_, err := app.System.Matrix.Save(asOwner, m, "named owners decide, admins after an hour")
	require.NoError(t, err)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	groups := []string{"qa-leads"}
	_, err = app.System.Environments.Update(asOwner, staging, environment.Input{Name: "staging", Tier: "staging", OwnerGroups: &groups})
	require.NoError(t, err)
	operator := app.LoggedIn(t, "operator@acme.test")
	r := waitingIn(t, app, operator, "escalates")
	label := "escalates " + r.Label()
	var ownerEmail string
	require.NoError(t, app.DB.Raw("SELECT email FROM users WHERE id = ?", owner.UserID).Scan(&ownerEmail).Error)
	waitForMail(t, app, mailTo(ownerEmail, notify.DecisionWaiting, label))
	var adminWaiting int64
	require.NoError(t, app.DB.Raw(`SELECT count(*) FROM river_job WHERE kind = 'notify.mail' AND args->'mail'->>'to' = 'admin@acme.test'`).Scan(&adminWaiting).Error)
	require.Zero(t, adminWaiting, "before the escalation an admin does not decide")

	require.NoError(t, app.DB.Exec("UPDATE runs SET waiting_since = waiting_since - interval '61 minutes' WHERE id = ?", r.ID).Error)
	_, err = app.System.Runs.Decisions.EscalateIfDue(ctx, r.ID)
	require.NoError(t, err)
	mail := waitForMail(t, app, mailTo("admin@acme.test", notify.DecisionEscalated, label))
	require.Contains(t, mail.Subject, "still waits for a decision (escalated)")
	require.Contains(t, mail.Text, app.URL+"/runs/"+r.ID+"/review")
	waitForMail(t, app, mailTo(ownerEmail, notify.DecisionEscalated, label))
}
