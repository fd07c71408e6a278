package run

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// ReasonLineLength is how many characters of a reason's first line a list row shows.
const ReasonLineLength = 80

// TicketLink is the ticket as a link target when it is an absolute http or https URL
// with a host, "" otherwise (a ticket number, "javascript:…", "//host" or anything else
// is shown as text, never linked): the requester's free text must not choose what a
// decider's click runs.
func TicketLink(ticket string) string {
	t := strings.TrimSpace(ticket)
	if t == "" || strings.ContainsAny(t, " \t\r\n\\") {
		return ""
	}
	u, err := url.Parse(t)
	if err != nil || u.Host == "" || u.User != nil {
		return ""
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return ""
	}
	return u.String()
}

// ReasonLine is the first line of a reason, cut to at most limit characters with an
// ellipsis ("…") where it was cut or where more lines follow.
func ReasonLine(reason string, limit int) string {
	line, rest, more := strings.Cut(strings.TrimSpace(reason), "\n")
	line = strings.TrimSpace(line)
	more = more && strings.TrimSpace(rest) != ""
	if utf8.RuneCountInString(line) > limit {
		runes := []rune(line)
		return strings.TrimSpace(string(runes[:max(limit-1, 0)])) + "…"
	}
	if more {
		return line + " …"
	}
	return line
}
