package catalog

import (
	"fmt"
	"regexp/syntax"
	"strings"
)

// PatternInWords says what an input's pattern allows as a person filling the form
// reads it: "lower-case letters, digits and hyphens; 3 to 41 characters; starting with
// a lower-case letter". It says only what it can read from the pattern for certain and
// never shows the pattern itself; when it can read nothing it says "a set format"
// (the input's help text says the rest). Pages show this; the API keeps the pattern.
func PatternInWords(pattern string) string {
	re, err := syntax.Parse(`^(?:`+pattern+`)$`, syntax.Perl)
	if err != nil {
		return "a set format"
	}
	var parts []string
	if allowed := allowedRunes(re); printableASCII(allowed) {
		if s := allowed.describe(); s != "" {
			parts = append(parts, s)
		}
	}
	if s := lengthWords(lengthRange(re)); s != "" {
		parts = append(parts, s)
	}
	if s := startWords(re); s != "" {
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "a set format"
	}
	return strings.Join(parts, "; ")
}

// printableASCII reports whether every rune of the set is a printable ASCII
// character: a set reaching past them (".", "[^/]") has no short name people know.
func printableASCII(rs runeSet) bool {
	for i := 0; i+1 < len(rs); i += 2 {
		if rs[i] < ' ' || rs[i+1] > '~' {
			return false
		}
	}
	return len(rs) > 0
}

// lengthWords says a length range: "3 to 41 characters", "at least 2 characters",
// "exactly 1 character"; "" when it bounds nothing.
func lengthWords(lo, hi int) string {
	switch {
	case hi < 0 && lo <= 0:
		return ""
	case hi < 0:
		return fmt.Sprintf("at least %s", characters(lo))
	case lo == hi:
		return fmt.Sprintf("exactly %s", characters(lo))
	case lo <= 0:
		return fmt.Sprintf("at most %s", characters(hi))
	}
	return fmt.Sprintf("%d to %d characters", lo, hi)
}

func characters(n int) string {
	if n == 1 {
		return "1 character"
	}
	return fmt.Sprintf("%d characters", n)
}

// startWords says how every value starts, when the pattern fixes it: a literal prefix
// (`starting with "10."`) or a first character class ("starting with a lower-case
// letter").
func startWords(re *syntax.Regexp) string {
	if p := literalPrefix(re); p != "" {
		return fmt.Sprintf("starting with %q", p)
	}
	if first := firstClass(re); first != nil && printableASCII(first) && (len(first) > 2 || first[0] != first[1]) {
		if one := first.describeOne(); one != "" {
			return "starting with " + one
		}
	}
	return ""
}

// literalPrefix is the text every match starts with, after the anchors: "" when the
// pattern starts with anything but literal text (case-sensitive).
func literalPrefix(re *syntax.Regexp) string {
	for re.Op == syntax.OpCapture || (re.Op == syntax.OpConcat && len(re.Sub) > 0) {
		if re.Op == syntax.OpCapture {
			re = re.Sub[0]
			continue
		}
		i := 0
		for i < len(re.Sub) && (re.Sub[i].Op == syntax.OpBeginText || re.Sub[i].Op == syntax.OpBeginLine) {
			i++
		}
		if i == len(re.Sub) {
			return ""
		}
		re = re.Sub[i]
	}
	if re.Op != syntax.OpLiteral || re.Flags&syntax.FoldCase != 0 {
		return ""
	}
	s := string(re.Rune)
	for _, r := range s {
		if r < ' ' || r > '~' {
			return ""
		}
	}
	return s
}
