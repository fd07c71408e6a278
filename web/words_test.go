package web_test

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

// TestPagesSayCodesInWords: the pages a person reads say permissions, entitlements
// and input patterns in words and point at nothing the person does not have; the API
// keeps the codes and the pattern.
func TestPagesSayCodesInWords(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator, admin, owner := app.LoggedIn(t, "operator@acme.test"), app.LoggedIn(t, "admin@acme.test"), app.LoggedIn(t, "owner@acme.test")
	viewer := app.LoggedIn(t, "viewer@acme.test")
	page := func(c *http.Client, path string) string {
		t.Helper()
		resp := app.Get(t, c, path)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		return html.UnescapeString(body)
	}
	codes := []string{"provisioning.", "cloud.live", "runs.apply", "docs/", "DESIGN", "§"}
	notIn := func(body, where string) {
		t.Helper()
		for _, code := range codes {
			require.NotContains(t, body, code, where)
		}
	}

	// The template page says each pattern in words, never the pattern.
	bucket := page(operator, "/catalog/bucket")
	require.Contains(t, bucket, "lower-case letters, digits and hyphens; 3 to 41 characters; starting with a lower-case letter")
	require.NotContains(t, bucket, "^[a-z]")
	require.NotContains(t, bucket, "matches ")
	// Whether a promotion keeps an input, in words, not the manifest's divergence kind.
	require.Contains(t, bucket, `<small class="muted" data-testid="divergence">the same in every environment</small>`)
	require.Contains(t, bucket, `<small class="muted" data-testid="divergence">may differ between environments (retention)</small>`)
	require.NotContains(t, bucket, "divergence:")
	postgres := page(operator, "/catalog/postgres")
	require.Contains(t, postgres, `digits, dots and slashes; 11 to 13 characters; starting with "10."`)
	require.NotContains(t, postgres, `0/16$`)

	members := page(owner, "/members")
	require.Contains(t, members, `<th scope="col">Live cloud</th>`)
	notIn(members, "members page")

	policies := page(admin, "/policies")
	require.Contains(t, policies, `data-testid="policy-input"`, "the policy input is described on the page")
	notIn(policies, "policies page")

	edit := page(admin, "/environments/"+app.OrgEnvironmentID(t, "acme", "staging")+"/edit")
	require.Contains(t, edit, "they still need a role that decides runs: operator, admin or owner")
	notIn(edit, "environment edit page")

	// A refusal says who may, not which permission code they hold.
	r := waitingIn(t, app, operator, "words-refusal")
	resp := app.PostForm(t, viewer, "/runs/"+r.ID+"/approve", decisionForm(t, app, viewer, r))
	refusal := html.UnescapeString(webtest.ReadBody(t, resp))
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, refusal, "Your role (viewer) does not decide on runs: operators, admins and owners do.")
	notIn(refusal, "refusal")
	review := page(admin, "/runs/"+r.ID)
	require.Contains(t, review, "an operator, admin or owner, not the requester")
	notIn(review, "run page")

	// The API keeps the pattern for programs.
	reader := app.Token(t, app.NewMember(t, "acme", "Rita Reader", "viewer", false), "read")
	resp = app.API(t, reader, http.MethodGet, "/api/v1/templates/bucket", "")
	api := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, api)
	require.True(t, strings.Contains(api, `"pattern":"^[a-z][a-z0-9-]{2,40}$"`), api)
}
