package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/breakglass"
	"gantry/models/notify"
	"gantry/models/run"
	"gantry/runner/mock"
	"gantry/web/devmail"
)

var (
	navCount      = regexp.MustCompile(`data-testid="inbox-count">(\d+)<`)
	approvalCount = regexp.MustCompile(`data-testid="approval-count">(\d+)<`)
)

// inboxOf reads c's inbox: the page, the navigation's count (0 when none is shown) and
// the count of runs waiting for them.
func inboxOf(t *testing.T, app *webtest.App, c *http.Client) (page, nav, runs string) {
	t.Helper()
	page = webtest.ReadBody(t, app.Get(t, c, "/approvals"))
	nav = "0"
	if m := navCount.FindStringSubmatch(page); m != nil {
		nav = m[1]
	}
	m := approvalCount.FindStringSubmatch(page)
	require.NotNil(t, m, "the inbox counts the runs waiting")
	return page, nav, m[1]
}

// TestEmergenciesComeFirstInTheInbox: a break-glass request is an emergency. The
// owner's inbox lists it ahead of the runs waiting for her, with a link to decide it,
// and her navigation's count includes it; the admin who asked for it, and the operator,
// who may not decide it, see no such line and their counts leave it out. Who may decide
// it is told by mail and by a webhook subscribed to breakglass.requested; its decision
// window is DefaultDecisionWindow (minutes). Rejected, it leaves the inbox and the
// count, and its requester hears it ended; a request nobody decides in time expires at
// its deadline (its job) and is not listed meanwhile.
func TestEmergenciesComeFirstInTheInbox(t *testing.T) {
	t.Parallel()
	// The mock under a live executor's name: a window needs a workspace on a live cloud,
	// and what is tested here is the inbox and the notices, not the cloud.
	app := webtest.StartWith(t, webtest.Options{Runner: liveStandIn{Runner: mock.New(), name: "tofu/process"}, Mail: true})
	hooked := make(chan []byte, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(notify.HeaderEvent) == string(notify.BreakglassRequested) {
			hooked <- body
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	operator, admin, owner := app.LoggedIn(t, "operator@acme.test"), app.LoggedIn(t, "admin@acme.test"), app.LoggedIn(t, "owner@acme.test")
	addHook(t, app, admin, "incidents", receiver.URL, "json", notify.BreakglassRequested)
	development, staging := app.OrgEnvironmentID(t, "acme", "development"), app.OrgEnvironmentID(t, "acme", "staging")
	applied := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(development, "eu-central")), run.Succeeded)
	waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)

	_, ownerBefore, ownerRuns := inboxOf(t, app, owner)
	require.Equal(t, ownerRuns, ownerBefore, "before: the count is the runs")
	require.NotEqual(t, "0", ownerRuns, "a run waits for the owner")

	// The admin asks for a window (she holds cloud.live and may ask).
	resp := app.PostForm(t, admin, "/workspaces/"+applied.WorkspaceID+"/breakglass", url.Values{"_csrf": {app.CSRF(t, admin)},
		"reason": {"INC-7: <bucket> policy broken, fix by hand"}, "duration": {"30"}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	id := strings.TrimPrefix(resp.Header.Get("Location"), "/breakglass/")
	w := windowOf(t, app, id)
	require.Equal(t, breakglass.Requested, w.State)
	require.Equal(t, breakglass.DefaultDecisionWindow, w.DecisionDeadline.Sub(w.CreatedAt).Round(time.Second), "decided in minutes, not the environment's days")

	page, nav, runs := inboxOf(t, app, owner)
	emergency := strings.Index(page, `data-testid="emergencies"`)
	require.NotEqual(t, -1, emergency, "the owner's inbox lists the emergency")
	require.Less(t, emergency, strings.Index(page, `id="for-you-title"`), "ahead of the runs")
	require.Contains(t, page, `data-testid="window-`+id+`"`)
	require.Contains(t, page, `<a href="/breakglass/`+id+`" data-testid="decide-window">`)
	require.Contains(t, page, "INC-7: &lt;bucket&gt; policy broken", "the reason, escaped")
	require.Contains(t, page, "Emergency")
	require.Equal(t, ownerRuns, runs)
	require.Equal(t, plusOne(t, ownerRuns), nav, "the owner's count includes the emergency")

	for who, c := range map[string]*http.Client{"the requester": admin, "an operator": operator} {
		page, nav, runs := inboxOf(t, app, c)
		require.NotContains(t, page, `data-testid="emergencies"`, who)
		require.NotContains(t, page, `data-testid="window-`+id, who)
		if nav != "0" {
			require.Equal(t, runs, nav, "%s: the count leaves the emergency out", who)
		}
	}

	// Those who may decide it are told: mail to the owner (not the requester), and the
	// webhook with the window in its payload.
	m := waitForMail(t, app, func(m devmail.Message) bool {
		return m.Headers["X-Gantry-Event"] == string(notify.BreakglassRequested)
	})
	require.Equal(t, []string{"owner@acme.test"}, m.To)
	require.Contains(t, m.Subject, "Emergency:")
	require.Contains(t, m.Text, "/breakglass/"+id)
	var payload notify.Payload
	require.NoError(t, json.Unmarshal(bench.Receive(t, "the webhook delivery", 40*time.Second, hooked), &payload))
	require.Nil(t, payload.Run)
	require.Equal(t, id, payload.Window.ID)
	require.Equal(t, "REQUESTED", payload.Window.State)

	// Rejected, it leaves the owner's inbox and count; its requester hears it ended.
	code, body := windowAct(t, app, owner, id, "reject", url.Values{"terms": {w.TermsDigest}, "reason": {"use a run: the bucket is in code"}})
	require.Equal(t, http.StatusSeeOther, code, body)
	page, nav, runs = inboxOf(t, app, owner)
	require.NotContains(t, page, `data-testid="emergencies"`)
	require.Equal(t, runs, nav)
	ended := waitForMail(t, app, func(m devmail.Message) bool { return m.Headers["X-Gantry-Event"] == string(notify.BreakglassEnded) })
	require.Equal(t, []string{"admin@acme.test"}, ended.To)
	require.Contains(t, ended.Subject, "was rejected by")

	// Undecided past its deadline: not listed nor counted; its job expires it.
	resp = app.PostForm(t, admin, "/workspaces/"+applied.WorkspaceID+"/breakglass", url.Values{"_csrf": {app.CSRF(t, admin)},
		"reason": {"INC-8: the same bucket, again"}, "duration": {"15"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	late := strings.TrimPrefix(resp.Header.Get("Location"), "/breakglass/")
	_, nav, runs = inboxOf(t, app, owner)
	require.Equal(t, plusOne(t, runs), nav)
	require.NoError(t, app.DB.Exec("UPDATE breakglass_windows SET decision_deadline = now() - interval '1 second' WHERE id = ?", late).Error)
	page, nav, runs = inboxOf(t, app, owner)
	require.NotContains(t, page, late)
	require.Equal(t, runs, nav)
	expired, err := app.System.Breakglass.Due(context.Background(), late, breakglass.Requested)
	require.NoError(t, err)
	require.Equal(t, breakglass.Expired, expired.State)
}

func plusOne(t *testing.T, n string) string {
	t.Helper()
	var i int
	require.NoError(t, json.Unmarshal([]byte(n), &i))
	b, _ := json.Marshal(i + 1)
	return string(b)
}
