package catalog

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// explainMismatch says what is wrong with s, which does not match pattern, in words a
// person filling the form can act on: characters the pattern never allows, a length
// outside what it allows, or a first character it does not start with. It returns ""
// when it cannot tell (the caller falls back to the input's help text).
func explainMismatch(pattern, s string) string {
	re, err := syntax.Parse(`^(?:`+pattern+`)$`, syntax.Perl)
	if err != nil {
		return ""
	}
	// Not simplified: Simplify spells a repeat out, which can be large.
	allowed := allowedRunes(re)
	var bad []string
	for _, r := range s {
		if !allowed.has(r) {
			if q := quoteRune(r); !slices.Contains(bad, q) {
				bad = append(bad, q)
			}
		}
	}
	if len(bad) > 0 {
		verb := "is"
		if len(bad) > 1 {
			verb = "are"
		}
		return fmt.Sprintf("%s %s not allowed here: use %s.", joinWords(bad), verb, allowed.describe())
	}
	n := utf8.RuneCountInString(s)
	if lo, hi := lengthRange(re); n < lo {
		return fmt.Sprintf("Too short: at least %d characters (this has %d).", lo, n)
	} else if hi >= 0 && n > hi {
		return fmt.Sprintf("Too long: at most %d characters (this has %d).", hi, n)
	}
	if first := firstClass(re); first != nil && s != "" {
		r, _ := utf8.DecodeRuneInString(s)
		if !first.has(r) {
			return fmt.Sprintf("Start with %s.", first.describeOne())
		}
	}
	return ""
}

// runeSet is a set of rune ranges, as syntax gives them: lo, hi, lo, hi, ….
type runeSet []rune

func (rs runeSet) has(r rune) bool {
	for i := 0; i+1 < len(rs); i += 2 {
		if rs[i] <= r && r <= rs[i+1] {
			return true
		}
	}
	return false
}

// allowedRunes is every rune any part of re can match.
func allowedRunes(re *syntax.Regexp) runeSet {
	var out runeSet
	var walk func(*syntax.Regexp)
	walk = func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpLiteral:
			for _, r := range re.Rune {
				out = append(out, r, r)
			}
		case syntax.OpCharClass:
			out = append(out, re.Rune...)
		case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			out = append(out, 0, utf8.MaxRune)
		}
		for _, sub := range re.Sub {
			walk(sub)
		}
	}
	walk(re)
	return out
}

// lengthRange is how many runes re matches at least and at most (-1: no bound).
func lengthRange(re *syntax.Regexp) (lo, hi int) {
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune), len(re.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1, 1
	case syntax.OpCapture:
		return lengthRange(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			l, h := lengthRange(sub)
			lo += l
			if hi >= 0 {
				if h < 0 {
					hi = -1
				} else {
					hi += h
				}
			}
		}
		return lo, hi
	case syntax.OpAlternate:
		lo, hi = -1, 0
		for _, sub := range re.Sub {
			l, h := lengthRange(sub)
			if lo < 0 || l < lo {
				lo = l
			}
			if hi >= 0 && (h < 0 || h > hi) {
				hi = h
			}
		}
		return max(lo, 0), hi
	case syntax.OpQuest:
		_, h := lengthRange(re.Sub[0])
		return 0, h
	case syntax.OpStar:
		return 0, -1
	case syntax.OpPlus:
		l, _ := lengthRange(re.Sub[0])
		return l, -1
	case syntax.OpRepeat:
		l, h := lengthRange(re.Sub[0])
		lo = l * re.Min
		if re.Max < 0 || h < 0 {
			return lo, -1
		}
		return lo, h * re.Max
	}
	return 0, 0 // anchors and empty matches take no characters
}

// firstClass is the character class the pattern must start with, when it is one
// (after the anchors).
func firstClass(re *syntax.Regexp) runeSet {
	for {
		switch re.Op {
		case syntax.OpCapture:
			re = re.Sub[0]
			continue
		case syntax.OpConcat:
			for _, sub := range re.Sub {
				if sub.Op == syntax.OpBeginText || sub.Op == syntax.OpBeginLine {
					continue
				}
				if sub.Op == syntax.OpCapture {
					return firstClass(sub)
				}
				if sub.Op == syntax.OpCharClass {
					return runeSet(sub.Rune)
				}
				if sub.Op == syntax.OpLiteral && len(sub.Rune) > 0 {
					return runeSet{sub.Rune[0], sub.Rune[0]}
				}
				return nil
			}
		}
		return nil
	}
}

