package notify

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"gantry/models/errs"
)

// HookInput is what a person types to add a hook.
type HookInput struct {
	Name   string
	URL    string
	Format string
	Events []string
}

// MaxHookName bounds a hook's name.
const MaxHookName = 80

// validate checks the input field by field (fields name, url, format, events); the URL
// must be one the delivery client will call (see HookOptions.AllowPrivateTargets).
func (in HookInput) validate(opts HookOptions) (Format, []Event, error) {
	v := &errs.Validation{}
	name := strings.TrimSpace(in.Name)
	switch {
	case name == "":
		v.Add("name", "Enter a name, for example \"platform-alerts\".")
	case !utf8.ValidString(name) || strings.ContainsAny(name, "\x00\r\n"):
		v.Add("name", "Use letters, digits, spaces and punctuation on one line.")
	case utf8.RuneCountInString(name) > MaxHookName:
		v.Add("name", fmt.Sprintf("Use at most %d characters.", MaxHookName))
	}
	if msg := checkTarget(in.URL, opts); msg != "" {
		v.Add("url", msg)
	}
	f := Format(in.Format)
	if f != FormatJSON && f != FormatSlack {
		v.Add("format", "Choose Gantry JSON or a Slack-compatible body.")
	}
	var events []Event
	for _, e := range in.Events {
		ev := Event(e)
		if !ev.Valid() {
			v.Add("events", fmt.Sprintf("%q is not an event Gantry sends.", e))
			continue
		}
		if !slices.Contains(events, ev) {
			events = append(events, ev)
		}
	}
	if len(in.Events) == 0 {
		v.Add("events", "Choose at least one event.")
	}
	slices.SortFunc(events, func(a, b Event) int { return slices.Index(Events, a) - slices.Index(Events, b) })
	return f, events, v.Err()
}

// checkTarget says what is wrong with a hook URL ("" when nothing is).
func checkTarget(raw string, opts HookOptions) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "Enter the URL Gantry should POST to."
	}
	if len(raw) > 2000 || strings.ContainsAny(raw, "\x00\r\n\t ") {
		return "Enter one URL of at most 2000 characters, without spaces."
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "Enter an http:// or https:// URL, for example https://hooks.example.com/gantry."
	}
	if u.User != nil {
		return "Leave credentials out of the URL: Gantry signs every delivery with the hook's secret."
	}
	if u.Fragment != "" {
		return "Leave out the #fragment: it is never sent."
	}
	if msg := opts.refusedHost(u.Hostname()); msg != "" {
		return msg
	}
	return ""
}
