package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/idempotency"
)

// TestRequestNote: the reason and ticket a requester gives are kept with the run,
// carried into "Edit and resubmit", shown escaped, and in the API's run and the
// evidence report.
func TestRequestNote(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	reason := "Orders need a bucket for invoices <script>alert(1)</script>\nsecond line"
	form := url.Values{"_csrf": {app.CSRF(t, operator)}, "template": {"bucket"}, "environment": {staging}, "workspace": {"invoices"},
		"kind": {"plan_only"}, "inputs.name": {"invoices"}, "reason": {"  " + reason + "  "}, "ticket": {" OPS-1234 "}}
	resp := app.PostForm(t, operator, "/requests", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	runID := path.Base(resp.Header.Get("Location"))

	var stored struct{ RequestReason, RequestTicket string }
	require.NoError(t, app.DB.Raw("SELECT request_reason, request_ticket FROM runs WHERE id = ?", runID).Scan(&stored).Error)
	require.Equal(t, reason, stored.RequestReason, "kept trimmed, line break kept")
	require.Equal(t, "OPS-1234", stored.RequestTicket)

	// Edit and resubmit starts from the same note; the text is escaped.
	body := webtest.ReadBody(t, app.Get(t, operator, "/requests/new?template=bucket&from_run="+runID))
	require.Contains(t, body, `value="OPS-1234"`)
	require.Contains(t, body, "&lt;script&gt;alert(1)&lt;/script&gt;")
	require.NotContains(t, body, "<script>alert(1)")

	// The evidence report and the API carry it.
	body = webtest.ReadBody(t, app.Get(t, operator, "/runs/"+runID+"/evidence"))
	require.Contains(t, body, "OPS-1234")
	require.NotContains(t, body, "<script>alert(1)")
	tok := app.Token(t, app.NewMember(t, "acme", "note-reader", authz.RoleViewer, false), "read")
	resp = app.APIKeyed(t, tok, idempotency.NewKey(), http.MethodGet, "/api/v1/runs/"+runID, "")
	var apiRun struct {
		RequestReason string `json:"request_reason"`
		RequestTicket string `json:"request_ticket"`
	}
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.Unmarshal([]byte(webtest.ReadBody(t, resp)), &apiRun))
	require.Equal(t, reason, apiRun.RequestReason)
	require.Equal(t, "OPS-1234", apiRun.RequestTicket)
}
