//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

// Artifact for a human; not an assertion.
const auditVerifyScreenshot = "/tmp/gantry-audit-verify-export-1280.png"

// TestAuditExportVerifiesOffline: an auditor filters the history in the browser to
// minute bounds and exports it (the export takes the filters' range, as the form sends it), downloads it, and it verifies with the
// script of docs/audit-format.md against the fingerprint the page names, and with
// `gantry audit verify --keys-url <portal>/api/v1/audit/keys` with a token the auditor
// made on the tokens page; the same file truncated, and without its manifest, gets a
// one-line FAIL from both, naming the same line.
func TestAuditExportVerifiesOffline(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	gantry := buildGantry(t)
	b := startBrowser(t, chrome)
	signInAs(t, b, app, auditorEmail, auditorPassword, "Audrey")

	b.do(t, "open API tokens", chromedp.Navigate(app.URL+"/settings/tokens"), chromedp.WaitVisible(chromedp.ID("make-token")))
	b.do(t, "make a read token", chromedp.SetValue(chromedp.ID("token-name"), "verify-keys"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('input[name="scopes"][value="read"]').checked = true`),
		chromedp.Click(chromedp.ID("make-token"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="token-secret-value"]`)))
	token := liveText(t, b, "token-secret-value")
	require.True(t, strings.HasPrefix(token, "gantry_"), token)

	now := time.Now().UTC()
	from, to := now.Add(-time.Hour).Truncate(time.Minute), now.Add(2*time.Minute).Truncate(time.Minute)
	b.do(t, "open the audit history", chromedp.Navigate(app.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="export-form"]`)))
	// The export takes the filters' range: set it, filter, then export what is shown.
	b.do(t, "filter the history to minute bounds", chromedp.Evaluate[chromedp.Void](`window.gantryBefore = true`),
		chromedp.SetValue(chromedp.ID("filter-from"), from.Format("2006-01-02T15:04")),
		chromedp.SetValue(chromedp.ID("filter-to"), to.Format("2006-01-02T15:04")),
		chromedp.Click(chromedp.CSS(`[data-testid="audit-filters"] button[type="submit"]`), chromedp.NodeVisible))
	waitForNewPage(t, b, "from=")
	b.do(t, "see what the export covers", chromedp.WaitVisible(chromedp.CSS(`[data-testid="export-scope"]`)))
	require.Zero(t, count(t, b, `[data-testid="export-range-note"]`), "the filters set the range")
	b.do(t, "ask for an export with minute bounds",
		chromedp.Click(chromedp.CSS(`[data-testid="export-submit"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="export-status"]`)))
	waitForPage(t, b, "the export to be ready", `document.querySelector('[data-testid="export-status"]')?.dataset.status == "ready"`,
		"export-status")
	b.do(t, "reload the page for its manifest", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-testid="export-manifest"]`)))
	require.Contains(t, liveText(t, b, "signing-keys"), "current")
	fingerprint := run(t, b, "read the fingerprint to pin", chromedp.Evaluate[string](
		`document.querySelector('[data-testid="signing-keys"] tbody td code').textContent`))
	require.True(t, strings.HasPrefix(fingerprint, "SHA256:"), fingerprint)
	screenshotAt(t, b, auditVerifyScreenshot, 1280, 900, false)

	file := run(t, b, "download the export", chromedp.Evaluate[string](
		`fetch(document.querySelector('[data-testid="export-download"]').href).then(r => r.text())`, chromedp.EvalAwaitPromise))
	// The signed manifest carries the bounds as sent: whole minutes, in UTC.
	var trailer struct{ Signed string }
	require.NoError(t, json.Unmarshal([]byte(file[strings.LastIndex(strings.TrimSuffix(file, "\n"), "\n")+1:]), &trailer))
	require.Contains(t, trailer.Signed, `"from":"`+from.Format(time.RFC3339)+`","to":"`+to.Format(time.RFC3339)+`"`)
	require.True(t, strings.HasSuffix(from.Format(time.RFC3339), ":00Z"), from)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}
	exported := write("export.jsonl", []byte(file))
	keysURL := app.URL + "/api/v1/audit/keys"
	script := func(path string) (int, string) {
		return command(t, nil, "python3", filepath.Join("..", "..", "docs", "audit-verify.py"), path, fingerprint)
	}
	cli := func(token, path string) (int, string) {
		return command(t, []string{"GANTRY_TOKEN=" + token}, gantry, "audit", "verify", path, "--keys-url", keysURL)
	}

	code, verdict := script(exported)
	require.Equal(t, 0, code, verdict)
	require.Regexp(t, `^OK \d+ events, mode chain, signed by audit-\S+ \(`+regexp.QuoteMeta(fingerprint)+`\)$`, verdict)
	code, verdict = cli(token, exported)
	require.Equal(t, 0, code, verdict)
	require.Regexp(t, `^OK \d+ events, seq 1\.\.\d+, chain verified from its anchor; signed by audit-\S+ \(`+regexp.QuoteMeta(fingerprint)+`\)$`, verdict)
	code, verdict = cli("", exported)
	require.Equal(t, 2, code, verdict)
	require.Contains(t, verdict, "set GANTRY_TOKEN")

	data := []byte(file)
	withoutManifest := data[:bytes.LastIndexByte(data[:len(data)-1], '\n')+1]
	cut := data[:len(data)/2]
	for what, broken := range map[string][]byte{"truncated": cut, "without its manifest": withoutManifest} {
		path := write("broken.jsonl", broken)
		lines := bytes.Count(broken, []byte("\n"))
		if !bytes.HasSuffix(broken, []byte("\n")) {
			lines++
		}
		want := fmt.Sprintf("FAIL line %d: the last line is not the signed manifest (file truncated?)", lines)
		code, verdict = script(path)
		require.Equal(t, 1, code, "%s: %s", what, verdict)
		require.Equal(t, want, verdict, what)
		code, verdict = cli(token, path)
		require.Equal(t, 1, code, "%s: %s", what, verdict)
		require.Equal(t, want, verdict, what)
	}
	requireNoCSPViolations(t, b)
}

// buildGantry builds the gantry command into the test's directory and returns its path.
func buildGantry(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gantry")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gantry")
	build.Dir = filepath.Join("..", "..")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building gantry: %s", out)
	return bin
}

// command runs name with args (and env added to a copy of the environment without
// GANTRY_ variables) and returns its exit status and its output, stdout and stderr.
func command(t *testing.T, env []string, name string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GANTRY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), strings.TrimSpace(string(out))
	}
	require.NoError(t, err, string(out))
	return 0, strings.TrimSpace(string(out))
}
