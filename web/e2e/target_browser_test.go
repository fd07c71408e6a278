//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

// targetShots is where this test's screenshots go.
const targetShots = "/tmp/targetShots/ui"

// TestEnvironmentTargetInBrowser: an admin points the staging environment at a
// Kubernetes cluster on its edit page. Choosing the kind shows that kind's settings only
// (the others stay in the form, hidden by the stylesheet); a URL without https comes
// back with the message beside the field, focus on it and the CA still pasted in;
// fixed, it saves, and the environment list, the edit page and the governance report
// show the target, who a read and a write phase is there, and "federated".
func TestEnvironmentTargetInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	require.NoError(t, os.MkdirAll(targetShots, 0o755))
	ca := browserCA(t)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	org := app.Orgs["acme"]
	b := startBrowser(t, chrome)
	signInAs(t, b, app, adminEmail, adminPassword, "Adam")
	edit := app.URL + "/environments/" + staging + "/edit"
	shown := func(id string) bool {
		return run(t, b, "is "+id+" shown", chromedp.Evaluate[bool](`getComputedStyle(document.getElementById("`+id+`")).display !== "none"`))
	}

	b.do(t, "open staging's edit page", chromedp.Navigate(edit), chromedp.WaitVisible(chromedp.ID("target_kind_sandbox")))
	require.True(t, run(t, b, "is sandbox chosen", chromedp.Evaluate[bool](`document.getElementById("target_kind_sandbox").checked`)))
	require.Equal(t, "Sandbox cloud", text(t, b, chromedp.CSS(`[data-testid="target-summary"] [data-testid="target-kind"]`)))
	require.True(t, shown("target-sandbox"))
	require.False(t, shown("target-kubernetes"), "only the chosen kind's settings show")
	b.do(t, "choose Google Cloud", chromedp.Click(chromedp.ID("target_kind_gcp"), chromedp.NodeVisible), chromedp.WaitVisible(chromedp.ID("target_gcp_provider")))
	require.Contains(t, text(t, b, chromedp.CSS(`#target-gcp [data-testid="not-exercised"]`)), "Not exercised against the real cloud here")
	b.do(t, "choose Kubernetes", chromedp.Click(chromedp.ID("target_kind_kubernetes"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("target_kubernetes_server")))
	require.False(t, shown("target-gcp"))
	require.False(t, shown("target-aws"))
	require.Contains(t, text(t, b, chromedp.ID("target-kubernetes")), "JWT authenticator")

	// A URL without https.
	b.do(t, "type a bad URL and paste the CA",
		chromedp.SendKeys(chromedp.ID("target_kubernetes_server"), "k8s.example.com:6443"),
		chromedp.SetValue(chromedp.ID("target_kubernetes_ca"), ca),
		chromedp.SendKeys(chromedp.ID("target_audience"), "kube.gantry"))
	screenshotAt(t, b, targetShots+"/target-kubernetes-typed-1280.png", 1280, 900, false)
	b.do(t, "save", chromedp.Evaluate[chromedp.Void](`document.getElementById("save-environment").click()`))
	b.do(t, "wait for the URL's error", chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-target_kubernetes_server"]`)))
	require.Equal(t, http.StatusUnprocessableEntity, b.events.lastDocumentStatus(app.URL+"/environments/"+staging), "documents: %v", b.events.documentList())
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="error-target_kubernetes_server"]`)), "An https URL without credentials or query")
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="error-summary"]`)), "The environment was not saved")
	require.Equal(t, "true", attribute(t, b, chromedp.ID("target_kubernetes_server"), "aria-invalid"))
	require.Equal(t, "target_kubernetes_server", run(t, b, "read the focus", chromedp.Evaluate[string](`document.activeElement.id`)))
	require.Equal(t, "k8s.example.com:6443", value(t, b, chromedp.ID("target_kubernetes_server")))
	require.Equal(t, "kube.gantry", value(t, b, chromedp.ID("target_audience")))
	require.Equal(t, strings.TrimSpace(ca), strings.TrimSpace(value(t, b, chromedp.ID("target_kubernetes_ca"))), "the CA is kept")
	require.True(t, shown("target-kubernetes"))
	require.False(t, shown("target-aws"))
	var stored string
	require.NoError(t, app.DB.Raw("SELECT target::text FROM environments WHERE id = ?", staging).Scan(&stored).Error)
	require.JSONEq(t, `{"kind":"sandbox"}`, stored, "nothing stored")
	screenshotAt(t, b, targetShots+"/target-kubernetes-refused-1280.png", 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// Fixed.
	b.do(t, "fix the URL", chromedp.SetValue(chromedp.ID("target_kubernetes_server"), "https://k8s.example.com:6443"))
	b.do(t, "save again", chromedp.Evaluate[chromedp.Void](`document.getElementById("save-environment").click()`))
	b.do(t, "wait for the success flash", chromedp.WaitVisible(chromedp.CSS(`.flashes .flash-success`)))
	row := `[data-testid="environment-staging"] `
	require.Equal(t, "Kubernetes", text(t, b, chromedp.CSS(row+`[data-testid="target-kind"]`)))
	require.Equal(t, "https://k8s.example.com:6443", text(t, b, chromedp.CSS(row+`[data-testid="target-where"]`)))
	require.Equal(t, "kube.gantry", text(t, b, chromedp.CSS(row+`[data-testid="target-audience"]`)))
	require.Equal(t, "federated", text(t, b, chromedp.CSS(row+`[data-testid="target-credentials"]`)))
	screenshotAt(t, b, targetShots+"/environments-list-1280.png", 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	b.do(t, "open the edit page again", chromedp.Navigate(edit), chromedp.WaitVisible(chromedp.CSS(`[data-testid="target-summary"]`)))
	require.Equal(t, "Kubernetes", text(t, b, chromedp.CSS(`[data-testid="target-summary"] [data-testid="target-kind"]`)))
	require.True(t, strings.HasPrefix(text(t, b, chromedp.CSS(`[data-testid="target-read"]`)), "groups gantry:ws:<workspace>:read, gantry:org:"+org+":read (user gantry:org:"))
	require.True(t, strings.HasPrefix(text(t, b, chromedp.CSS(`[data-testid="target-write"]`)), "groups gantry:ws:<workspace>:write, gantry:org:"+org+":write (user gantry:org:"))
	require.Equal(t, "https://k8s.example.com:6443", value(t, b, chromedp.ID("target_kubernetes_server")))
	screenshotAt(t, b, targetShots+"/target-kubernetes-saved-1280.png", 1280, 900, false)
	screenshotAt(t, b, targetShots+"/target-kubernetes-saved-phone.png", 390, 844, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// The auditor's governance report.
	auditor := startBrowser(t, chrome)
	signInAs(t, auditor, app, auditorEmail, auditorPassword, "Audrey")
	section := `[data-testid="governance-env-staging"] `
	auditor.do(t, "open the governance report", chromedp.Navigate(app.URL+"/governance"),
		chromedp.WaitVisible(chromedp.CSS(section+`[data-testid="integration"]`)))
	require.Equal(t, "Kubernetes", text(t, auditor, chromedp.CSS(section+`[data-testid="integration-kind"]`)))
	require.Equal(t, "https://k8s.example.com:6443", text(t, auditor, chromedp.CSS(section+`[data-testid="integration-where"]`)))
	require.True(t, strings.HasPrefix(text(t, auditor, chromedp.CSS(section+`[data-testid="integration-read"]`)), "groups gantry:ws:<workspace>:read, gantry:org:"+org+":read"))
	require.True(t, strings.HasPrefix(text(t, auditor, chromedp.CSS(section+`[data-testid="integration-write"]`)), "groups gantry:ws:<workspace>:write, gantry:org:"+org+":write"))
	require.Equal(t, "federated", text(t, auditor, chromedp.CSS(section+`[data-testid="integration-credentials"]`)))
	require.Equal(t, "Sandbox cloud", text(t, auditor, chromedp.CSS(`[data-testid="governance-env-development"] [data-testid="integration-kind"]`)))
	screenshotAt(t, auditor, targetShots+"/governance-1280.png", 1280, 900, false)
	png := run(t, auditor, "take a picture of staging's integration", chromedp.Screenshot(chromedp.CSS(section+`[data-testid="integration"]`), chromedp.NodeVisible))
	require.NoError(t, os.WriteFile(targetShots+"/governance-integration-1280.png", png, 0o644))
	requireNoCSPViolations(t, b)
	requireNoCSPViolations(t, auditor)
}

// browserCA is a fresh self-signed CA certificate in PEM.
func browserCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cluster CA"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
