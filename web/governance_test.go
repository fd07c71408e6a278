package web_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
)

// TestGovernanceReportFromLiveConfiguration: the report says "unenforced-unknown" for
// the approval gate of an environment that requires no approval, "enforced" where one
// does, lists a static credential as a finding once one is set, and is the auditor's
// (the viewer gets 403); the Markdown download says the same.
func TestGovernanceReportFromLiveConfiguration(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	auditor := app.LoggedIn(t, "auditor@acme.test")
	approvalGate := func(page, env string) string {
		t.Helper()
		section := regexp.MustCompile(`(?s)data-testid="governance-env-` + env + `">.*?</section>`).FindString(page)
		require.NotEmpty(t, section, "no section for %s", env)
		m := regexp.MustCompile(`(?s)data-testid="gate-Approval">.*?data-status="([a-z-]+)"`).FindStringSubmatch(section)
		require.NotNil(t, m, section)
		return m[1]
	}
	resp := app.Get(t, auditor, "/governance")
	page := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Equal(t, "unenforced-unknown", approvalGate(page, "development"))
	require.Equal(t, "enforced", approvalGate(page, "production"))
	// The manual change path from its configuration and record: no window yet, and each
	// environment's drift schedule (off in development: nothing checks there).
	require.Contains(t, page, "Last 90 days: 0 break-glass windows")
	require.Contains(t, page, "development: off (no scheduled drift check: unenforced-unknown between runs)")
	require.Contains(t, page, "production: every 60 minutes")
	require.NotContains(t, page, `data-testid="findings"`)

	staging := app.OrgEnvironmentID(t, "acme", "staging")
	admin := authz.WithSubject(context.Background(), authz.Subject{UserID: "usr-admin", Name: "Adam", OrganizationID: app.Orgs["acme"], Role: authz.RoleAdmin})
	require.NoError(t, app.System.Credentials.SetStaticReadCredential(admin, staging, "AKIA-static-read-value"))
	page = webtest.ReadBody(t, app.Get(t, auditor, "/governance"))
	require.Contains(t, page, "a static read credential (used by plans and verifications) has been set on this environment since")
	require.Contains(t, page, "applies: workload identity", "without a write key applies use workload tokens")
	require.NotContains(t, page, "AKIA-static-read-value", "the finding never shows the secret")
	require.NoError(t, app.System.Credentials.SetStaticCredential(admin, staging, "AKIA-static-secret-value"))
	page = webtest.ReadBody(t, app.Get(t, auditor, "/governance"))
	require.Contains(t, page, "standing credential: a static write credential (used by applies) has been set on this environment since")
	require.NotContains(t, page, "AKIA-static-secret-value", "the finding never shows the secret")
	require.Contains(t, page, "a static read credential (used by plans and verifications) has been set on this environment since",
		"the one finding names both keys")
	require.Equal(t, 1, strings.Count(page, "standing credential: a static write credential"))
	require.NotContains(t, page, "AKIA-static-read-value", "the finding never shows the secret")

	resp = app.Get(t, auditor, "/governance.md")
	md := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Disposition"), "gantry-governance.md")
	require.True(t, strings.HasPrefix(md, "# Governance report: "+app.Orgs["acme"]))
	require.Regexp(t, `\| Approval \| [^|]+ \| unenforced-unknown \|`, md)
	require.Contains(t, md, "**Finding:** standing credential")

	viewer := app.LoggedIn(t, "viewer@acme.test")
	resp = app.Get(t, viewer, "/governance")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}
