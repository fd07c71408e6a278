package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Payload is the JSON document a "json" hook receives: about a run (Run) or, for the
// "breakglass.*" events, a break-glass window (Window).
type Payload struct {
	ID         string    `json:"id"` // the notice: the same in every hook's delivery and a redelivery
	Event      Event     `json:"event"`
	OccurredAt time.Time `json:"occurred_at"`
	Summary    string    `json:"summary"`
	Reason     string    `json:"reason,omitempty"`
	Actor      string    `json:"actor,omitempty"`
	// CauseRunID is the run whose act ended this one (Notice.CauseRunID).
	CauseRunID string         `json:"cause_run_id,omitempty"`
	Run        *PayloadRun    `json:"run,omitempty"`
	Window     *PayloadWindow `json:"window,omitempty"`
}

// PayloadRun is the run a payload is about.
type PayloadRun struct {
	ID               string         `json:"id"`
	OrganizationID   string         `json:"organization_id"`
	Label            string         `json:"label"`
	Workspace        string         `json:"workspace"`
	Environment      string         `json:"environment"`
	Tier             string         `json:"tier"`
	Template         string         `json:"template"`
	Kind             string         `json:"kind"`
	State            string         `json:"state"`
	Requester        string         `json:"requester"`
	RiskLevel        string         `json:"risk_level,omitempty"`
	Changes          map[string]int `json:"changes"`
	CostDelta        string         `json:"cost_delta,omitempty"`
	DecisionDeadline *time.Time     `json:"decision_deadline,omitempty"`
	Simulated        bool           `json:"simulated"`
	ReviewURL        string         `json:"review_url"`
}

// Body is what a hook of format f receives for notice n about run f.
func Body(format Format, n Notice, f Facts, link string) ([]byte, error) {
	if n.Window != nil {
		return windowBody(format, n, link)
	}
	if format == FormatSlack {
		return json.Marshal(map[string]string{"text": slackText(n, f, link)})
	}
	p := Payload{ID: n.ID, Event: n.Event, OccurredAt: n.At.UTC(), Summary: Headline(n, f), Reason: n.Reason, Actor: n.ActorName,
		CauseRunID: n.CauseRunID, Run: &PayloadRun{ID: n.RunID, OrganizationID: n.OrganizationID, Label: f.Label, Workspace: f.Workspace, Environment: f.Environment,
			Tier: f.Tier, Template: f.Template, Kind: f.Kind, State: n.State, Requester: f.Requester, RiskLevel: f.RiskLevel,
			Changes:   map[string]int{"create": f.Create, "update": f.Update, "replace": f.Replace, "delete": f.Delete},
			CostDelta: f.CostDelta, Simulated: f.Simulated, ReviewURL: link}}
	if n.Event == DecisionWaiting || n.Event == DecisionEscalated {
		p.Run.DecisionDeadline = f.Deadline
	}
	return json.Marshal(p)
}

// slackText is the notice in Slack's mrkdwn: a linked headline, then the facts.
func slackText(n Notice, f Facts, link string) string {
	esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
	var b strings.Builder
	fmt.Fprintf(&b, "<%s|%s>", link, esc(Headline(n, f)))
	if n.Reason != "" {
		fmt.Fprintf(&b, "\n%s", esc(n.Reason))
	}
	fmt.Fprintf(&b, "\n%s · %s · requested by %s", esc(f.Template), esc(f.Changes()), esc(f.Requester))
	if f.CostDelta != "" {
		fmt.Fprintf(&b, " · %s", esc(f.CostDelta))
	}
	return b.String()
}
