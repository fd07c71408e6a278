package web_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/idempotency"
	"gantry/models/run"
	"gantry/static"
	"gantry/web"
)

// The edge refuses bad input with 4xx, never 500: NUL, invalid UTF-8 and control
// characters anywhere a request can carry them, broken bodies, off-site return_to;
// everything behind sign-in is no-store; a 413 or CSRF refusal still shows who is
// signed in and a way back.

// badBytes are what a request must never carry past the edge.
var badBytes = []struct{ name, raw string }{
	{"NUL", "\x00"},
	{"invalid UTF-8 ff", "\xff"},
	{"invalid UTF-8 c3 28", "\xc3\x28"},
	{"control 01", "\x01"},
}

// refusedByEdge: a 400 with the edge's own explanation, so no handler (or database)
// saw the request.
func refusedByEdge(t *testing.T, resp *http.Response, what string) string {
	t.Helper()
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", what, body)
	require.Regexp(t, `Gantry does not accept|could not be read`, body, what)
	return body
}

func do(t *testing.T, c *http.Client, req *http.Request) *http.Response {
	t.Helper()
	resp, err := c.Do(req)
	require.NoError(t, err)
	return resp
}

// rawGet sends a GET with extra header lines exactly as written (http.Client refuses
// to send some of these bytes) and returns the status and body.
func rawGet(t *testing.T, app *webtest.App, c *http.Client, path, header string) (int, string) {
	t.Helper()
	u, err := url.Parse(app.URL)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	defer conn.Close()
	var req strings.Builder
	fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", path, u.Host)
	for _, ck := range c.Jar.Cookies(u) {
		fmt.Fprintf(&req, "Cookie: %s=%s\r\n", ck.Name, ck.Value)
	}
	req.WriteString(header + "\r\n\r\n")
	_, err = io.WriteString(conn, req.String())
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	return resp.StatusCode, webtest.ReadBody(t, resp)
}

