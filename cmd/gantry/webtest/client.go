package webtest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/demo"
)

// The browser-like clients tests drive the application with: signing in through the
// provider, reading the CSRF token, getting and posting pages.

// Client is a browser-like HTTP client: it keeps cookies and does not follow
// redirects, so tests see every hop.
func (a *App) Client(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{
		Jar:           jar,
		Timeout:       15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Follow performs req and follows redirects until a non-redirect answer, or until
// stop says to stop at a redirect target (returned unfollowed).
func Follow(t testing.TB, c *http.Client, req *http.Request, stop func(*url.URL) bool) *http.Response {
	t.Helper()
	for hops := 0; hops < 15; hops++ {
		resp, err := c.Do(req)
		require.NoError(t, err)
		if resp.StatusCode < 300 || resp.StatusCode > 399 {
			return resp
		}
		loc, err := resp.Location()
		require.NoError(t, err)
		if stop != nil && stop(loc) {
			return resp
		}
		resp.Body.Close()
		req, err = http.NewRequest(http.MethodGet, loc.String(), nil)
		require.NoError(t, err)
	}
	t.Fatal("too many redirects")
	return nil
}

var hiddenID = regexp.MustCompile(`name="id" value="([^"]+)"`)
var formAction = regexp.MustCompile(`<form method="post" action="([^"]+)"`)

// StartLogin goes from Gantry's /login to the provider's login page and returns the
// page's form action and auth request id.
func (a *App) StartLogin(t testing.TB, c *http.Client) (action, authRequestID string) {
	t.Helper()
	return a.StartLoginAt(t, c, "/login")
}

// StartLoginAt is StartLogin from loginPath, a /login address with its query (such as
// return_to).
func (a *App) StartLoginAt(t testing.TB, c *http.Client, loginPath string) (action, authRequestID string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, a.URL+loginPath, nil)
	resp := Follow(t, c, req, nil)
	body := ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	m := hiddenID.FindStringSubmatch(body)
	require.NotNil(t, m, "login page has no auth request id: %s", body)
	f := formAction.FindStringSubmatch(body)
	require.NotNil(t, f, "login page has no form")
	action = strings.ReplaceAll(f[1], "&amp;", "&")
	if strings.HasPrefix(action, "/") {
		action = a.Issuer + action
	}
	return action, m[1]
}

// SubmitCredentials posts the provider's login form and returns the redirect back to
// Gantry's callback, unfollowed.
func (a *App) SubmitCredentials(t testing.TB, c *http.Client, action, authRequestID, username, password string) *url.URL {
	t.Helper()
	form := url.Values{"id": {authRequestID}, "username": {username}, "password": {password}}
	req, _ := http.NewRequest(http.MethodPost, action, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp := Follow(t, c, req, func(u *url.URL) bool { return strings.HasPrefix(u.String(), a.URL+"/auth/callback") })
	defer resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode, "provider did not redirect back to the callback")
	loc, err := resp.Location()
	require.NoError(t, err)
	return loc
}

// Login signs c in as the demo user with email, through the real OIDC flow.
func (a *App) Login(t testing.TB, c *http.Client, email string) {
	t.Helper()
	u, ok := demo.Find(email)
	require.True(t, ok, "no demo user %s", email)
	resp := a.LoginAs(t, c, u.Email, u.Password)
	body := ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `data-testid="current-user"`, "not signed in after the callback")
}

// LoginAs runs the OIDC flow with any credentials and returns the final answer.
func (a *App) LoginAs(t testing.TB, c *http.Client, username, password string) *http.Response {
	t.Helper()
	action, id := a.StartLogin(t, c)
	callback := a.SubmitCredentials(t, c, action, id, username, password)
	req, _ := http.NewRequest(http.MethodGet, callback.String(), nil)
	return Follow(t, c, req, nil)
}

// LoggedIn returns a new client signed in as email.
func (a *App) LoggedIn(t testing.TB, email string) *http.Client {
	t.Helper()
	c := a.Client(t)
	a.Login(t, c, email)
	return c
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]*)"`)

// CSRF fetches the home page with c and returns the session's CSRF token.
func (a *App) CSRF(t testing.TB, c *http.Client) string {
	t.Helper()
	resp := a.Get(t, c, "/")
	body := ReadBody(t, resp)
	m := csrfField.FindStringSubmatch(body)
	require.NotNil(t, m, "no CSRF field on the home page")
	return m[1]
}

// Get requests path with c.
func (a *App) Get(t testing.TB, c *http.Client, path string) *http.Response {
	t.Helper()
	resp, err := c.Get(a.URL + path)
	require.NoError(t, err)
	return resp
}

// PostForm posts form to path with c, with a fresh idempotency key as a browser sends it
// (every Gantry form carries one; a test leaves it out by setting the field to "").
func (a *App) PostForm(t testing.TB, c *http.Client, path string, form url.Values) *http.Response {
	t.Helper()
	resp, err := a.TryPostForm(c, path, form)
	require.NoError(t, err)
	return resp
}

// ReadBody reads and closes resp's body.
func ReadBody(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// OrgEnvironmentID returns the id of the environment named name in organization slug.
func (a *App) OrgEnvironmentID(t testing.TB, slug, name string) string {
	t.Helper()
	var id string
	err := a.DB.Raw("SELECT id FROM environments WHERE organization_id = ? AND name = ?", a.Orgs[slug], name).Scan(&id).Error
	require.NoError(t, err)
	require.NotEmpty(t, id, fmt.Sprintf("no environment %s in %s", name, slug))
	return id
}
