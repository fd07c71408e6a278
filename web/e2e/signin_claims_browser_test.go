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

// TestSignInClaimsInBrowser: with a provider that serves the profile only from UserInfo,
// a person invited nowhere sees which address the provider asserted and that it counted
// as verified; an admin sees on /members what the provider asserted at each person's
// last sign-in and where each claim came from. Both pages pass axe.
func TestSignInClaimsInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.StartWith(t, webtest.Options{ClaimsOnlyFromUserInfo: true})
	require.NoError(t, os.MkdirAll("/tmp/shots40/claims", 0o755))

	nobody := startBrowser(t, chrome)
	nobody.do(t, "open Gantry", chromedp.Navigate(app.URL+"/"))
	nobody.do(t, "sign in as the newcomer",
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), webtest.NewcomerEmail),
		chromedp.SendKeys(chromedp.ID("password"), webtest.NewcomerPassword),
		chromedp.Click(chromedp.ID("sign-in"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="sign-in-claims"]`)))
	main := text(t, nobody, chromedp.CSS(`main`))
	require.Contains(t, main, "You are not a member of any organization")
	require.Contains(t, main, webtest.NewcomerEmail+" (from the UserInfo endpoint)")
	require.Contains(t, text(t, nobody, chromedp.CSS(`[data-testid="address-verified"]`)), "counted as verified")
	requireAccessible(t, nobody, "the not-a-member page")
	screenshotAt(t, nobody, "/tmp/shots40/claims/not-a-member.png", 1280, 800, false)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, adminEmail, adminPassword, "Adam")
	b.do(t, "open /members", chromedp.Navigate(app.URL+"/members"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="members-sign-in-claims"]`)))
	adamID := run(t, b, "find Adam's row", chromedp.Evaluate[string](
		`[...document.querySelectorAll('[data-testid="member-claims"]')].find(d => d.querySelector('summary').textContent.includes('Adam')).dataset.user`))
	adam := `[data-testid="member-claims"][data-user="` + adamID + `"][open] [data-testid="sign-in-claims"]`
	b.do(t, "open Adam's last sign-in",
		chromedp.Click(chromedp.CSS(`[data-testid="member-claims"][data-user="`+adamID+`"] summary`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(adam)))
	claims := text(t, b, chromedp.CSS(adam))
	require.Contains(t, claims, adminEmail+" (from the UserInfo endpoint)")
	require.Contains(t, claims, "verified: the provider said email_verified true (in the UserInfo endpoint)")
	requireAccessible(t, b, "/members with a sign-in's claims open")
	b.do(t, "scroll to the claims", chromedp.ScrollIntoView(chromedp.CSS(`#last-sign-in`)))
	screenshotAt(t, b, "/tmp/shots40/claims/members-claims.png", 1280, 1000, false)
}
