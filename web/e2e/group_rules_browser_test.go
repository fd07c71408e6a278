//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"os"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

// Artifacts for a human; not assertions.
const ruleShots = "/tmp/shots40/rules/"

// TestGroupRulesInBrowser: an owner maps a group to a role on /members — a refused rule
// comes back with the problem beside its field, a preview says whom the rule would reach
// from the members' last sign-ins — and the newcomer in that group is a member at their
// next sign-in, marked as the rule's; removing the rule, after a confirmation, ends that
// membership. An admin reads the rules without the form. Every state passes axe.
func TestGroupRulesInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	require.NoError(t, os.MkdirAll(ruleShots, 0o755))
	b := startBrowser(t, chrome)
	signInAs(t, b, app, ownerEmail, ownerPassword, ownerFirst)
	b.do(t, "open /members", chromedp.Navigate(app.URL+"/members#group-rules"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="no-group-rules"]`)))

	b.do(t, "add a rule without a group", chromedp.Click(chromedp.ID("add-rule"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="rule-error-summary"]`)))
	require.Contains(t, text(t, b, chromedp.ID("rule-group-error")), "Name the group as the provider sends it")
	require.Equal(t, "true", attribute(t, b, chromedp.ID("rule-group"), "aria-invalid"))
	require.Equal(t, 0, count(t, b, `#rule-role option[value="owner"]`), "no rule makes an owner")
	requireAccessible(t, b, "/members with a refused rule")

	// Adam's last sign-in carried acme-platform-leads: the preview names him, unchanged.
	b.do(t, "preview a rule for acme-platform-leads",
		chromedp.SendKeys(chromedp.ID("rule-group"), "acme-platform-leads"),
		chromedp.SetValue(chromedp.ID("rule-role"), "operator"),
		chromedp.Click(chromedp.ID("preview-rule"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="rule-preview"]`)))
	preview := text(t, b, chromedp.CSS(`[data-testid="rule-preview"]`))
	require.Contains(t, preview, "Adam")
	require.Contains(t, preview, "Unchanged: invited or set by a person")
	require.Equal(t, "acme-platform-leads", value(t, b, chromedp.ID("rule-group")), "the form keeps what was typed")
	require.Zero(t, countRule(t, app), "a preview writes nothing")
	requireAccessible(t, b, "/members with a rule's preview")
	b.do(t, "scroll to the preview", chromedp.ScrollIntoView(chromedp.ID("rule-preview")))
	screenshotAt(t, b, ruleShots+"preview-1280.png", 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	b.do(t, "add a rule for engineers",
		chromedp.Navigate(app.URL+"/members"), chromedp.WaitVisible(chromedp.ID("rule-group")),
		chromedp.SendKeys(chromedp.ID("rule-group"), "engineers"),
		chromedp.SetValue(chromedp.ID("rule-role"), "operator"),
		chromedp.Click(chromedp.ID("rule-cloud-live"), chromedp.NodeVisible),
		chromedp.Click(chromedp.ID("add-rule"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="group-rule"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`.flashes`)), "Group rule added")
	rule := text(t, b, chromedp.CSS(`[data-testid="group-rule"]`))
	require.Contains(t, rule, "engineers")
	require.Contains(t, rule, "operator")
	require.Contains(t, rule, "granted")

	// The newcomer signs in with the group: a member, marked as the rule's.
	require.NoError(t, app.IDP.SetGroups("newcomer", []string{"engineers"}))
	resp := app.LoginAs(t, app.Client(t), webtest.NewcomerEmail, webtest.NewcomerPassword)
	require.Equal(t, 200, resp.StatusCode, webtest.ReadBody(t, resp))
	b.do(t, "open /members again", chromedp.Navigate(app.URL+"/members"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="from-rule"]`)))
	nora := run(t, b, "find Nora's row", chromedp.Evaluate[string](
		`[...document.querySelectorAll('[data-testid="member"]')].find(r => r.textContent.includes('Nora')).textContent`))
	require.Contains(t, nora, "from a group rule")
	require.Contains(t, nora, "groups: engineers")
	requireAccessible(t, b, "/members with a rule and its member")
	b.do(t, "scroll to the rules", chromedp.ScrollIntoView(chromedp.ID("group-rules")))
	screenshotAt(t, b, ruleShots+"rules-1280.png", 1280, 1000, false)
	screenshotAt(t, b, ruleShots+"rules-390.png", 390, 844, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// An admin reads the rules; the form is the owners'.
	admin := startBrowser(t, chrome)
	signInAs(t, admin, app, adminEmail, adminPassword, "Adam")
	admin.do(t, "open /members as an admin", chromedp.Navigate(app.URL+"/members"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="group-rule"]`)))
	require.Zero(t, count(t, admin, `#rule-group`), "no rule form for an admin")
	require.Zero(t, count(t, admin, `[data-testid="group-rule"] button`), "no remove button for an admin")
	require.Contains(t, text(t, admin, chromedp.CSS(`[data-testid="group-rules"]`)), "Owners add and remove group rules.")

	b.do(t, "remove the rule", chromedp.Click(chromedp.CSS(`[data-testid="group-rule"] button`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("confirm-remove-rule")))
	require.Contains(t, text(t, b, chromedp.CSS(`main`)), "The members this rule made lose what it gave at once")
	requireAccessible(t, b, "the rule removal's confirmation")
	screenshotAt(t, b, ruleShots+"confirm-remove-1280.png", 1280, 600, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	b.do(t, "confirm", chromedp.Click(chromedp.ID("confirm-remove-rule"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="no-group-rules"]`)))
	require.NotContains(t, text(t, b, chromedp.CSS(`[data-testid="members"]`)), "Nora", "the rule's membership ended with it")

	// The audit history tells it in words.
	b.do(t, "open the audit history", chromedp.Navigate(app.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS(`main`)))
	history := text(t, b, chromedp.CSS(`main`))
	for _, says := range []string{"added a group rule for engineers giving operator", "added member Nora Newcomer as operator by a group rule (groups engineers)",
		"removed the group rule for engineers", "ended the membership of member Nora Newcomer by the group rules: no group rule maps their groups any more"} {
		require.Contains(t, history, says)
	}
	screenshotAt(t, b, ruleShots+"audit-1280.png", 1280, 800, false)
}

func countRule(t *testing.T, app *webtest.App) int64 {
	t.Helper()
	var n int64
	require.NoError(t, app.DB.Raw("SELECT count(*) FROM group_rules").Scan(&n).Error)
	return n
}
