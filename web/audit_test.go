package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/audit/exportfile"
	"gantry/models/run"
)

// requestExport asks for an export of the last day (with extra form values) as the
// client's member and waits until it is ready; it returns its id.
func requestExport(t testing.TB, app *webtest.App, c *http.Client, csrf string, extra url.Values) string {
	t.Helper()
	now := time.Now().UTC()
	form := url.Values{"_csrf": {csrf}, "format": {"jsonl"}, "from": {now.Add(-24 * time.Hour).Format(time.RFC3339)},
		"to": {now.Add(time.Hour).Format(time.RFC3339)}}
	for k, v := range extra {
		form[k] = v
	}
	resp := app.PostForm(t, c, "/audit/exports", form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	loc := resp.Header.Get("Location")
	require.Regexp(t, `^/audit/exports/exp-[a-z0-9]+$`, loc)
	// Woken by each attempt of an export job (the job writes the export, then finishes).
	exported := jobsFinished(t, app, "audit.export")
	bench.Eventually(t, "export "+loc+" to be ready", 30*time.Second, func() (bool, any) {
		page := webtest.ReadBody(t, app.Get(t, c, loc))
		status := "no status"
		if m := exportStatus.FindStringSubmatch(page); m != nil {
			status = m[1]
		}
		if status == "failed" {
			t.Fatalf("export %s failed: %s", loc, page)
		}
		return status == "ready", status
	}, bench.Wake(exported))
	return loc[len("/audit/exports/"):]
}

var exportStatus = regexp.MustCompile(`data-testid="export-status" data-status="([a-z]+)"`)

func TestAuditHistoryForAuditors(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	development := app.OrgEnvironmentID(t, "acme", "development")
	runID := app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {development}, "workspace": {"audit-trail"},
		"kind": {"apply"}, "inputs.name": {"audit-trail"}})
	waitForState(t, app, runID, run.Succeeded)

	auditor := app.LoggedIn(t, "auditor@acme.test")
	resp := app.Get(t, auditor, "/audit")
	page := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, `href="/audit" aria-current="page"`, "in the navigation, marked as the current page")
	require.Contains(t, page, `data-testid="chain-state"`)
	// A sentence with names and a link, not codes and ids.
	require.Regexp(t, `<strong>[^<]+</strong> requested <a href="/runs/`+runID+`">run #1 of audit-trail in development</a> from template bucket`, page)
	require.Regexp(t, `<strong>Gantry</strong> moved <a href="/runs/`+runID+`">run #1 of audit-trail in development</a> to “Succeeded”`, page)

	resp = app.Get(t, auditor, "/audit?action=run.queued&run="+runID)
	page = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1, strings.Count(page, `data-testid="audit-event"`), page)
	require.Contains(t, page, `data-action="run.queued"`)

	resp = app.Get(t, auditor, "/audit?environment="+development+"&action=run.succeeded")
	page = webtest.ReadBody(t, resp)
	require.Equal(t, 1, strings.Count(page, `data-testid="audit-event"`), page)

	resp = app.Get(t, auditor, "/audit?from=yesterday&limit=0")
	page = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, page, `data-testid="error-summary"`)
	require.Contains(t, page, `href="#filter-from"`)
	require.Contains(t, page, `id="filter-from-error"`)
	require.NotContains(t, page, `data-testid="audit-event"`, "nothing is shown for filters that could not be read")

	for _, email := range []string{"viewer@acme.test", "operator@acme.test"} {
		c := app.LoggedIn(t, email)
		resp := app.Get(t, c, "/audit")
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, email)
		home := webtest.ReadBody(t, app.Get(t, c, "/"))
		require.NotContains(t, home, `href="/audit"`, "%s has no audit link", email)
	}
}

