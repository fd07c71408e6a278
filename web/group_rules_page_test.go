package web_test

import (
	"cmp"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/idempotency"
)

// TestGroupRulesPage: owners add, preview and remove group rules on /members; bad input
// comes back beside its field with nothing stored; admins read the rules and are refused
// a change; a form without its CSRF token, a viewer, a removed rule and another
// organization's rule are refused.
func TestGroupRulesPage(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	owner := app.LoggedIn(t, "owner@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	viewer := app.LoggedIn(t, "viewer@acme.test")
	rules := func() int64 { return countRows(t, app, "SELECT count(*) FROM group_rules") }
	post := func(c *http.Client, path string, values url.Values) (int, string) {
		t.Helper()
		resp := app.PostForm(t, c, path, memberForm(t, app, c, values))
		return resp.StatusCode, webtest.ReadBody(t, resp)
	}

	for name, c := range map[string]struct {
		form  url.Values
		field string
		says  string
		path  string // the form's action; "": Add's
	}{
		"no group":        {url.Values{"group": {"  "}, "role": {"viewer"}}, "rule-group-error", "Name the group", ""},
		"too long":        {url.Values{"group": {strings.Repeat("g", 257)}, "role": {"viewer"}}, "rule-group-error", "at most 256 characters", ""},
		"owner":           {url.Values{"group": {"owners"}, "role": {"owner"}}, "rule-role-error", "invitation-only", ""},
		"an unknown role": {url.Values{"group": {"x"}, "role": {"root"}}, "rule-role-error", "Choose viewer, auditor, operator or admin", ""},
		"a preview's too": {url.Values{"group": {""}, "role": {"viewer"}}, "rule-group-error", "Name the group", "/members/rules/preview"},
	} {
		status, body := post(owner, cmp.Or(c.path, "/members/rules"), c.form)
		require.Equal(t, http.StatusUnprocessableEntity, status, name)
		require.Contains(t, body, `id="`+c.field+`"`, name)
		require.Contains(t, body, c.says, name)
		require.Zero(t, rules(), "%s: nothing stored", name)
	}

	// A NUL byte or another control character is refused at the edge (every form),
	// storing nothing.
	for _, group := range []string{"eng\x00ineers", "eng\tineers"} {
		status, _ := post(owner, "/members/rules", url.Values{"group": {group}, "role": {"viewer"}})
		require.Equal(t, http.StatusBadRequest, status, "%q", group)
		require.Zero(t, rules())
	}

	status, body := post(owner, "/members/rules/preview", url.Values{"group": {"acme-platform-leads"}, "role": {"operator"}})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `data-testid="rule-preview"`)
	require.Contains(t, body, `id="rule-group" name="group" value="acme-platform-leads" maxlength="256"`, "the form keeps what was typed, and says the limit")
	require.Contains(t, body, "admin@acme.test", "Adam's last sign-in carried the group")
	require.Zero(t, rules(), "a preview writes nothing")

	status, body = post(owner, "/members/rules", url.Values{"group": {" engineers "}, "role": {"operator"}, "cloud_live": {"on"}})
	require.Equal(t, http.StatusSeeOther, status, body)
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM group_rules WHERE group_name = 'engineers' AND role = 'operator' AND cloud_live"))
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM audit_events WHERE action = 'group_rule.added'"))
	status, body = post(owner, "/members/rules", url.Values{"group": {"engineers"}, "role": {"admin"}})
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, body, "This group already has a rule")

	page := webtest.ReadBody(t, app.Get(t, admin, "/members"))
	require.Contains(t, page, "engineers")
	require.Contains(t, page, "Owners add and remove group rules.")
	require.NotContains(t, page, `id="rule-group"`)
	status, _ = post(admin, "/members/rules", url.Values{"group": {"ops"}, "role": {"viewer"}})
	require.Equal(t, http.StatusForbidden, status, "an admin does not add rules")
	status, _ = post(viewer, "/members/rules", url.Values{"group": {"ops"}, "role": {"viewer"}})
	require.Equal(t, http.StatusForbidden, status)
	status, _ = post(viewer, "/members/rules/preview", url.Values{"group": {"acme-platform-leads"}, "role": {"viewer"}})
	require.Equal(t, http.StatusForbidden, status, "a viewer previews nothing: it would list the members")
	resp := app.PostForm(t, owner, "/members/rules", url.Values{"group": {"ops"}, "role": {"viewer"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no CSRF token")
	require.EqualValues(t, 1, rules())

	var id string
	require.NoError(t, app.DB.Raw("SELECT id FROM group_rules").Scan(&id).Error)
	status, _ = post(admin, "/members/rules/"+id+"/remove", url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusForbidden, status, "an admin does not remove rules")
	status, body = post(owner, "/members/rules/"+id+"/remove", url.Values{})
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "Yes, remove the rule", "asked first")
	require.EqualValues(t, 1, rules())
	status, _ = post(owner, "/members/rules/"+id+"/remove", url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Zero(t, rules())
	status, _ = post(owner, "/members/rules/"+id+"/remove", url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusNotFound, status, "a stale form names a rule that is gone")
}

// TestARulePreviewSpendsNoFormKey: Preview and Add are two buttons of one form, with one
// idempotency key. Previewing, even twice (the browser's Back), changes nothing and
// spends no key: Add with the same form then adds the rule, once; a repeat of that Add
// is answered as done, adding nothing.
func TestARulePreviewSpendsNoFormKey(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	owner := app.LoggedIn(t, "owner@acme.test")
	key := idempotency.NewKey()
	send := func(path string) (*http.Response, string) {
		t.Helper()
		form := memberForm(t, app, owner, url.Values{"group": {"engineers"}, "role": {"operator"}, idempotency.Field: {key}})
		resp := app.PostForm(t, owner, path, form)
		return resp, webtest.ReadBody(t, resp)
	}
	for range 2 {
		resp, body := send("/members/rules/preview")
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.Contains(t, body, `id="rule-preview"`)
	}
	resp, body := send("/members/rules")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/members#group-rules", resp.Header.Get("Location"))
	resp, body = send("/members/rules")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/members#group-rules", resp.Header.Get("Location"), "the repeat is answered as the first was")
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM group_rules WHERE group_name = 'engineers'"))
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM audit_events WHERE action = 'group_rule.added'"))
}
