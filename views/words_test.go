package views

import (
	"context"
	"strings"
	"testing"

	"github.com/a-h/templ"
)

// TestFailedAttemptsInWords: a webhook's failures read with the right plural.
func TestFailedAttemptsInWords(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{1: "1 failed attempt in a row", 2: "2 failed attempts in a row"} {
		var b strings.Builder
		if err := webhookState(WebhookRow{Enabled: true, Failures: n}).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("%d failures: %q does not say %q", n, b.String(), want)
		}
	}
}

// render is c's HTML, rendered outside a request.
func render(t *testing.T, c templ.Component) string {
	t.Helper()
	var b strings.Builder
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWordsOnPages: the pages say counts with the right plural and say permissions,
// patterns and where to read more in words a person has, not in code they do not.
func TestWordsOnPages(t *testing.T) {
	t.Parallel()
	env := EnvironmentRow{ID: "env-1", Name: "staging", Tier: "staging"}
	members := MembersProps{CanEntitle: true, Roles: []string{"operator"},
		Rows: []MemberRow{{UserID: "usr-1", Name: "Olivia", Role: "operator", Editable: true}}}
	for _, tc := range []struct {
		name      string
		page      templ.Component
		want, not []string
	}{
		{"one environment", Environments(EnvironmentsProps{Rows: []EnvironmentRow{env}}),
			[]string{">1 environment</caption>"}, []string{"1 environments"}},
		{"two environments", Environments(EnvironmentsProps{Rows: []EnvironmentRow{env, env}}),
			[]string{">2 environments</caption>"}, nil},
		{"members: the entitlement in words", MembersPage(members),
			[]string{`<th scope="col">Live cloud</th>`, "the live-cloud entitlement", `aria-label="Grant the live-cloud entitlement to Olivia"`},
			[]string{"cloud.live"}},
		{"environment owners: the role in words", EnvironmentForm(EnvironmentFormProps{}),
			[]string{"they still need a role that decides runs: operator, admin or owner"}, []string{"provisioning."}},
		{"policies: the input on the page, not in a file", Policies(PoliciesProps{CanManage: true}),
			[]string{`data-testid="policy-input"`, "<code>input.run.kind</code>"}, []string{"docs/", ".md", "DESIGN", "§"}},
	} {
		html := render(t, tc.page)
		for _, w := range tc.want {
			if !strings.Contains(html, w) {
				t.Errorf("%s: the page does not say %q", tc.name, w)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(html, w) {
				t.Errorf("%s: the page says %q", tc.name, w)
			}
		}
	}
}

// TestCounted: a count with its noun, one or many, digits grouped.
func TestCounted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 environments"}, {1, "1 environment"}, {2, "2 environments"}, {1204, "1,204 environments"}} {
		if got := counted(tc.n, "environment", "environments"); got != tc.want {
			t.Errorf("counted(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestFormatHint: an input's pattern reaches its hint in words only when the manifest's
// help says nothing (the help usually says the format better); the limits always do.
func TestFormatHint(t *testing.T) {
	one, five := 1.0, 5.0
	for _, c := range []struct {
		f    InputField
		want string
	}{
		{InputField{Format: "lower-case letters and digits"}, "Lower-case letters and digits."},
		{InputField{Format: "lower-case letters and digits", Help: "The bucket's name."}, ""},
		{InputField{Integer: true, Min: &one, Max: &five, Help: "How many."}, " (whole numbers; from 1 to 5)"},
		{InputField{Integer: true, Min: &one, Max: &five, Format: "digits"}, "Whole numbers; from 1 to 5; digits."},
		{InputField{}, ""},
	} {
		if got := ruleText(c.f); got != c.want {
			t.Errorf("ruleText(%+v) = %q, want %q", c.f, got, c.want)
		}
	}
}