func TestAuditEventsAPI(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	development := app.OrgEnvironmentID(t, "acme", "development")
	runID := app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {development}, "workspace": {"audit-api"},
		"kind": {"apply"}, "inputs.name": {"audit-api"}})
	waitForState(t, app, runID, run.Succeeded)
	auditor := app.LoggedIn(t, "auditor@acme.test")

	type page struct {
		Events []struct {
			Seq     int64  `json:"seq"`
			Action  string `json:"action"`
			Run     string `json:"run_id"`
			Summary string `json:"summary"`
			Hash    string `json:"hash"`
		} `json:"events"`
		Next  string `json:"next"`
		Chain struct {
			Head   int64 `json:"head"`
			Intact bool  `json:"intact"`
		} `json:"chain"`
	}
	get := func(path string, status int) page {
		t.Helper()
		resp := app.Get(t, auditor, path)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, status, resp.StatusCode, body)
		var p page
		if status == http.StatusOK {
			require.NoError(t, json.Unmarshal([]byte(body), &p), body)
		}
		return p
	}
	first := get("/api/v1/audit/events?limit=2", http.StatusOK)
	require.Len(t, first.Events, 2)
	require.NotEmpty(t, first.Next)
	require.Greater(t, first.Chain.Head, int64(2))
	require.True(t, first.Chain.Intact)
	second := get(first.Next, http.StatusOK)
	require.Len(t, second.Events, 2)
	require.Equal(t, first.Events[1].Seq-1, second.Events[0].Seq, "keyset paging continues where the page ended")

	ofRun := get("/api/v1/audit/events?run="+runID, http.StatusOK)
	require.NotEmpty(t, ofRun.Events)
	for _, e := range ofRun.Events {
		require.Equal(t, runID, e.Run)
		if strings.HasPrefix(e.Action, "run.") {
			require.Contains(t, e.Summary, "run #1 of audit-api in development")
		}
		require.NotEmpty(t, e.Summary)
		require.Len(t, e.Hash, 64)
	}
	require.Equal(t, "run.queued", ofRun.Events[len(ofRun.Events)-1].Action)

	resp := app.Get(t, auditor, "/api/v1/audit/events?limit=0&to=never")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, `"INVALID_INPUT"`)
	require.Contains(t, body, `"limit"`)
	require.Contains(t, body, `"to"`)

	viewer := app.LoggedIn(t, "viewer@acme.test")
	resp = app.Get(t, viewer, "/api/v1/audit/events")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	// The public keys are served to every member.
	resp = app.Get(t, viewer, "/api/v1/audit/keys")
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var set exportfile.KeySet
	require.NoError(t, json.Unmarshal([]byte(body), &set))
	require.Len(t, set.Keys, 1)
	require.True(t, strings.HasPrefix(set.Keys[0].Fingerprint, "SHA256:"))
}

