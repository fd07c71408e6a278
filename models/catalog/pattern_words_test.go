package catalog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPatternInWords: a pattern is said in words a person reads, never shown as the
// pattern itself.
func TestPatternInWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ pattern, want string }{
		{`^[a-z][a-z0-9-]{2,40}$`, "lower-case letters, digits and hyphens; 3 to 41 characters; starting with a lower-case letter"},
		{`^10\.[0-9]{1,3}\.0\.0/16$`, `digits, dots and slashes; 11 to 13 characters; starting with "10."`},
		{`[a-z][a-z0-9_]*`, "lower-case letters, digits and underscores; at least 1 character; starting with a lower-case letter"},
		{`[A-Z]{2}`, "upper-case letters; exactly 2 characters"},
		{`[0-9]?`, "digits; at most 1 character"},
		{`(eu|us)-[a-z]+`, "lower-case letters and hyphens; at least 4 characters"},
		// The parser merges [A-Z@] into one range and [-.] into another: said apart.
		{`^[A-Za-z0-9]([A-Za-z0-9._@-]{0,126}[A-Za-z0-9])?$`, `lower-case letters, upper-case letters, digits, hyphens, underscores, dots and "@"; ` +
			`1 to 128 characters; starting with a lower-case letter or an upper-case letter or a digit`},
		{`.*`, "a set format"},
		{`[^/]+`, "at least 1 character"},
		{`(`, "a set format"},
	} {
		got := PatternInWords(tc.pattern)
		require.Equal(t, tc.want, got, "pattern %s", tc.pattern)
		require.NotContains(t, got, tc.pattern)
		require.False(t, strings.ContainsAny(got, `^$[]\{}*+?|`), "%q reads like a pattern", got)
	}
}
