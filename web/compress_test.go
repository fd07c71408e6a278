package web_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

// getEncoded requests path with c asking for acceptEncoding itself, so the transport
// leaves the body as sent.
func getEncoded(t *testing.T, app *webtest.App, c *http.Client, path, acceptEncoding string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, app.URL+path, nil)
	require.NoError(t, err)
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// TestPagesAreCompressed: a page is sent gzip-compressed to a client that accepts gzip
// (with Vary: Accept-Encoding and its compressed length), plain to one that does not,
// and the two are the same page; a weight of zero refuses gzip; error pages too.
func TestPagesAreCompressed(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	seedWorkspaces(t, app, app.Orgs["acme"], app.OrgEnvironmentID(t, "acme", "development"), "zip", 50)

	resp, zipped := getEncoded(t, app, c, "/workspaces", "gzip, br")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
	require.Contains(t, resp.Header.Values("Vary"), "Accept-Encoding")
	require.Equal(t, len(zipped), int(resp.ContentLength))
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	require.NoError(t, err)
	page, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Contains(t, string(page), "zip-050")
	require.Less(t, len(zipped)*4, len(page), "a list of 50 rows compresses at least fourfold")

	resp, plain := getEncoded(t, app, c, "/workspaces", "identity")
	require.Empty(t, resp.Header.Get("Content-Encoding"))
	require.Contains(t, resp.Header.Values("Vary"), "Accept-Encoding")
	require.Equal(t, stripTokens(string(page)), stripTokens(string(plain)), "the same page either way")
	resp, _ = getEncoded(t, app, c, "/workspaces", "gzip;q=0")
	require.Empty(t, resp.Header.Get("Content-Encoding"), "a weight of zero refuses gzip")

	resp, notFound := getEncoded(t, app, c, "/runs/run-nope", "gzip")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"), "error pages are pages too")
	zr, err = gzip.NewReader(bytes.NewReader(notFound))
	require.NoError(t, err)
	body, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Contains(t, string(body), "Not found")
}

var tokenAttr = regexp.MustCompile(`(name="_csrf" value="|X-CSRF-Token&#34;:&#34;)[^"&]*`)

// stripTokens blanks the CSRF tokens of a page (masked afresh for each response) and
// the request id, which differ between two renders of one page.
func stripTokens(page string) string {
	page = tokenAttr.ReplaceAllString(page, "$1")
	page = regexp.MustCompile(`name="idempotency_key" value="[^"]*"`).ReplaceAllString(page, `name="idempotency_key"`)
	return regexp.MustCompile(`request [A-Za-z0-9]+</small>`).ReplaceAllString(page, "request</small>")
}

// TestCSRFTokenIsMaskedPerResponse: every response carries the session's CSRF token
// under a fresh pad, so no page holds the token itself (a compressed page must hold no
// fixed secret beside the text it reflects); a token from any page works, and so does
// the plain token; a token altered in one byte, or another session's, does not.
func TestCSRFTokenIsMaskedPerResponse(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	first, second := app.CSRF(t, c), app.CSRF(t, c)
	require.NotEqual(t, first, second, "a fresh pad for each response")
	var raw string
	require.NoError(t, app.DB.Raw("SELECT csrf_token FROM sessions WHERE user_id IS NOT NULL ORDER BY created_at DESC LIMIT 1").Scan(&raw).Error)
	require.NotEmpty(t, raw)
	for _, path := range []string{"/", "/workspaces?q=" + url.QueryEscape(raw[:8]), "/approvals", "/runs/run-nope"} {
		body := webtest.ReadBody(t, app.Get(t, c, path))
		require.NotContains(t, body, raw, "%s holds the token itself", path)
	}

	post := func(token, name string) int {
		resp := app.PostForm(t, c, "/environments", url.Values{"_csrf": {token}, "name": {name}, "tier": {"development"}})
		webtest.ReadBody(t, resp)
		return resp.StatusCode
	}
	require.Equal(t, http.StatusSeeOther, post(first, "masked-first"), "an older page's token")
	require.Equal(t, http.StatusSeeOther, post(second, "masked-second"))
	require.Equal(t, http.StatusSeeOther, post(raw, "plain-token"))
	b, err := base64.RawURLEncoding.DecodeString(first)
	require.NoError(t, err)
	b[len(b)-1] ^= 1
	require.Equal(t, http.StatusForbidden, post(base64.RawURLEncoding.EncodeToString(b), "altered"))
	require.Equal(t, http.StatusForbidden, post(app.CSRF(t, app.LoggedIn(t, "owner@acme.test")), "another-session"))
	require.Equal(t, http.StatusForbidden, post(strings.Repeat("A", len(first)), "zeros"))
}