func TestAuditExportsDownloadVerifyAndResume(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	development := app.OrgEnvironmentID(t, "acme", "development")
	runID := app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {development}, "workspace": {"audit-export"},
		"kind": {"apply"}, "inputs.name": {"audit-export"}})
	waitForState(t, app, runID, run.Succeeded)
	auditor := app.LoggedIn(t, "auditor@acme.test")
	csrf := app.CSRF(t, auditor)

	var set exportfile.KeySet
	require.NoError(t, json.Unmarshal([]byte(webtest.ReadBody(t, app.Get(t, auditor, "/api/v1/audit/keys"))), &set))
	trust := exportfile.Trust{Keys: &set}

	id := requestExport(t, app, auditor, csrf, nil)
	page := webtest.ReadBody(t, app.Get(t, auditor, "/audit/exports/"+id))
	require.Contains(t, page, `data-testid="export-download"`)
	require.Contains(t, page, set.Keys[0].Fingerprint, "the page names the key to pin")
	require.Contains(t, page, `data-testid="export-manifest"`)

	resp := app.Get(t, auditor, "/audit/exports/"+id+"/download")
	whole := []byte(webtest.ReadBody(t, resp))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Disposition"), "attachment; filename=\"gantry-audit-"+id)
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	r := exportfile.Verify(bytes.NewReader(whole), trust)
	require.True(t, r.OK, r.Verdict)
	require.Contains(t, r.Verdict, "chain verified from its anchor")

	// An interrupted download resumes where it stopped, byte-identical, while the file
	// is unchanged (If-Range with its ETag).
	cut := len(whole)/2 + 3
	req, err := http.NewRequest(http.MethodGet, app.URL+"/audit/exports/"+id+"/download", nil)
	require.NoError(t, err)
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-", cut))
	req.Header.Set("If-Range", etag)
	resp, err = auditor.Do(req)
	require.NoError(t, err)
	rest := []byte(webtest.ReadBody(t, resp))
	require.Equal(t, http.StatusPartialContent, resp.StatusCode)
	require.Equal(t, whole, append(append([]byte{}, whole[:cut]...), rest...))
	resumed := exportfile.Verify(bytes.NewReader(append(append([]byte{}, whole[:cut]...), rest...)), trust)
	require.True(t, resumed.OK, resumed.Verdict)

	// A CSV export filtered to one run verifies event by event.
	csvID := requestExport(t, app, auditor, csrf, url.Values{"format": {"csv"}, "run": {runID}})
	resp = app.Get(t, auditor, "/audit/exports/"+csvID+"/download")
	csvData := []byte(webtest.ReadBody(t, resp))
	require.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))
	r = exportfile.Verify(bytes.NewReader(csvData), trust)
	require.True(t, r.OK, r.Verdict)
	require.Contains(t, r.Verdict, "filtered export")
	require.Equal(t, runID, r.Manifest.Filters.Run)

	// The export itself is in the history, in words.
	history := webtest.ReadBody(t, app.Get(t, auditor, "/audit?action=audit.exported"))
	require.Contains(t, history, `<a href="/audit/exports/`+csvID+`">audit export of `)

	// Exports are for auditors, admins and owners.
	viewer := app.LoggedIn(t, "viewer@acme.test")
	for _, path := range []string{"/audit/exports/" + id, "/audit/exports/" + id + "/download"} {
		resp := app.Get(t, viewer, path)
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, path)
	}
	now := time.Now().UTC()
	resp = app.PostForm(t, viewer, "/audit/exports", url.Values{"_csrf": {app.CSRF(t, viewer)}, "format": {"jsonl"},
		"from": {now.Add(-time.Hour).Format(time.RFC3339)}, "to": {now.Format(time.RFC3339)}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	// A bad request is refused field by field and persists nothing.
	before := countRows(t, app, "SELECT count(*) FROM audit_exports")
	resp = app.PostForm(t, auditor, "/audit/exports", url.Values{"_csrf": {csrf}, "format": {"xml"}, "from": {"soon"}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	// The export takes the filters' range: its problem is the filters' From, and the
	// export waits for it to be put right.
	require.Contains(t, body, `data-testid="error-summary"`)
	require.Contains(t, body, `data-testid="export-blocked"`)
	require.Contains(t, body, `href="#filter-from"`)
	require.Contains(t, body, `id="filter-from-error"`)
	require.Contains(t, body, `value="soon"`, "what was sent is shown again")
	require.Equal(t, before, countRows(t, app, "SELECT count(*) FROM audit_exports"))
}

// TestAuditExportDownloadAnswersAsDescribed: every answer of the API's export download
// is in its OpenAPI description, checked by the validator: 200 with the ETag, 206 for a
// range while If-Range holds, 304 for If-None-Match, 412 for If-Match of another file,
// 416 for a range outside the file and 409 for an export not built yet; every error is
// a problem document with its code (the 416 was ServeContent's plain text).
func TestAuditExportDownloadAnswersAsDescribed(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	api := newAPIChecker(t, app)
	auditor := app.NewMember(t, "acme", "Dana Download", "auditor", false)
	token := app.Token(t, auditor, "audit")
	browser := app.LoggedIn(t, "auditor@acme.test")
	id := requestExport(t, app, browser, app.CSRF(t, browser), nil)
	path := "/api/v1/audit/exports/" + id + "/download"
	download := func(headers map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, app.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		text := webtest.ReadBody(t, resp)
		api.check(token, http.MethodGet, path, "", resp, text)
		return resp, text
	}
	problem := func(resp *http.Response, text string, status int, code string) {
		t.Helper()
		require.Equal(t, status, resp.StatusCode, text)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), text)
		require.Empty(t, resp.Header.Get("Content-Disposition"), "an error is not saved as the file")
		var p struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		require.NoError(t, json.Unmarshal([]byte(text), &p), text)
		require.Equal(t, status, p.Status)
		require.Equal(t, code, p.Code)
		require.NotEmpty(t, p.Detail)
	}

	resp, whole := download(nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, whole)
	etag := resp.Header.Get("ETag")
	require.Regexp(t, `^"[0-9a-f]{64}"$`, etag)

	resp, part := download(map[string]string{"Range": "bytes=10-19", "If-Range": etag})
	require.Equal(t, http.StatusPartialContent, resp.StatusCode, part)
	require.Equal(t, whole[10:20], part)
	require.Equal(t, fmt.Sprintf("bytes 10-19/%d", len(whole)), resp.Header.Get("Content-Range"))

	resp, text := download(map[string]string{"If-None-Match": etag})
	require.Equal(t, http.StatusNotModified, resp.StatusCode, text)
	require.Empty(t, text)

	resp, text = download(map[string]string{"If-Match": `"` + strings.Repeat("0", 64) + `"`})
	problem(resp, text, http.StatusPreconditionFailed, "PRECONDITION_FAILED")

	resp, text = download(map[string]string{"Range": fmt.Sprintf("bytes=%d-", len(whole)+10)})
	problem(resp, text, http.StatusRequestedRangeNotSatisfiable, "RANGE_NOT_SATISFIABLE")
	require.Equal(t, fmt.Sprintf("bytes */%d", len(whole)), resp.Header.Get("Content-Range"))

	// An export the queue has not built yet (the queue is stopped): 409.
	app.StopQueue(t)
	status, body := api.call(token, http.MethodPost, "/api/v1/audit/exports", map[string]string{"format": "jsonl",
		"from": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "to": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	require.Equal(t, http.StatusAccepted, status, body)
	var queued struct{ Download string }
	require.NoError(t, json.Unmarshal([]byte(body), &queued))
	path = queued.Download
	resp, text = download(nil)
	problem(resp, text, http.StatusConflict, "CONFLICT")
	require.Contains(t, text, "not ready yet")
}