func TestEdgeRefusesBadBytes(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.LoggedIn(t, "admin@acme.test")
	token := app.CSRF(t, admin)

	for _, bad := range badBytes {
		// Path ids: the raw and the decoded path.
		for _, prefix := range []string{"/runs/", "/workspaces/", "/environments/"} {
			refusedByEdge(t, app.Get(t, admin, prefix+"x"+url.PathEscape(bad.raw)), bad.name+" in "+prefix)
		}
		// The API answers the same refusal as a problem document.
		resp := app.Get(t, admin, "/api/v1/environments/x"+url.PathEscape(bad.raw))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad.name)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		var problem struct{ Code, Detail string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&problem))
		resp.Body.Close()
		require.Equal(t, "BAD_REQUEST", problem.Code)
		require.Contains(t, problem.Detail, "Gantry does not accept")

		// A query value and a query key.
		refusedByEdge(t, app.Get(t, admin, "/environments?q=a"+url.QueryEscape(bad.raw)), bad.name+" in a query value")
		refusedByEdge(t, app.Get(t, admin, "/environments?"+url.QueryEscape(bad.raw)+"=1"), bad.name+" in a query key")

		// A form value of the environment form: nothing is created.
		body := refusedByEdge(t, app.PostForm(t, admin, "/environments", url.Values{"_csrf": {token}, "name": {"edge" + bad.raw}, "tier": {"development"}}),
			bad.name+" in a form value")
		require.Contains(t, body, "The field &#34;name&#34;")

		// A header value. Go's server itself refuses NUL and other controls there (400);
		// bytes that are not UTF-8 get through to the edge.
		status, body := rawGet(t, app, admin, "/environments", "X-Note: a"+bad.raw+"b")
		require.Equal(t, http.StatusBadRequest, status, "%s in a header: %s", bad.name, body)

		// The state backend, without signing in: Basic-auth user and password, and the path.
		anon := app.Client(t)
		for _, cred := range [][2]string{{"job" + bad.raw, "secret"}, {"job", "secret" + bad.raw}} {
			req, err := http.NewRequest(http.MethodGet, app.URL+"/state/ws-x", nil)
			require.NoError(t, err)
			req.SetBasicAuth(cred[0], cred[1])
			refusedByEdge(t, do(t, anon, req), bad.name+" in the state backend's credentials")
		}
		req, err := http.NewRequest(http.MethodGet, app.URL+"/state/ws-x"+url.PathEscape(bad.raw), nil)
		require.NoError(t, err)
		req.SetBasicAuth("job", "secret")
		refusedByEdge(t, do(t, anon, req), bad.name+" in the state backend's path")
	}
	// Invalid UTF-8 in a header is the edge's to refuse (Go's server lets it by).
	status, body := rawGet(t, app, admin, "/environments", "X-Note: a\xffb")
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "A request header contains characters Gantry does not accept")
	// One-line fields refuse line breaks and tabs too.
	refusedByEdge(t, app.PostForm(t, admin, "/environments", url.Values{"_csrf": {token}, "name": {"edge\tname"}, "tier": {"development"}}), "tab in a name")
	refusedByEdge(t, app.PostForm(t, admin, "/environments", url.Values{"_csrf": {token}, "name": {"edge\nname"}, "tier": {"development"}}), "LF in a name")
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM environments WHERE name LIKE 'edge%'"))

	// A Rego upload is multi-line: CR, LF and tab stay, NUL does not.
	rego := "package gantry.org.edge_rule\r\n\r\nmetadata := {\"id\": \"org.edge_rule\", \"title\": \"Edge\", \"description\": \"d\", \"enforcement\": \"advisory\"}\r\n\r\ndeny contains msg if {\r\n\tfalse\r\n\tmsg := \"never\"\r\n}\r\n"
	tests := "package gantry.org.edge_rule_test\r\n\r\nimport data.gantry.org.edge_rule\r\n\r\ntest_never if {\r\n\tcount(edge_rule.deny) == 0\r\n}\r\n"
	owner := app.LoggedIn(t, "owner@acme.test")
	ownerToken := app.CSRF(t, owner)
	refusedByEdge(t, app.PostForm(t, owner, "/policies/upload", uploadForm(ownerToken, "edge_rule", rego+"\x00", tests)), "NUL in Rego")
	resp := app.PostForm(t, owner, "/policies/upload", uploadForm(ownerToken, "edge_rule", rego, tests))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "tabs and CRLF are allowed in Rego: %s", body)
}

func TestEdgeRefusesBadDecisionInput(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	admin := app.LoggedIn(t, "admin@acme.test")

	for _, bad := range badBytes {
		// A reason allows tab, CR and LF, never NUL, another control or bad UTF-8.
		form := decisionForm(t, app, admin, r)
		form.Set("reason", "looked at it"+bad.raw)
		refusedByEdge(t, app.PostForm(t, admin, "/runs/"+r.ID+"/reject", form), bad.name+" in a reason")
		// The idempotency key is refused before it is looked up or stored.
		form = decisionForm(t, app, admin, r)
		form.Set("reason", "looked at it")
		form.Set("idempotency_key", "k"+bad.raw)
		refusedByEdge(t, app.PostForm(t, admin, "/runs/"+r.ID+"/reject", form), bad.name+" in an idempotency key")
	}
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM idempotency_keys k JOIN users u ON u.id = k.user_id WHERE u.email = 'admin@acme.test'"))
	require.Equal(t, run.PendingApproval, waitForState(t, app, r.ID, run.PendingApproval).State)

	// Tab, CR and LF in a reason are a person's text: the rejection goes through.
	form := decisionForm(t, app, admin, r)
	form.Set("reason", "wrong region:\tus\r\nask again")
	resp := app.PostForm(t, admin, "/runs/"+r.ID+"/reject", form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, run.Rejected, waitForState(t, app, r.ID, run.Rejected).State)
}

