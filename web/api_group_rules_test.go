package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/errs"
)

type apiGroupRuleDoc struct {
	ID        string `json:"id"`
	Group     string `json:"group"`
	Role      string `json:"role"`
	CloudLive bool   `json:"cloud_live"`
	CreatedBy string `json:"created_by"`
}

type apiPreviewRowDoc struct {
	UserID string `json:"user_id"`
	Name   string `json:"name"`
	Role   string `json:"role"`
	Source string `json:"source"`
	Effect string `json:"effect"`
}

// listRules is the group rules token reads through the API.
func listRules(c *apiChecker, token string) []apiGroupRuleDoc {
	c.t.Helper()
	status, body := c.call(token, http.MethodGet, "/api/v1/group-rules", nil)
	require.Equal(c.t, http.StatusOK, status, body)
	return decodeJSON[struct {
		Rules []apiGroupRuleDoc `json:"rules"`
	}](c.t, body).Rules
}

// previewRows is whom a rule for group would reach, read through the API.
func previewRows(c *apiChecker, token, group, role string) map[string]apiPreviewRowDoc {
	c.t.Helper()
	status, body := c.call(token, http.MethodPost, "/api/v1/group-rules/preview", map[string]any{"group": group, "role": role})
	require.Equal(c.t, http.StatusOK, status, body)
	rows := map[string]apiPreviewRowDoc{}
	for _, r := range decodeJSON[struct {
		Rows []apiPreviewRowDoc `json:"rows"`
	}](c.t, body).Rows {
		rows[r.Name] = r
	}
	return rows
}

// TestGroupRulesThroughTheAPI: an owner's admin token adds, lists, previews and
// removes group rules, each change audited; an admin reads and previews but may not
// change them; an owner role and a group that already has a rule are 422s on their
// fields; another organization's token sees none of them and gets a 404 for one's id;
// a read token changes nothing. Every call and answer is checked against the OpenAPI
// description.
func TestGroupRulesThroughTheAPI(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := newAPIChecker(t, app)
	owner := app.NewMember(t, "acme", "Rita Owner", authz.RoleOwner, false)
	ownerToken := app.Token(t, owner, "admin")
	adminToken := app.Token(t, app.NewMember(t, "acme", "Andy Admin", authz.RoleAdmin, false), "admin")
	readToken := app.Token(t, owner, "read")
	globexToken := app.Token(t, app.NewMember(t, "globex", "Gus Owner", authz.RoleOwner, false), "admin")
	rules := func() int64 {
		return countRows(t, app, "SELECT count(*) FROM group_rules WHERE organization_id = ?", app.Orgs["acme"])
	}

	// An invited member whose last sign-in carried engineers, and a newcomer whom the
	// engineers rule admits as operator.
	app.NewMember(t, "acme", "Ivy Invited", authz.RoleViewer, false, "engineers", "other")
	status, body := c.call(ownerToken, http.MethodPost, "/api/v1/group-rules", map[string]any{"group": " engineers ", "role": "operator"})
	require.Equal(t, http.StatusCreated, status, body)
	added := decodeJSON[apiGroupRuleDoc](t, body)
	require.Equal(t, apiGroupRuleDoc{ID: added.ID, Group: "engineers", Role: "operator", CreatedBy: owner.UserID}, added, "trimmed")
	require.Equal(t, "engineers", ruleAudit(t, app, "group_rule.added", added.ID)["group"])
	status, body = signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword, "engineers")
	require.Equal(t, http.StatusOK, status, body)
	newcomer := membershipOf(t, app, app.Orgs["acme"], "newcomer")
	require.NotNil(t, newcomer, "the rule admitted the newcomer")

	status, body = c.call(ownerToken, http.MethodPost, "/api/v1/group-rules", map[string]any{"group": "/platform/approvers", "role": "admin", "cloud_live": true})
	require.Equal(t, http.StatusCreated, status, body)
	second := decodeJSON[apiGroupRuleDoc](t, body)
	require.True(t, second.CloudLive)

	for _, token := range []string{ownerToken, adminToken} {
		got := listRules(c, token)
		require.Len(t, got, 2)
		require.Equal(t, []string{"/platform/approvers", "engineers"}, []string{got[0].Group, got[1].Group}, "by group")
	}

	// The preview of engineers as admin: the invited member stays as they are, the
	// newcomer the rule made would become admin. It writes nothing.
	before := countRows(t, app, "SELECT count(*) FROM audit_events")
	for _, token := range []string{ownerToken, adminToken} {
		rows := previewRows(c, token, "engineers", "admin")
		require.Len(t, rows, 2, "%v", rows)
		invited := rows["Ivy Invited"]
		require.Equal(t, "viewer", invited.Role)
		require.Equal(t, "direct", invited.Source)
		require.Contains(t, invited.Effect, "Unchanged")
		made := rows["Nora Newcomer"]
		require.Equal(t, newcomer.UserID, made.UserID)
		require.Equal(t, "rule", made.Source)
		require.Equal(t, "operator", made.Role)
		require.Equal(t, "Becomes admin.", made.Effect)
	}
	require.Empty(t, previewRows(c, ownerToken, "nobody-is-here", "viewer"))
	require.Equal(t, before, countRows(t, app, "SELECT count(*) FROM audit_events"), "a preview writes nothing")
	require.Equal(t, authz.RoleOperator, membershipOf(t, app, app.Orgs["acme"], "newcomer").Role, "a preview changes no one")

	// Refusals, each storing nothing.
	c.refused(adminToken, http.MethodPost, "/api/v1/group-rules", map[string]any{"group": "ops", "role": "viewer"}, http.StatusForbidden, "FORBIDDEN",
		"an admin may not add a rule")
	c.refused(readToken, http.MethodPost, "/api/v1/group-rules", map[string]any{"group": "ops", "role": "viewer"}, http.StatusForbidden, "FORBIDDEN",
		"a read token may not add a rule")
	c.refused(readToken, http.MethodGet, "/api/v1/group-rules", nil, http.StatusForbidden, "FORBIDDEN", "reading rules needs members.manage: the admin scope")
	p := c.refused(ownerToken, http.MethodPost, "/api/v1/group-rules", map[string]any{"group": "owners", "role": "owner"},
		http.StatusUnprocessableEntity, string(errs.CodeInvalidInput), "no rule makes an owner")
	require.Contains(t, p.Fields["role"], "invitation-only")
	p = c.refused(ownerToken, http.MethodPost, "/api/v1/group-rules", map[string]any{"group": "engineers", "role": "viewer"},
		http.StatusUnprocessableEntity, string(errs.CodeInvalidInput), "engineers has a rule")
	require.Contains(t, p.Fields["group"], "already has a rule")
	p = c.refused(ownerToken, http.MethodPost, "/api/v1/group-rules", map[string]any{"group": strings.Repeat("g", 300), "role": "viewer"},
		http.StatusUnprocessableEntity, string(errs.CodeInvalidInput), "a 300-character group")
	require.Contains(t, p.Fields["group"], "at most 256")
	p = c.refused(ownerToken, http.MethodPost, "/api/v1/group-rules/preview", map[string]any{"group": "owners", "role": "owner"},
		http.StatusUnprocessableEntity, string(errs.CodeInvalidInput), "no preview of an owner rule either")
	require.Contains(t, p.Fields["role"], "invitation-only")
	for _, raw := range []string{`{"group": "ops", "role": "viewer"`, `{"group": "ops", "role": "viewer", "extra": 1}`, `{"group": "ops\u0000", "role": "viewer"}`,
		"{\"group\": \"o\x00ps\", \"role\": \"viewer\"}", `["ops"]`} {
		resp := app.API(t, ownerToken, http.MethodPost, "/api/v1/group-rules", raw)
		text := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%q: %s", raw, text)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), "%q: %s", raw, text)
		require.Contains(t, text, `"code":"BAD_REQUEST"`, raw)
	}
	require.EqualValues(t, 2, rules(), "no refused call stored a rule")

	// Another organization sees none of acme's rules and cannot name one.
	require.Empty(t, listRules(c, globexToken))
	c.refused(globexToken, http.MethodDelete, "/api/v1/group-rules/"+added.ID, nil, http.StatusNotFound, "NOT_FOUND", "acme's rule is no rule of globex")
	c.refused(adminToken, http.MethodDelete, "/api/v1/group-rules/"+added.ID, nil, http.StatusForbidden, "FORBIDDEN", "an admin may not remove a rule")
	c.refused(ownerToken, http.MethodDelete, "/api/v1/group-rules/grp-made-up", nil, http.StatusNotFound, "NOT_FOUND", "no such rule")
	require.EqualValues(t, 2, rules())

	// The owner removes the engineers rule: audited, and the newcomer it made is no
	// member any more.
	status, body = c.call(ownerToken, http.MethodDelete, "/api/v1/group-rules/"+added.ID, nil)
	require.Equal(t, http.StatusNoContent, status, body)
	require.Equal(t, "engineers", ruleAudit(t, app, "group_rule.removed", added.ID)["group"])
	require.Nil(t, membershipOf(t, app, app.Orgs["acme"], "newcomer"), "removing the rule ended what it made")
	got := listRules(c, ownerToken)
	require.Len(t, got, 1)
	require.Equal(t, second.ID, got[0].ID)
}

