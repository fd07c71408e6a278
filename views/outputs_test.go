package views

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOutputBreakPoints: a value breaks only after a separator, and its parts join back
// to the value (what is copied).
func TestOutputBreakPoints(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		value string
		want  []string
	}{
		{"", nil},
		{"plainword", []string{"plainword"}},
		{"https://live-exports.s3.sandbox/path?x=1", []string{"https:", "/", "/", "live-", "exports.", "s3.", "sandbox/", "path?", "x=", "1"}},
		{"ws-abc_def.", []string{"ws-", "abc_", "def."}},
		{"a b", []string{"a b"}},
	} {
		got := breakPoints(c.value)
		require.Equal(t, c.want, got, "%q", c.value)
		require.Equal(t, c.value, strings.Join(got, ""))
	}
}
