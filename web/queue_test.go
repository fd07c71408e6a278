package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/notify"
	"gantry/models/run"
)

// apiQueueDoc is the queue object of GET /api/v1/runs/{id}, as a client reads it.
type apiQueueDoc struct {
	Queue *struct {
		Position int `json:"position"`
		Waiting  int `json:"waiting"`
		Holder   *struct {
			RunID  string `json:"run_id"`
			Number int    `json:"number"`
			Label  string `json:"label"`
			Phase  string `json:"phase"`
		} `json:"holder"`
	} `json:"queue"`
}

// TestTheApplyQueueIsShownAndItsEndTold: a run approved while another run of its
// workspace applies says where it waits, on its page (linked to the holder) and in GET
// /api/v1/runs/{id} (a queue object the OpenAPI description allows; a phase the rule
// does not have is refused). The state the holder writes makes it STALE at once, and
// the mail to its requester and its approver, and the webhook, say which run wrote it.
func TestTheApplyQueueIsShownAndItsEndTold(t *testing.T) {
	t.Parallel()
	gated := newGatedPhases()
	app := webtest.StartWith(t, webtest.Options{Runner: gated, Mail: true})
	v, err := newValidator(openAPIDocument(t, app))
	require.NoError(t, err)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	hooks := newReceiver(t, http.StatusOK)
	addHook(t, app, admin, "queue-alerts", hooks.URL+"/gantry", "json", notify.RunStale)
	staging := app.OrgEnvironmentID(t, "acme", "staging")

	a := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	b := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	apply := gated.arm(t, "apply")
	approve(t, app, admin, a)
	require.Equal(t, a.ID, bench.Receive(t, "A's apply to begin and hold", time.Minute, apply.entered))
	waitForState(t, app, a.ID, run.Running)
	approve(t, app, admin, b)

	token := app.Token(t, app.NewMember(t, "acme", "Quinn Queue", authz.RoleViewer, false), "read")
	resp := app.API(t, token, http.MethodGet, "/api/v1/runs/"+b.ID, "")
	real := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, real)
	var doc apiQueueDoc
	require.NoError(t, json.Unmarshal([]byte(real), &doc))
	require.NotNil(t, doc.Queue, real)
	require.Equal(t, 1, doc.Queue.Position)
	require.Equal(t, 1, doc.Queue.Waiting)
	require.NotNil(t, doc.Queue.Holder, real)
	require.Equal(t, a.ID, doc.Queue.Holder.RunID)
	require.Equal(t, a.Number, doc.Queue.Holder.Number)
	require.Equal(t, a.Label(), doc.Queue.Holder.Label)
	require.Equal(t, string(run.HolderApplying), doc.Queue.Holder.Phase)
	answer := func(body string) bool { return validAnswer(t, v, app.URL+"/api/v1/runs/"+b.ID, token, body) }
	require.True(t, answer(real), "the real answer")
	require.False(t, answer(strings.Replace(real, `"phase":"applying"`, `"phase":"idling"`, 1)), "a phase the rule does not have")
	require.False(t, answer(strings.Replace(real, `"position":1`, `"position":"first"`, 1)), "a position that is no number")
	// The holder itself waits for nothing: it has no queue.
	holder := webtest.ReadBody(t, app.API(t, token, http.MethodGet, "/api/v1/runs/"+a.ID, ""))
	require.NotContains(t, holder, `"queue"`)

	page := webtest.ReadBody(t, app.Get(t, operator, "/runs/"+b.ID))
	require.Contains(t, page, `data-testid="apply-queue"`)
	require.Contains(t, page, "Waiting to apply: next in line")
	require.Contains(t, page, `href="/runs/`+a.ID+`" data-testid="queue-holder">run `+a.Label()+`</a>`)
	require.Contains(t, page, `data-testid="queue-holder-phase">applying<`)

	apply.release()
	stale := waitForState(t, app, b.ID, run.Stale)
	require.Contains(t, stale.StateReason, "written by run "+a.Label())
	label := "assets-eu-west " + b.Label()
	for _, to := range []string{"operator@acme.test", "admin@acme.test"} {
		m := waitForMail(t, app, mailTo(to, notify.RunStale, label))
		require.Contains(t, m.Text, "Why: "+stale.StateReason, to)
	}
	got := hooks.wait(t, event(notify.RunStale))
	var payload notify.Payload
	require.NoError(t, json.Unmarshal(got.body, &payload))
	require.Equal(t, b.ID, payload.Run.ID)
	require.Equal(t, a.ID, payload.CauseRunID, "the webhook names the run that wrote the state")
	require.Equal(t, stale.StateReason, payload.Reason)
}
