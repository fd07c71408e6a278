package web_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
)

// TestSensitiveOutputsStayMasked: a state whose root outputs include a sensitive one
// (a password) shows it on the workspace page as "sensitive: not shown", never its
// value, and offers no Copy for it, while the other outputs show theirs, each with its
// Copy button; the value is nowhere in the page.
func TestSensitiveOutputsStayMasked(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	req := bucketRequest(app.OrgEnvironmentID(t, "acme", "development"), "eu-west")
	req.Set("workspace", "outputs")
	r := waitForState(t, app, app.RequestRun(t, operator, req), run.Succeeded)

	// The next version of its state, as an apply would write it, with two more outputs.
	ctx := t.Context()
	pred, err := app.System.StateStore.Predecessor(ctx, r.OrganizationID, r.WorkspaceID)
	require.NoError(t, err)
	data, err := app.System.StateStore.Content(ctx, r.OrganizationID, pred.VersionID)
	require.NoError(t, err)
	var st map[string]any
	require.NoError(t, json.Unmarshal(data, &st))
	st["serial"] = st["serial"].(float64) + 1
	outputs, _ := st["outputs"].(map[string]any)
	if outputs == nil {
		outputs = map[string]any{}
	}
	const secret = "hunter2-correct-horse-battery"
	outputs["admin_password"] = map[string]any{"value": secret, "type": "string", "sensitive": true}
	outputs["endpoint"] = map[string]any{"value": "https://outputs.sandbox.test", "type": "string"}
	st["outputs"] = outputs
	next, err := json.Marshal(st)
	require.NoError(t, err)
	_, err = app.System.StateStore.RecordApplied(ctx, r.OrganizationID, r.WorkspaceID, r.ID, next, app.System.Runs.Staleness)
	require.NoError(t, err)

	resp := app.Get(t, operator, "/workspaces/"+r.WorkspaceID)
	page := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `(?s)data-testid="workspace-outputs".*data-output="admin_password"><dt><code>admin_password</code></dt><dd><span class="muted" data-testid="output-sensitive">sensitive: not shown</span></dd>`, page)
	require.NotContains(t, page, `data-copy="workspace-output-admin_password"`)
	require.NotContains(t, page, `id="workspace-output-admin_password"`)
	// A value breaks only after its separators (<wbr>), and has its Copy button.
	require.Contains(t, page, `<code class="output-value" id="workspace-output-endpoint" data-testid="output-value">https:<wbr>/<wbr>/<wbr>outputs.<wbr>sandbox.<wbr>test<wbr></code>`)
	require.Contains(t, page, `<button type="button" class="secondary copy" data-copy="workspace-output-endpoint" aria-label="Copy the value of endpoint">Copy</button>`)
	require.NotContains(t, page, secret)
	require.NotContains(t, page, "hunter2")
}
