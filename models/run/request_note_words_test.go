package run

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTicketLink: only an absolute http(s) URL with a host becomes a link; anything
// else a requester types is shown as text.
func TestTicketLink(t *testing.T) {
	t.Parallel()
	for ticket, want := range map[string]string{
		"https://tickets.example/OPS-1234":       "https://tickets.example/OPS-1234",
		"http://jira.local/browse/OPS-1?x=1#c":   "http://jira.local/browse/OPS-1?x=1#c",
		"HTTPS://tickets.example/A":              "https://tickets.example/A",
		"OPS-1234":                               "",
		"":                                       "",
		"javascript:alert(1)":                    "",
		"JavaScript://tickets.example/%0aalert":  "",
		"data:text/html,<script>":                "",
		"//tickets.example/OPS-1":                "",
		"https:///no-host":                       "",
		"https://user:pw@tickets.example/":       "",
		"https://tickets.example/a b":            "",
		"https://tickets.example\\@evil.example": "",
		"ftp://tickets.example/OPS-1":            "",
	} {
		require.Equal(t, want, TicketLink(ticket), ticket)
	}
}

// TestReasonLine: a list row shows the reason's first line, cut with an ellipsis.
func TestReasonLine(t *testing.T) {
	t.Parallel()
	cases := []struct{ reason, want string }{
		{"", ""},
		{"Invoices need a bucket.", "Invoices need a bucket."},
		{"Invoices need a bucket.\nFor OPS.", "Invoices need a bucket. …"},
		{"  Invoices.  \n\n  ", "Invoices."},
		{strings.Repeat("é", 31), strings.Repeat("é", 29) + "…"},
		{strings.Repeat("é", 30), strings.Repeat("é", 30)},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, ReasonLine(tc.reason, 30), tc.reason)
	}
}