// TestPreviewReachesThroughTheDirectory: the preview of a rule for a SCIM group names
// the member the directory puts in it (linked by externalId, at their verified
// address), though no sign-in of theirs claimed it, with what the rules would make of
// them; and the directory user in it who is no member yet, as a newcomer. A member in
// neither the group's claims nor the directory's group is not listed.
func TestPreviewReachesThroughTheDirectory(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := newAPIChecker(t, app)
	ownerToken := app.Token(t, app.NewMember(t, "acme", "Rita Owner", authz.RoleOwner, false), "admin")
	addRule(t, app, "acme", "engineers", authz.RoleOperator, false)
	status, body := signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword, "engineers")
	require.Equal(t, http.StatusOK, status, body)
	app.NewMember(t, "acme", "Olaf Outsider", authz.RoleViewer, false, "other")

	token := scimToken(t, app, "acme")
	directoryGroup(t, app, token, "Platform approvers", `"externalId":"newcomer","userName":"newcomer@example.test"`,
		`"externalId":"not-yet","userName":"gina@acme.test"`)

	rows := previewRows(c, ownerToken, "Platform approvers", "admin")
	require.Len(t, rows, 2, "%v", rows)
	nora := rows["Nora Newcomer"]
	require.Equal(t, "rule", nora.Source)
	require.Equal(t, "operator", nora.Role)
	require.Equal(t, "Becomes admin.", nora.Effect, "the directory's group, with engineers from the sign-in")
	gina := rows["gina@acme.test"]
	require.Empty(t, gina.UserID)
	require.True(t, strings.HasPrefix(gina.Effect, "Joins as admin at their next sign-in"), gina.Effect)
}
