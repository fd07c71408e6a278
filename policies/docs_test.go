package policies

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs/policy-input.md must not drift: its rule table lists every built-in rule with its
// title and default enforcement, and its ported example is a valid organization policy.
func TestDocsPolicyInput(t *testing.T) {
	data, err := os.ReadFile("../docs/policy-input.md")
	require.NoError(t, err)
	doc := string(data)

	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (.+) \\| (advisory|soft_mandatory|hard_mandatory) \\|$").FindAllStringSubmatch(doc, -1)
	var listed []string
	for _, r := range rows {
		listed = append(listed, fmt.Sprintf("%s|%s|%s", r[1], r[2], r[3]))
	}
	var want []string
	for _, r := range builtin(t).Rules() {
		want = append(want, fmt.Sprintf("%s|%s|%s", r.ID, r.Title, r.Enforcement))
	}
	require.Equal(t, want, listed)

	blocks := regexp.MustCompile("(?s)```rego\n(.*?)```").FindAllStringSubmatch(doc, -1)
	var policy, tests string
	for _, b := range blocks {
		switch {
		case strings.HasPrefix(b[1], "package gantry.org.no_deletes_in_prod\n"):
			policy = b[1]
		case strings.HasPrefix(b[1], "package gantry.org.no_deletes_in_prod_test\n"):
			tests = b[1]
		}
	}
	require.NotEmpty(t, policy)
	require.NotEmpty(t, tests)
	rule, err := ValidateOrgPolicy(context.Background(), "no_deletes_in_prod", policy, tests)
	require.NoError(t, err)
	require.Equal(t, SoftMandatory, rule.Enforcement)
}