func TestEdgeRefusesMalformedBodies(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.LoggedIn(t, "admin@acme.test")
	token := app.CSRF(t, admin)
	post := func(path, contentType, body string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, app.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("X-CSRF-Token", token)
		if strings.HasPrefix(path, "/api/") {
			req.Header.Set(idempotency.Header, idempotency.NewKey())
		}
		return do(t, admin, req)
	}

	// A decision reads its form first (it was a 500), the environment form ignores a
	// broken one (it was a 422 for fields it never saw).
	for _, path := range []string{"/runs/run-x/approve", "/environments"} {
		refusedByEdge(t, post(path, "application/x-www-form-urlencoded", "%zz=1"), path+": broken %-escape")
		refusedByEdge(t, post(path, "application/x-www-form-urlencoded", "name=a%"), path+": truncated %-escape")
		refusedByEdge(t, post(path, "multipart/form-data", "name=x"), path+": multipart without a boundary")
		refusedByEdge(t, post(path, "multipart/form-data; boundary=XyZ", "--XyZ\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nx"),
			path+": multipart cut short")
		refusedByEdge(t, post(path, "text/plain; =x", "name=x"), path+": unreadable Content-Type")
		refusedByEdge(t, post(path, "application/x-www-form-urlencoded; =x", "name=x"), path+": form with an unreadable parameter")
	}

	multipartForm := func(fields map[string]string, fileName string) (string, string) {
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		for k, v := range fields {
			require.NoError(t, w.WriteField(k, v))
		}
		if fileName != "" {
			part, err := w.CreateFormFile("attachment", fileName)
			require.NoError(t, err)
			_, _ = part.Write([]byte("text"))
		}
		require.NoError(t, w.Close())
		return w.FormDataContentType(), b.String()
	}
	for _, bad := range badBytes {
		ct, body := multipartForm(map[string]string{"name": "edge-multi", "tier": "development"}, "a"+bad.raw+".txt")
		refusedByEdge(t, post("/environments", ct, body), bad.name+" in an uploaded file's name")
		ct, body = multipartForm(map[string]string{"name": "edge" + bad.raw, "tier": "development"}, "")
		refusedByEdge(t, post("/environments", ct, body), bad.name+" in a multipart field")
	}
	// A well-formed multipart form still reaches the handler, parsed once at the edge.
	ct, body := multipartForm(map[string]string{"_csrf": token, idempotency.Field: idempotency.NewKey(), "name": "edge-multi", "tier": "development"}, "notes.txt")
	resp := post("/environments", ct, body)
	page := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, page)
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM environments WHERE name = 'edge-multi'"))

	// JSON: encoding/json would quietly turn these into U+FFFD or store a NUL.
	api := func(body string) *http.Response { return post("/api/v1/environments", "application/json", body) }
	for name, body := range map[string]string{
		"invalid UTF-8":    `{"name":"edge-` + "\xff" + `","tier":"development"}`,
		"invalid UTF-8 2":  `{"name":"edge-` + "\xc3\x28" + `","tier":"development"}`,
		"NUL escape":       `{"name":"edge-\u0000","tier":"development"}`,
		"control escape":   `{"name":"edge-\u0001","tier":"development"}`,
		"lone surrogate":   `{"name":"edge-\ud800","tier":"development"}`,
		"raw NUL":          "{\"name\":\"edge\",\"tier\":\"development\"}\x00",
		"NUL escape (key)": `{"name\u0000":"edge","tier":"development"}`,
	} {
		resp := api(body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, name)
		var problem struct{ Code, Detail string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&problem), name)
		resp.Body.Close()
		require.Equal(t, "BAD_REQUEST", problem.Code, name)
		require.Contains(t, problem.Detail, "JSON body contains characters Gantry does not accept", name)
	}
	// An escaped backslash before "u0000" is text, and a surrogate pair a character.
	resp = api(`{"name":"edge-json","tier":"development","grants":[],"x":"\\u0000 \ud83d\ude80 \t"}`)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.EqualValues(t, 0, countRows(t, app, "SELECT count(*) FROM environments WHERE name LIKE 'edge-%' AND name NOT IN ('edge-multi', 'edge-json')"))
}

