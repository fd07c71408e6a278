package run

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/errs"
)

// TestCheckNote: a request's reason and ticket are optional free text within their
// limits; the edge (web/edge.go) refuses control characters before a form gets here,
// and the service refuses them too for every other caller.
func TestCheckNote(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		note  Note
		field string // "" = accepted
		msg   string
	}{
		{"empty", Note{}, "", ""},
		{"reason of several lines", Note{Reason: "Invoices need a bucket.\r\n\tFor OPS."}, "", ""},
		{"reason at its limit", Note{Reason: strings.Repeat("é", MaxRequestReason)}, "", ""},
		{"reason too long", Note{Reason: strings.Repeat("é", MaxRequestReason+1)}, "reason", "at most 1000 characters"},
		{"escape code in the reason", Note{Reason: "now \x1b[31m"}, "reason", "no control characters"},
		{"NUL in the reason", Note{Reason: "a\x00b"}, "reason", "no control characters"},
		{"reason not UTF-8", Note{Reason: "a\xffb"}, "reason", "not valid text"},
		{"ticket", Note{Ticket: "https://tickets.example/OPS-1234"}, "", ""},
		{"ticket of two lines", Note{Ticket: "OPS-1\nOPS-2"}, "ticket", "one line"},
		{"ticket too long", Note{Ticket: strings.Repeat("x", MaxRequestTicket+1)}, "ticket", "at most 120 characters"},
	}
	for _, tc := range cases {
		v := &errs.Validation{}
		checkNote(tc.note, v)
		if tc.field == "" {
			require.NoError(t, v.Err(), tc.name)
			continue
		}
		require.Len(t, v.Fields, 1, tc.name)
		require.Contains(t, v.Fields[tc.field], tc.msg, tc.name)
	}
	require.Equal(t, Note{Reason: "a\nb", Ticket: "OPS-1"}, trimNote(Note{Reason: "  a\r\nb \n", Ticket: " OPS-1 "}))
}
