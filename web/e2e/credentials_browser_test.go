//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

// TestStaticKeysFormInBrowser: an admin sets an environment's static keys on its edit
// page. A write key alone is refused on its field (a key's objects belong to no workspace,
// so plans need a read key to see them) with nothing stored and nothing echoed; both keys
// in one submission are stored and the page says since when, never what; removing the
// read key while the write key stays is refused on the read key's field.
func TestStaticKeysFormInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	b := startBrowser(t, chrome)
	signInAs(t, b, app, adminEmail, adminPassword, "Adam")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	const writeKey, readKey = "sbxk-browser-write-0123456789", "sbxk-browser-read-0123456789"
	edit := app.URL + "/environments/" + staging + "/edit"
	held := func() (write, read bool) {
		var row struct{ W, R bool }
		require.NoError(t, app.DB.Raw("SELECT cred_key_id IS NOT NULL AS w, read_cred_key_id IS NOT NULL AS r FROM environments WHERE id = ?", staging).Scan(&row).Error)
		return row.W, row.R
	}
	save := func(what string) {
		b.do(t, what, chromedp.Evaluate[chromedp.Void](`document.getElementById("save-environment").click()`))
	}

	// A write key alone.
	b.do(t, "open staging's edit page", chromedp.Navigate(edit), chromedp.WaitVisible(chromedp.ID("cloud_credential")))
	b.do(t, "type a write key only", chromedp.SendKeys(chromedp.ID("cloud_credential"), writeKey))
	save("save with a write key only")
	b.do(t, "wait for the write key's error", chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-cloud_credential"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="error-cloud_credential"]`)), "A write credential needs a read credential")
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="error-summary"]`)), "The environment was not saved")
	require.Equal(t, "true", attribute(t, b, chromedp.ID("cloud_credential"), "aria-invalid"))
	require.Equal(t, http.StatusUnprocessableEntity, b.events.lastDocumentStatus(app.URL+"/environments/"+staging), "documents: %v", b.events.documentList())
	require.Empty(t, value(t, b, chromedp.ID("cloud_credential")), "a key is never echoed back")
	html := run(t, b, "read the page", chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	require.NotContains(t, html, writeKey)
	w, r := held()
	require.False(t, w || r, "nothing was stored")
	screenshotAt(t, b, "/tmp/gantry-environment-keys-refused-1280.png", 1280, 1100, false)

	// Both keys at once.
	b.do(t, "type both keys",
		chromedp.SendKeys(chromedp.ID("cloud_credential"), writeKey),
		chromedp.SendKeys(chromedp.ID("cloud_read_credential"), readKey))
	save("save both keys")
	b.do(t, "wait for the success flash", chromedp.WaitVisible(chromedp.CSS(`.flashes .flash-success`)))
	w, r = held()
	require.True(t, w && r, "both keys stored")
	b.do(t, "open the edit page again", chromedp.Navigate(edit), chromedp.WaitVisible(chromedp.ID("cloud_read_credential_remove")))
	require.True(t, strings.HasPrefix(text(t, b, chromedp.CSS(`[data-testid="cloud-credential-status"]`)), "Applies use a static write credential since"))
	require.True(t, strings.HasPrefix(text(t, b, chromedp.CSS(`[data-testid="cloud-read-credential-status"]`)), "Plans and verifications use a static read credential since"))
	html = run(t, b, "read the page", chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	require.NotContains(t, html, writeKey)
	require.NotContains(t, html, readKey)
	screenshotAt(t, b, "/tmp/gantry-environment-keys-set-1280.png", 1280, 1100, false)

	// The read key cannot go while the write key stays.
	b.do(t, "tick the read key's removal", chromedp.Click(chromedp.ID("cloud_read_credential_remove"), chromedp.NodeVisible))
	save("save the removal")
	b.do(t, "wait for the read key's error", chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-cloud_read_credential"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="error-cloud_read_credential"]`)), "plans and verifications need this read credential")
	w, r = held()
	require.True(t, w && r, "both keys stay")
	requireNoCSPViolations(t, b)
}
