package web_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/audit/exportfile"
	"gantry/models/risk"
	"gantry/models/run"
	"gantry/models/runport"
)

// TestSelfApprovalSaidEverywhere: with four eyes off for risk 1-protected, an operator
// approves her own run through the run page's form; the run page (its decision in the
// timeline), the evidence report (page, download and JSON), the audit history and a
// signed export of the run all mark that decision "self-approved: the requester
// approved their own run", and none of them marks a run another person approved.
func TestSelfApprovalSaidEverywhere(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	app.SaveMatrix(t, "acme", func(m *risk.Matrix) { webtest.Decision(m, risk.Level1Protected).FourEyes = false })

	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	request := func(region string) run.Run {
		return waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, region)), run.PendingApproval)
	}
	self, other := request("eu-west"), request("eu-central")
	approve(t, app, operator, self)
	approve(t, app, admin, other)
	self, other = waitForState(t, app, self.ID, run.Succeeded), waitForState(t, app, other.ID, run.Succeeded)
	require.True(t, self.SelfApproved())
	require.False(t, other.SelfApproved())

	marks := func(page string) int { return strings.Count(page, runport.SelfApproved) }
	auditor := app.LoggedIn(t, "auditor@acme.test")
	for _, c := range []struct {
		r    run.Run
		want int
	}{{self, 1}, {other, 0}} {
		page := webtest.ReadBody(t, app.Get(t, auditor, "/runs/"+c.r.ID))
		require.Equal(t, c.want, strings.Count(page, `data-testid="self-approved"`), "run page of %s", c.r.ID)
		require.Equal(t, c.want, marks(page))
		evidence := webtest.ReadBody(t, app.Get(t, auditor, "/runs/"+c.r.ID+"/evidence"))
		require.Equal(t, c.want, strings.Count(evidence, `data-testid="self-approved"`), "evidence report of %s", c.r.ID)
		require.Contains(t, evidence, `data-self-approved="`+map[bool]string{true: "true", false: "false"}[c.want == 1]+`"`)
		download := webtest.ReadBody(t, app.Get(t, auditor, "/runs/"+c.r.ID+"/evidence.html"))
		require.Equal(t, 2*c.want, marks(download), "the kept file says it too (the decision and the verdict)")

		var rep struct {
			Decisions []map[string]any `json:"decisions"`
			Verdict   struct {
				SelfApproved bool   `json:"self_approved"`
				Text         string `json:"text"`
			} `json:"verdict"`
		}
		require.NoError(t, json.Unmarshal([]byte(webtest.ReadBody(t, app.Get(t, auditor, "/runs/"+c.r.ID+"/evidence.json"))), &rep))
		require.Equal(t, c.want == 1, rep.Verdict.SelfApproved)
		require.Len(t, rep.Decisions, 1)
		if c.want == 1 {
			require.Equal(t, runport.SelfApproved, rep.Decisions[0]["self_approval"])
			require.True(t, strings.HasSuffix(rep.Verdict.Text, "The approval in force is marked "+runport.SelfApproved+"."), rep.Verdict.Text)
		} else {
			require.NotContains(t, rep.Decisions[0], "self_approval")
		}
		history := webtest.ReadBody(t, app.Get(t, auditor, "/audit?action=run.approved&run="+c.r.ID))
		require.Equal(t, c.want, marks(history), "audit history of %s", c.r.ID)
	}

	// A signed export of the self-approved run: its approval's hashed body says so, and
	// the file verifies against the organization's key.
	var keys exportfile.KeySet
	require.NoError(t, json.Unmarshal([]byte(webtest.ReadBody(t, app.Get(t, auditor, "/api/v1/audit/keys"))), &keys))
	id := requestExport(t, app, auditor, app.CSRF(t, auditor), url.Values{"run": {self.ID}})
	resp := app.Get(t, auditor, "/audit/exports/"+id+"/download")
	file := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	verdict := exportfile.Verify(strings.NewReader(file), exportfile.Trust{Keys: &keys})
	require.True(t, verdict.OK, verdict.Verdict)
	approvals := 0
	lines := bufio.NewScanner(strings.NewReader(file))
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		var line struct {
			Body struct {
				Action string         `json:"action"`
				Actor  string         `json:"actor_id"`
				Data   map[string]any `json:"data"`
			} `json:"body"`
		}
		if json.Unmarshal(lines.Bytes(), &line) != nil || line.Body.Action != "run.approved" {
			continue
		}
		approvals++
		require.Equal(t, true, line.Body.Data[runport.SelfApprovedField], "the exported approval says it was the requester's own")
		require.Equal(t, self.RequestedBy, line.Body.Actor)
	}
	require.Equal(t, 1, approvals)
}
