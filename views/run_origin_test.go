package views

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunOriginSays: a rollback's and a promotion's run page say what they are in a
// sentence, linking the run they come from; one the reader may not see is not named.
func TestRunOriginSays(t *testing.T) {
	t.Parallel()
	tags := regexp.MustCompile(`<[^>]+>`)
	space := regexp.MustCompile(`\s+`)
	for _, c := range []struct {
		o        RunOriginProps
		say, url string
	}{
		{RunOriginProps{Rollback: true, Serial: 1, TargetWorkspace: "rollback-db", TargetEnvironment: "development", SourceURL: "/runs/run-a",
			SourceLabel: "#1", Workspace: "rollback-db", Environment: "development", AppliedAt: "2026-12-06 10:19 UTC"},
			"Rollback of rollback-db to state version 1, re-applying the inputs and template version of run #1 (applied 2026-12-06 10:19 UTC)", "/runs/run-a"},
		{RunOriginProps{TargetWorkspace: "orders-db", TargetEnvironment: "production", SourceURL: "/runs/run-b", SourceLabel: "#3",
			Workspace: "orders-db", Environment: "staging", AppliedAt: "2026-12-05 09:00 UTC"},
			"Promotion to production of orders-db #3 in staging (applied 2026-12-05 09:00 UTC)", "/runs/run-b"},
		{RunOriginProps{TargetWorkspace: "orders-db", TargetEnvironment: "production"},
			"Promotion to production of a run in an environment you may not see", ""},
	} {
		var buf bytes.Buffer
		require.NoError(t, runOrigin(c.o).Render(context.Background(), &buf))
		html := buf.String()
		said := strings.TrimSpace(space.ReplaceAllString(tags.ReplaceAllString(html, ""), " "))
		require.Equal(t, c.say, said, html)
		if c.url != "" {
			require.Contains(t, html, `href="`+c.url+`"`)
		} else {
			require.NotContains(t, html, "href")
		}
	}
}