func TestReturnToStaysOnSite(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	for returnTo, want := range map[string]string{
		"/ok/path?x=1":         "/ok/path?x=1",
		"/%09/evil.example":    "/",
		"/%2F/evil.example":    "/",
		"/%252F/evil.example":  "/",
		"//evil.example":       "/",
		"/\\evil.example":      "/",
		"/%5Cevil.example":     "/",
		"https://evil.example": "/",
		"evil.example":         "/",
	} {
		// A genuine sign-in through the provider, started with return_to.
		c := app.Client(t)
		action, id := app.StartLoginAt(t, c, "/login?return_to="+url.QueryEscape(returnTo))
		callback := app.SubmitCredentials(t, c, action, id, "admin@acme.test", "admin-acme")
		resp := app.Get(t, c, strings.TrimPrefix(callback.String(), app.URL))
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, returnTo)
		require.Equal(t, want, resp.Header.Get("Location"), returnTo)
	}
	// Raw control characters in return_to (the browser would drop them and land on
	// //evil.example) do not even start a sign-in.
	for _, raw := range []string{"/\t/evil.example", "/\r/evil.example", "/\n/evil.example"} {
		resp := app.Get(t, app.Client(t), "/login?return_to="+url.QueryEscape(raw))
		refusedByEdge(t, resp, fmt.Sprintf("return_to %q", raw))
		require.Empty(t, resp.Header.Get("Location"))
	}
}

func TestSafeReturn(t *testing.T) {
	t.Parallel()
	for to, want := range map[string]string{
		"":                        "/",
		"/":                       "/",
		"/ok/path?x=1":            "/ok/path?x=1",
		"/runs/run-abc/review":    "/runs/run-abc/review",
		"/caf%C3%A9":              "/caf%C3%A9",
		"/\t/evil.example":        "/",
		"/\r/evil.example":        "/",
		"/\n/evil.example":        "/",
		"/ok\x00":                 "/",
		"/ok\x7f":                 "/",
		"/\\evil.example":         "/",
		"/ok/\\evil":              "/",
		"/%09/evil.example":       "/",
		"/%00":                    "/",
		"/%ff":                    "/",
		"/%2F/evil.example":       "/",
		"/%2f/evil.example":       "/",
		"/%252F/evil.example":     "/",
		"/%5C/evil.example":       "/",
		"//evil.example":          "/",
		"///evil.example":         "/",
		"https://evil.example":    "/",
		"https:/evil.example":     "/",
		"/ok?next=https://x.test": "/ok?next=https://x.test",
		"evil.example":            "/",
		"/%zz":                    "/",
		"/%25252525252F":          "/",
	} {
		require.Equal(t, want, web.SafeReturn(to), "%q", to)
	}
}

func TestNoStoreBehindSignIn(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)

	for path, status := range map[string]int{
		"/":                            http.StatusOK, // a page
		"/runs/" + r.ID:                http.StatusOK,
		"/runs/" + r.ID + "/plan.json": http.StatusOK, // an artifact
		"/api/v1/environments":         http.StatusForbidden,
		"/environments/" + staging:     http.StatusForbidden, // an error page from inside
		"/workspaces/ws-missing":       http.StatusNotFound,
	} {
		resp := app.Get(t, operator, path)
		webtest.ReadBody(t, resp)
		require.Equal(t, status, resp.StatusCode, path)
		require.Equal(t, "no-store", resp.Header.Get("Cache-Control"), path)
	}
	// The live stream says no-cache itself; behind sign-in it is no-store all the same.
	resp := app.Get(t, operator, "/runs/"+r.ID+"/events")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	resp.Body.Close()
	admin := app.LoggedIn(t, "admin@acme.test")
	resp = app.Get(t, admin, "/api/v1/environments") // an API answer
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	// Signing in and out are behind the session too.
	resp = app.Get(t, app.Client(t), "/login")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))

	// Public, unpersonal answers keep their own caching.
	for _, path := range []string{"/static/" + static.CSS, "/healthz", "/workload/jwks"} {
		resp := app.Get(t, operator, path)
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.NotContains(t, resp.Header.Get("Cache-Control"), "no-store", path)
	}
}

