package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A value that does not match its input's pattern is told what is wrong, not shown the
// hint again.
func TestExplainMismatch(t *testing.T) {
	t.Parallel()
	const name = `^[a-z][a-z0-9-]{2,40}$`
	for _, tc := range []struct{ pattern, value, want string }{
		{name, "Bad_Name", `"B", "_" and "N" are not allowed here: use lower-case letters, digits and hyphens.`},
		{name, "my bucket", `a space is not allowed here: use lower-case letters, digits and hyphens.`},
		{name, "ab", "Too short: at least 3 characters (this has 2)."},
		{name, "a" + string(make([]byte, 0)) + "bcdefghijklmnopqrstuvwxyzabcdefghijklmnopq", "Too long: at most 41 characters (this has 43)."},
		{name, "1bucket", "Start with a lower-case letter."},
		{name, "-bucket", "Start with a lower-case letter."},
		// A pattern of literals tells little by characters: the caller's help text speaks.
		{`^10\.[0-9]{1,3}\.0\.0/16$`, "10.1.0.0/24", ""},
		{`^10\.[0-9]{1,3}\.0\.0/16$`, "10.1.0.0 /16", `a space is not allowed here: use digits, dots and slashes.`},
	} {
		require.Equal(t, tc.want, explainMismatch(tc.pattern, tc.value), "%s against %s", tc.value, tc.pattern)
	}
}

// FuzzExplainMismatch: any pattern and value give a message or "", never a panic, and a
// value the pattern matches is never told it is wrong.
func FuzzExplainMismatch(f *testing.F) {
	for _, seed := range [][2]string{{`^[a-z][a-z0-9-]{2,40}$`, "Bad_Name"}, {`^10\.[0-9]{1,3}\.0\.0/16$`, "10.1.0.0/24"},
		{`(a|bc)+x?`, "abcx"}, {`[^a-c]*`, "abc"}, {`.{3}`, "ab"}, {`\d+|[[:upper:]]{2,}`, ""}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, value string) {
		re, err := compilePattern(pattern)
		if err != nil {
			return
		}
		msg := explainMismatch(pattern, value)
		if re.MatchString(value) && msg != "" {
			t.Fatalf("%q matches %q but was told %q", value, pattern, msg)
		}
	})
}
