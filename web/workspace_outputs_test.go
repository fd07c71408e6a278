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
// (a password) shows it on the workspace page as "(sensitive)", never its value, while
// the other outputs show theirs; the value is nowhere in the page.
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
	require.Regexp(t, `(?s)data-testid="workspace-outputs".*admin_password.*\(sensitive\)`, page)
	require.Regexp(t, `(?s)data-testid="workspace-outputs".*endpoint.*https://outputs\.sandbox\.test`, page)
	require.NotContains(t, page, secret)
	require.NotContains(t, page, "hunter2")
}
