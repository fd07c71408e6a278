package notify

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWindowNotices: a break-glass notice says it is an emergency, names the window's
// workspace, requester, reason and deadline, links to the window's page, and its JSON
// payload carries the window (no run).
func TestWindowNotices(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 5, 4, 10, 30, 0, 0, time.UTC)
	n := Notice{ID: "ntf-1", Event: BreakglassRequested, OrganizationID: "org-1", At: deadline.Add(-30 * time.Minute), ActorName: "Olivia",
		Window: &WindowFacts{ID: "bgw-1", Workspace: "orders-db", Environment: "staging", Tier: "staging", State: "REQUESTED",
			Requester: "Olivia", Reason: "INC-42: <database> out of memory", DurationMinutes: 30, DecideBy: &deadline}}
	link := "https://gantry.example/breakglass/bgw-1"

	m := mailFor(n, Facts{}, Contact{UserID: "usr-admin", Name: "Adam", Email: "admin@acme.test"}, link, "https://gantry.example/settings/notifications")
	require.Equal(t, "[Gantry] Emergency: Olivia asks for a 30-minute break-glass window on orders-db (staging)", m.Subject)
	require.Contains(t, m.Text, "Why:           INC-42: <database> out of memory\n")
	require.Contains(t, m.Text, "Decide by:     2026-05-04 10:30 UTC\n")
	require.Contains(t, m.Text, "See the window: "+link+"\n")

	body, err := Body(FormatJSON, n, Facts{}, link)
	require.NoError(t, err)
	var p map[string]any
	require.NoError(t, json.Unmarshal(body, &p))
	require.Equal(t, "breakglass.requested", p["event"])
	require.NotContains(t, p, "run")
	window := p["window"].(map[string]any)
	require.Equal(t, "bgw-1", window["id"])
	require.Equal(t, "orders-db", window["workspace"])
	require.Equal(t, "REQUESTED", window["state"])
	require.Equal(t, "2026-05-04T10:30:00Z", window["decision_deadline"])
	require.Equal(t, link, window["url"])

	slack, err := Body(FormatSlack, n, Facts{}, link)
	require.NoError(t, err)
	require.Contains(t, string(slack), `INC-42: \u0026lt;database\u0026gt; out of memory`, "escaped for Slack")

	approved := n
	approved.Event, approved.Window = BreakglassOpened, &WindowFacts{ID: "bgw-1", Workspace: "orders-db", Environment: "staging", State: "APPROVED"}
	approved.ActorName = "Adam"
	require.Equal(t, "Emergency: the break-glass window on orders-db (staging) was approved by Adam", Headline(approved, Facts{}))
	ended := approved
	ended.Event, ended.Window = BreakglassEnded, &WindowFacts{Workspace: "orders-db", Environment: "staging", State: "EXPIRED"}
	ended.ActorName = ""
	require.Equal(t, "The break-glass window on orders-db (staging) expired", Headline(ended, Facts{}))
}
