// Package views holds Gantry's templ components: the layout, shared components and one
// page per file, each with one props struct. Components are pure: they read their props
// and the request's Chrome (who is signed in, where, with which CSRF token) and never
// do I/O.
package views

import (
	"context"
	"strconv"
	"strings"

	"gantry/views/paths"
)

// Flash is a one-time message shown at the top of the next page.
type Flash struct {
	Kind    string // success | error | info
	Message string
}

// OrgChoice is one organization the signed-in user belongs to.
type OrgChoice struct {
	ID   string
	Name string
	Role string
}

// Chrome is what every page around its content needs to know. The web layer builds it
// once per request and puts it into the request context.
type Chrome struct {
	RequestID     string
	CSRFToken     string
	Path          string
	SignedIn      bool
	UserName      string
	UserEmail     string
	Org           OrgChoice
	Orgs          []OrgChoice
	Flashes       []Flash
	CanManageEnvs bool
	CanReadAudit  bool
	CanRequest    bool
	CanApprove    bool
	// CanManageWebhooks: the organization's webhooks are in the navigation.
	CanManageWebhooks bool
	// CanReadGovernance: the governance report is in the navigation (what the
	// governance service asks of its reader).
	CanReadGovernance bool
	// CanBreakglass: the list of break-glass windows is in the navigation (what the
	// break-glass service asks of whoever lists them).
	CanBreakglass bool
	// FormKey makes a fresh idempotency key for each form drawn (CSRFField puts it in
	// the form): the web layer sets it, so views stay free of I/O. Nil: no keys.
	FormKey func() string
	// WaitingForYou is how many runs the person may decide now (the navigation's count).
	WaitingForYou int64
	// Stream is the page's one live stream, opened on the body ("": none). Browsers allow
	// few connections per origin, so a tab has one: the inbox stream keeping the count
	// live, or a page's own stream, which then carries the count too (WithStream).
	Stream string
}

// OwnStream returns ctx for a page that opens a live stream of its own, inside the
// page, that does not carry the navigation's count: the count is not kept live there.
func OwnStream(ctx context.Context) context.Context {
	c := ChromeFrom(ctx)
	c.Stream = ""
	return WithChrome(ctx, c)
}

// WithStream returns ctx for a page whose own live stream, at url, is the page's one:
// it carries the navigation's count ("inbox-count", as the inbox stream sends it)
// besides the page's own events.
func WithStream(ctx context.Context, url string) context.Context {
	c := ChromeFrom(ctx)
	c.Stream = url
	return WithChrome(ctx, c)
}

type chromeKey struct{}

// WithChrome returns ctx carrying c.
func WithChrome(ctx context.Context, c Chrome) context.Context {
	return context.WithValue(ctx, chromeKey{}, c)
}

// ChromeFrom returns the chrome in ctx, or the empty chrome of a signed-out visitor.
func ChromeFrom(ctx context.Context) Chrome {
	c, _ := ctx.Value(chromeKey{}).(Chrome)
	return c
}

// csrfHeaders is the hx-headers value that makes htmx send the CSRF token.
func csrfHeaders(token string) string {
	return `{"X-CSRF-Token":"` + token + `"}`
}

// active marks the navigation link of the current section: the path is prefix or
// below it ("/runs" and "/runs/run-1", not "/runsheet").
func active(c Chrome, prefix string) bool {
	if prefix == "/" {
		return c.Path == "/"
	}
	rest, ok := strings.CutPrefix(c.Path, prefix)
	return ok && (rest == "" || strings.HasPrefix(rest, "/") || strings.HasPrefix(rest, "?"))
}

// navItem is one link of a navigation group.
type navItem struct {
	Href, Label string
	Current     bool
}

// settingsNav is the settings group: what the person may manage, in the order they
// set an organization up.
func settingsNav(c Chrome) []navItem {
	var items []navItem
	if c.CanManageEnvs {
		items = append(items,
			navItem{paths.Environments(), "Environments", active(c, paths.Environments())},
			navItem{paths.Executors(), "Executors", active(c, paths.Executors())},
			navItem{paths.ApprovalMatrix(), "Approval matrix", active(c, paths.ApprovalMatrix())},
			navItem{paths.Policies(), "Policies", active(c, paths.Policies())},
			navItem{paths.Members(), "Members", active(c, paths.Members())})
	}
	if c.CanManageWebhooks {
		items = append(items, navItem{paths.Webhooks(), "Webhooks", active(c, paths.Webhooks())})
	}
	return items
}

// auditNav is the audit group: the history and the governance report, for those who
// may read them.
func auditNav(c Chrome) []navItem {
	var items []navItem
	if c.CanReadAudit {
		items = append(items, navItem{paths.Audit(), "Audit history", active(c, paths.Audit())})
	}
	if c.CanReadGovernance {
		items = append(items, navItem{paths.Governance(), "Governance", active(c, paths.Governance())})
	}
	return items
}

// anyCurrent reports whether one of items is the current page's section.
func anyCurrent(items []navItem) bool {
	for _, it := range items {
		if it.Current {
			return true
		}
	}
	return false
}

// countText is the navigation's count as its badge shows it: at most three characters,
// so the badge keeps its width ("99+"; the label beside it reads the exact number).
func countText(n int64) string {
	if n > 99 {
		return "99+"
	}
	return strconv.FormatInt(n, 10)
}

// waitingLabel reads the navigation's count out: ", 3 runs wait for your decision".
func waitingLabel(n int64) string {
	if n == 1 {
		return ", 1 run waits for your decision"
	}
	return ", " + strconv.FormatInt(n, 10) + " runs wait for your decision"
}
