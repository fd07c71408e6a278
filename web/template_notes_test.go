package web_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

// TestTemplateNotesReadAsParagraphs: the template page draws the manifest's notes as
// prose: the YAML's line breaks within a paragraph are gone.
func TestTemplateNotesReadAsParagraphs(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	resp := app.Get(t, operator, "/catalog/postgres")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<div data-testid="template-notes"><p>A database holds data: replacing or destroying it loses everything written since the last backup. `+
		`Rolling back to an earlier engine version is not possible in place; restore a backup into a new database instead (forward fix). `)
	require.NotContains(t, body, "since the last\nbackup")
}
