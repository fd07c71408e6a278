package run

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"gantry/models/errs"
)

// Limits of a request's note: why it is asked for and the ticket it answers. Both are
// the requester's free text, shown to whoever decides (inbox, review, evidence report,
// API) and never read by any rule.
const (
	MaxRequestReason = 1000
	MaxRequestTicket = 120
)

// Note is why a run was requested and the ticket it answers, as the requester wrote
// them ("" where they wrote nothing).
type Note struct {
	Reason string
	Ticket string
}

// checkNote adds field messages for a note that is too long or holds characters no
// person typed: control characters (a reason may hold line breaks and tabs; a ticket
// is one line) and invalid UTF-8.
func checkNote(n Note, v *errs.Validation) {
	if msg := noteProblem(n.Reason, MaxRequestReason, true); msg != "" {
		v.Add("reason", "The reason "+msg)
	}
	if msg := noteProblem(n.Ticket, MaxRequestTicket, false); msg != "" {
		v.Add("ticket", "The ticket "+msg)
	}
}

// noteProblem says what is wrong with one field of a note, "" when nothing is.
func noteProblem(s string, limit int, lines bool) string {
	if !utf8.ValidString(s) {
		return "is not valid text."
	}
	if n := utf8.RuneCountInString(s); n > limit {
		return fmt.Sprintf("may be at most %d characters long (it has %d).", limit, n)
	}
	for _, r := range s {
		if lines && (r == '\n' || r == '\r' || r == '\t') {
			continue
		}
		if unicode.IsControl(r) {
			if lines {
				return "may hold text and line breaks only, no control characters."
			}
			return "must be one line of text, without control characters."
		}
	}
	return ""
}

// trimNote is n as stored: surrounding white space dropped, line endings as "\n".
func trimNote(n Note) Note {
	return Note{Reason: strings.TrimSpace(strings.ReplaceAll(n.Reason, "\r\n", "\n")), Ticket: strings.TrimSpace(n.Ticket)}
}