// Names of the ranges people know.
var rangeNames = []struct {
	lo, hi    rune
	many, one string
}{
	{'a', 'z', "lower-case letters", "a lower-case letter"},
	{'A', 'Z', "upper-case letters", "an upper-case letter"},
	{'0', '9', "digits", "a digit"},
	{'-', '-', "hyphens", "a hyphen"},
	{'_', '_', "underscores", "an underscore"},
	{'.', '.', "dots", "a dot"},
	{'/', '/', "slashes", "a slash"},
}

// describe names the set in words: "lower-case letters, digits and hyphens".
func (rs runeSet) describe() string {
	var parts []string
	for _, part := range rs.parts() {
		parts = append(parts, part.many)
	}
	return joinWords(parts)
}

// describeOne names one character of the set: "a lower-case letter".
func (rs runeSet) describeOne() string {
	var parts []string
	for _, part := range rs.parts() {
		parts = append(parts, part.one)
	}
	return strings.Join(parts, " or ")
}

type namedPart struct {
	many, one string
	rank      int // the order of rangeNames; others after them
}

// parts names the set's ranges, the ones people know first.
func (rs runeSet) parts() []namedPart {
	var out []namedPart
	seen := map[string]bool{}
	rs = rs.split()
	for i := 0; i+1 < len(rs); i += 2 {
		lo, hi := rs[i], rs[i+1]
		if lo == hi && rs.wider(lo) {
			continue // "1" among digits says nothing more
		}
		p := namedPart{rank: len(rangeNames)}
		for rank, n := range rangeNames {
			if n.lo == lo && n.hi == hi {
				p = namedPart{n.many, n.one, rank}
			}
		}
		if p.many == "" {
			if lo == hi {
				p.many, p.one = quoteRune(lo), quoteRune(lo)
			} else {
				p.many, p.one = "characters from "+quoteRune(lo)+" to "+quoteRune(hi), "a character from "+quoteRune(lo)+" to "+quoteRune(hi)
			}
		}
		if !seen[p.many] {
			seen[p.many] = true
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b namedPart) int { return a.rank - b.rank })
	return out
}

// split cuts each printable ASCII range around the named ranges inside it, and spells
// out the few characters left beside them: the parser merges [A-Z@] into "@" to "Z",
// which reads better as upper-case letters and "@"; [._-] becomes "-" to "." and "_".
func (rs runeSet) split() runeSet {
	var out runeSet
	for i := 0; i+1 < len(rs); i += 2 {
		lo, hi := rs[i], rs[i+1]
		if lo < ' ' || hi > '~' {
			out = append(out, lo, hi)
			continue
		}
		for lo <= hi {
			next := -1 // the first named range of several characters inside lo..hi
			for k, n := range rangeNames {
				if n.lo < n.hi && lo <= n.lo && n.hi <= hi && (next < 0 || n.lo < rangeNames[next].lo) {
					next = k
				}
			}
			end := hi
			if next >= 0 {
				end = rangeNames[next].lo - 1
			}
			switch {
			case lo > end:
			case end-lo < 3:
				for r := lo; r <= end; r++ {
					out = append(out, r, r)
				}
			default:
				out = append(out, lo, end)
			}
			if next < 0 {
				break
			}
			out = append(out, rangeNames[next].lo, rangeNames[next].hi)
			lo = rangeNames[next].hi + 1
		}
	}
	return out
}

// wider reports whether r is in a range of the set wider than r alone.
func (rs runeSet) wider(r rune) bool {
	for i := 0; i+1 < len(rs); i += 2 {
		if rs[i] < rs[i+1] && rs[i] <= r && r <= rs[i+1] {
			return true
		}
	}
	return false
}

func quoteRune(r rune) string {
	if r == ' ' {
		return "a space"
	}
	return fmt.Sprintf("%q", string(r))
}

// joinWords joins "a", "b" and "c" as "a, b and c".
func joinWords(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
