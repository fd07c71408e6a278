package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/web/webtest"
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
	require.Eventually(t, func() bool {
		page := webtest.ReadBody(t, app.Get(t, c, loc))
		return regexpReady.MatchString(page)
	}, 30*time.Second, 100*time.Millisecond, "export %s never became ready", loc)
	return loc[len("/audit/exports/"):]
}

var regexpReady = regexp.MustCompile(`data-status="ready"`)