var errorAction = regexp.MustCompile(`<a class="button" href="([^"]*)" data-testid="error-action">([^<]*)</a>`)

// requireSignedInErrorPage: the page names who is signed in, says what happened and
// leads back to back.
func requireSignedInErrorPage(t *testing.T, resp *http.Response, status int, message, back string) {
	t.Helper()
	body := webtest.ReadBody(t, resp)
	require.Equal(t, status, resp.StatusCode, body)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Contains(t, body, `data-testid="current-user">Adam (Acme Corp admin)`)
	require.Contains(t, body, `id="sign-out"`)
	require.NotContains(t, body, `id="sign-in-link"`)
	require.Contains(t, body, message)
	m := errorAction.FindStringSubmatch(body)
	require.NotNil(t, m, body)
	require.Equal(t, back, m[1])
	require.NotEqual(t, "Sign in", m[2])
}

func TestErrorPagesKnowTheSignedInPerson(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.LoggedIn(t, "admin@acme.test")
	token := app.CSRF(t, admin)
	huge := url.Values{"_csrf": {token}, "name": {strings.Repeat("a", 2_100_000)}, "tier": {"development"}}.Encode()
	postForm := func(body io.Reader, referer string, header ...string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, app.URL+"/environments", body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if referer != "" {
			req.Header.Set("Referer", referer)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return do(t, admin, req)
	}
	tooLarge := "larger than Gantry accepts (2 MB at most)"
	csrf := "missing its security token"

	// 413, told by Content-Length and (chunked) by reading.
	requireSignedInErrorPage(t, postForm(strings.NewReader(huge), app.URL+"/environments/new"), http.StatusRequestEntityTooLarge, tooLarge, "/environments/new")
	requireSignedInErrorPage(t, postForm(io.MultiReader(strings.NewReader(huge)), app.URL+"/environments/new?x=1"),
		http.StatusRequestEntityTooLarge, tooLarge, "/environments/new?x=1")
	// The CSRF refusal.
	requireSignedInErrorPage(t, postForm(strings.NewReader("name=x&tier=development"), app.URL+"/environments/new"), http.StatusForbidden, csrf, "/environments/new")
	// Without a Referer, or with another site's, the way back is the dashboard.
	requireSignedInErrorPage(t, postForm(strings.NewReader("name=x&tier=development"), ""), http.StatusForbidden, csrf, "/")
	requireSignedInErrorPage(t, postForm(strings.NewReader("name=x&tier=development"), "https://evil.example/environments/new"), http.StatusForbidden, csrf, "/")
	requireSignedInErrorPage(t, postForm(strings.NewReader(huge), app.URL+"//evil.example/x"), http.StatusRequestEntityTooLarge, tooLarge, "/")

	// JSON callers keep the problem document.
	resp := postForm(strings.NewReader(huge), "", "Accept", "application/json")
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	var problem struct{ Code, Detail string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&problem))
	resp.Body.Close()
	require.Equal(t, "PAYLOAD_TOO_LARGE", problem.Code)
	require.Contains(t, problem.Detail, tooLarge)
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM environments WHERE name = 'x' OR name LIKE 'aaaa%'"))
}

// TestMultiLineFieldsMatchTheTextareas: every textarea of every page keeps its line
// breaks at the edge (a textarea missing from the list would refuse what people type),
// and the list names nothing else (an input in it would accept control characters).
func TestMultiLineFieldsMatchTheTextareas(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../views/*.templ")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	textarea := regexp.MustCompile(`(?s)<textarea\b[^>]*?\bname="([a-z_]+)"`)
	found := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range textarea.FindAllStringSubmatch(string(src), -1) {
			found[m[1]] = true
		}
	}
	require.Equal(t, found, web.MultiLineFields)
}
