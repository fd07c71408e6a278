package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// What a break-glass window's notice says, on each channel. A window is an emergency:
// its notices say so first, and link to the window's page, where it is decided (never
// by following the link).

// WindowFacts are what a notice says about a break-glass window, fixed when the window
// service queues it (the window's row is small and at hand then).
type WindowFacts struct {
	ID              string     `json:"id"` // "bgw-..."
	Workspace       string     `json:"workspace"`
	Environment     string     `json:"environment"`
	Tier            string     `json:"tier,omitempty"`
	State           string     `json:"state"` // the window's state after what happened
	Requester       string     `json:"requester"`
	Reason          string     `json:"reason"` // why the window was asked for
	DurationMinutes int        `json:"duration_minutes"`
	DecideBy        *time.Time `json:"decision_deadline,omitempty"`   // a request: decided by then, or it expires
	OpenBy          *time.Time `json:"approval_expires_at,omitempty"` // an approval: opened by then, or it expires
	EndsAt          *time.Time `json:"ends_at,omitempty"`             // an open window: its clock ends it then
}

// at says a time as mail and chat do.
func at(t *time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// windowHeadline is a window's notice in one sentence.
func windowHeadline(n Notice) string {
	w := n.Window
	where := fmt.Sprintf("break-glass window on %s (%s)", w.Workspace, w.Environment)
	by := ""
	if n.ActorName != "" {
		by = " by " + n.ActorName
	}
	switch {
	case n.Event == BreakglassRequested:
		return fmt.Sprintf("Emergency: %s asks for a %d-minute %s", w.Requester, w.DurationMinutes, where)
	case n.Event == BreakglassOpened && w.State == "APPROVED":
		return fmt.Sprintf("Emergency: the %s was approved%s", where, by)
	case n.Event == BreakglassOpened:
		return fmt.Sprintf("Emergency: the %s is open", where)
	case n.Event == BreakglassEnded && w.State == "AWAITING_CODIFICATION":
		return fmt.Sprintf("The %s ended: its change awaits codification", where)
	case n.Event == BreakglassEnded && w.State == "EXPIRED":
		return fmt.Sprintf("The %s expired", where)
	case n.Event == BreakglassEnded:
		return fmt.Sprintf("The %s was %s%s", where, strings.ToLower(w.State), by)
	}
	return fmt.Sprintf("The %s: %s", where, n.Event)
}

// windowMail writes window notice n to contact c.
func windowMail(n Notice, c Contact, link, prefs string) Mail {
	w := n.Window
	var b strings.Builder
	name := c.Name
	if name == "" {
		name = c.Email
	}
	fmt.Fprintf(&b, "Hello %s,\n\n%s.\n", name, windowHeadline(n))
	if n.Reason != "" {
		fmt.Fprintf(&b, "What happened: %s\n", n.Reason)
	}
	b.WriteString("\n")
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%-14s %s\n", k+":", v)
		}
	}
	line("Window", w.ID)
	line("Workspace", w.Workspace)
	line("Environment", strings.TrimSpace(w.Environment+" ("+w.Tier+")"))
	line("Requested by", w.Requester)
	line("Why", w.Reason)
	line("Length", fmt.Sprintf("%d minutes", w.DurationMinutes))
	switch {
	case n.Event == BreakglassRequested && w.DecideBy != nil:
		line("Decide by", at(w.DecideBy))
	case w.State == "APPROVED" && w.OpenBy != nil:
		line("Open it by", at(w.OpenBy))
	case w.State == "OPEN" && w.EndsAt != nil:
		line("Open until", at(w.EndsAt))
	}
	fmt.Fprintf(&b, "\nSee the window: %s\n\n", link)
	b.WriteString("Nothing is decided by following this link: the window's page shows its terms and asks you to decide there.\n")
	if prefs != "" {
		fmt.Fprintf(&b, "Choose which mail Gantry sends you: %s\n", prefs)
	}
	return Mail{NoticeID: n.ID, Event: n.Event, UserID: c.UserID, To: c.Email, ToName: c.Name,
		Subject: "[Gantry] " + windowHeadline(n), Text: b.String()}
}

// PayloadWindow is the break-glass window a payload is about (a "breakglass.*" event).
type PayloadWindow struct {
	WindowFacts
	OrganizationID string `json:"organization_id"`
	URL            string `json:"url"`
}

// windowBody is what a hook of format f receives for window notice n.
func windowBody(format Format, n Notice, link string) ([]byte, error) {
	if format == FormatSlack {
		esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
		text := fmt.Sprintf("<%s|%s>\n%s", link, esc(windowHeadline(n)), esc(n.Window.Reason))
		if n.Reason != "" {
			text += "\n" + esc(n.Reason)
		}
		return json.Marshal(map[string]string{"text": text})
	}
	return json.Marshal(Payload{ID: n.ID, Event: n.Event, OccurredAt: n.At.UTC(), Summary: windowHeadline(n), Reason: n.Reason,
		Actor: n.ActorName, Window: &PayloadWindow{WindowFacts: *n.Window, OrganizationID: n.OrganizationID, URL: link}})
}
