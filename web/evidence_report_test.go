package web_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/attest"
	"gantry/models/audit/exportfile"
	"gantry/models/run"
)

type reportJSON struct {
	Run struct {
		ID         string `json:"id"`
		State      string `json:"state"`
		PlanDigest string `json:"plan_digest"`
	} `json:"run"`
	Verdict struct {
		Applied  bool   `json:"applied"`
		Match    bool   `json:"match"`
		Approved string `json:"approved_plan_digest"`
		Applied_ string `json:"applied_plan_digest"`
		Stored   string `json:"stored_plan_digest"`
		Text     string `json:"text"`
	} `json:"verdict"`
	Decisions []struct {
		Action string `json:"action"`
	} `json:"decisions"`
	Apply        *struct{ Action string } `json:"apply"`
	StateVersion *struct{ Action string } `json:"state_version"`
	Verification *struct{ Action string } `json:"verification"`
}

func readReport(t *testing.T, app *webtest.App, c *http.Client, runID string) reportJSON {
	t.Helper()
	resp := app.Get(t, c, "/runs/"+runID+"/evidence.json")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var rep reportJSON
	require.NoError(t, json.Unmarshal([]byte(body), &rep), body)
	return rep
}

// TestEvidenceReportsJudgeTheAppliedArtifact: a succeeded run's report says the applied
// artifact is the approved one, with the digests; the same run after its stored plan
// was swapped says it is not; a rejected run says it never applied and why. The page
// and the HTML download show the same verdict, and the auditor reads them.
func TestEvidenceReportsJudgeTheAppliedArtifact(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	auditor := app.LoggedIn(t, "auditor@acme.test")
	development := app.OrgEnvironmentID(t, "acme", "development")
	done := waitForState(t, app, app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {development},
		"workspace": {"evidence-ok"}, "kind": {"apply"}, "inputs.name": {"evidence-ok"}}), run.Succeeded)

	rep := readReport(t, app, auditor, done.ID)
	require.True(t, rep.Verdict.Applied)
	require.True(t, rep.Verdict.Match, rep.Verdict.Text)
	require.Equal(t, done.PlanDigest, rep.Verdict.Approved)
	require.Equal(t, done.PlanDigest, rep.Verdict.Applied_)
	require.Equal(t, done.PlanDigest, rep.Verdict.Stored)
	require.Contains(t, rep.Verdict.Text, "The applied artifact is the approved artifact")
	require.NotNil(t, rep.Apply)
	require.NotNil(t, rep.StateVersion, "the state version the apply wrote")
	require.NotNil(t, rep.Verification)
	require.Equal(t, "run.approved", rep.Decisions[0].Action)

	page := webtest.ReadBody(t, app.Get(t, auditor, "/runs/"+done.ID+"/evidence"))
	require.Contains(t, page, `data-testid="evidence-verdict" data-match="true" data-applied="true"`)
	resp := app.Get(t, auditor, "/runs/"+done.ID+"/evidence.html")
	file := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Disposition"), `attachment; filename="gantry-evidence-`+done.ID+`.html"`)
	require.Contains(t, file, "The applied artifact is the approved artifact")
	require.NotContains(t, file, `class="mainnav"`, "the download stands alone")
	require.Contains(t, webtest.ReadBody(t, app.Get(t, operator, "/runs/"+done.ID)), `href="/runs/`+done.ID+`/evidence"`)

	// The apply's attestation: an in-toto statement of the state version it wrote, in a
	// DSSE envelope signed with the organization's key; altered, it fails.
	var keys exportfile.KeySet
	require.NoError(t, json.Unmarshal([]byte(webtest.ReadBody(t, app.Get(t, auditor, "/api/v1/audit/keys"))), &keys))
	resp = app.Get(t, auditor, "/runs/"+done.ID+"/attestations.json")
	list := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, list)
	require.Contains(t, resp.Header.Get("Content-Disposition"), "gantry-attestations-"+done.ID)
	require.True(t, attest.VerifyFile([]byte(list), exportfile.Trust{Keys: &keys}).OK)
	var bundles []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(list), &bundles))
	require.Len(t, bundles, 1)
	bundle := string(bundles[0])
	checked := attest.Verify([]byte(bundle), exportfile.Trust{Keys: &keys})
	require.True(t, checked.OK, checked.Verdict)
	var sv struct{ ID, SHA256 string }
	require.NoError(t, app.DB.Raw("SELECT id, sha256 FROM state_versions WHERE run_id = ?", done.ID).Scan(&sv).Error)
	subject := checked.Statement.GetSubject()[0]
	require.Equal(t, "state-version/"+sv.ID, subject.GetName())
	require.Equal(t, strings.TrimPrefix(sv.SHA256, "sha256:"), subject.GetDigest()["sha256"])
	predicate := checked.Statement.GetPredicate().GetFields()
	require.Equal(t, done.ID, predicate["run"].GetStringValue())
	require.Equal(t, done.PlanDigest, predicate["plan"].GetStructValue().GetFields()["digest"].GetStringValue())
	require.Equal(t, done.ConfigDigest, predicate["config_bundle"].GetStructValue().GetFields()["digest"].GetStringValue())
	require.NotEmpty(t, predicate["approval"].GetStructValue().GetFields()["audit_event_hash"].GetStringValue())
	// A statement naming another state digest under the same signature fails, and so
	// does the bundle naming another key id.
	var b attest.Bundle
	require.NoError(t, json.Unmarshal([]byte(bundle), &b))
	payload, err := base64.StdEncoding.DecodeString(b.DSSEEnvelope.Payload)
	require.NoError(t, err)
	digest := subject.GetDigest()["sha256"]
	other := strings.Replace(string(payload), digest, strings.Repeat("0", len(digest)), 1)
	require.NotEqual(t, string(payload), other)
	forged := b
	forged.DSSEEnvelope.Payload = base64.StdEncoding.EncodeToString([]byte(other))
	raw, err := json.Marshal(forged)
	require.NoError(t, err)
	require.Contains(t, attest.Verify(raw, exportfile.Trust{Keys: &keys}).Verdict, "FAIL signature: does not verify over the statement")
	relabelled := b
	relabelled.Key.KeyID = "audit-000000000000"
	raw, err = json.Marshal(relabelled)
	require.NoError(t, err)
	require.Contains(t, attest.Verify(raw, exportfile.Trust{Keys: &keys}).Verdict, "FAIL signature: key audit-000000000000 is not one of the organization's keys")
	require.Len(t, readReportRaw(t, app, auditor, done.ID).Attestations, 1)

	// The stored plan swapped after the approval (what only someone with the database
	// could do): the recomputed digest no longer matches the chain's records.
	require.NoError(t, app.DB.Exec("UPDATE runs SET plan_artifact_id = config_artifact_id WHERE id = ?", done.ID).Error)
	rep = readReport(t, app, auditor, done.ID)
	require.True(t, rep.Verdict.Applied)
	require.False(t, rep.Verdict.Match)
	require.Contains(t, rep.Verdict.Text, "The applied artifact is NOT the approved artifact")
	require.NotEqual(t, done.PlanDigest, rep.Verdict.Stored)
	require.Contains(t, webtest.ReadBody(t, app.Get(t, auditor, "/runs/"+done.ID+"/evidence")), `data-match="false" data-applied="true"`)

	// A rejected run never applied, and says so.
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	waiting := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	admin := app.LoggedIn(t, "admin@acme.test")
	form := decisionForm(t, app, admin, waiting)
	form.Set("reason", "not in this quarter")
	resp = app.PostForm(t, admin, "/runs/"+waiting.ID+"/reject", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	waitForState(t, app, waiting.ID, run.Rejected)
	rep = readReport(t, app, auditor, waiting.ID)
	require.False(t, rep.Verdict.Applied)
	require.False(t, rep.Verdict.Match)
	require.True(t, strings.HasPrefix(rep.Verdict.Text, "Never applied: rejected by Adam"), rep.Verdict.Text)
	require.Contains(t, rep.Verdict.Text, "not in this quarter")
	require.Equal(t, "run.rejected", rep.Decisions[len(rep.Decisions)-1].Action)
	require.Nil(t, rep.Apply)
	resp = app.Get(t, auditor, "/runs/"+waiting.ID+"/attestations.json")
	require.Equal(t, "[]", strings.TrimSpace(webtest.ReadBody(t, resp)), "a run that wrote no state has no attestation")
	require.Contains(t, attest.VerifyFile([]byte("[]"), exportfile.Trust{Keys: &keys}).Verdict, "FAIL the file holds no attestation")
}

func readReportRaw(t *testing.T, app *webtest.App, c *http.Client, runID string) struct{ Attestations []json.RawMessage } {
	t.Helper()
	var out struct{ Attestations []json.RawMessage }
	require.NoError(t, json.Unmarshal([]byte(webtest.ReadBody(t, app.Get(t, c, "/runs/"+runID+"/evidence.json"))), &out))
	return out
}
