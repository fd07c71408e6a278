package policies

import (
	"encoding/json"
	"strconv"
	"strings"
)

// redactor replaces, in a text, every occurrence of a sensitive string by
// SensitiveMask: defence in depth, should a rule or an error copy one from somewhere
// the masking did not reach. It looks for each string as is and as it appears
// quoted in Rego's and JSON's renderings of a value; overlapping or adjacent
// occurrences become one mask.
type redactor struct {
	// byPrefix lists the strings looked for by their first minPrefix bytes.
	byPrefix map[string][]string
}

// minPrefix bytes start every string a redactor looks for (minSecretLen runes are
// at least as many bytes).
const minPrefix = minSecretLen

func newRedactor(secrets []string) *redactor {
	if len(secrets) == 0 {
		return nil
	}
	r := &redactor{byPrefix: make(map[string][]string, len(secrets))}
	seen := make(map[string]struct{}, len(secrets))
	add := func(s string) {
		if len(s) < minPrefix {
			return
		}
		if _, dup := seen[s]; dup {
			return
		}
		seen[s] = struct{}{}
		r.byPrefix[s[:minPrefix]] = append(r.byPrefix[s[:minPrefix]], s)
	}
	for _, s := range secrets {
		add(s)
		q := strconv.Quote(s)
		add(q[1 : len(q)-1])
		if j, err := json.Marshal(s); err == nil {
			add(string(j[1 : len(j)-1]))
		}
	}
	return r
}

// redact returns s with every sensitive string in it masked. A nil redactor
// changes nothing.
func (r *redactor) redact(s string) string {
	if r == nil || len(s) < minPrefix {
		return s
	}
	// Find the covered byte ranges, in order of their start.
	var spans [][2]int
	for i := 0; i+minPrefix <= len(s); i++ {
		cands, ok := r.byPrefix[s[i:i+minPrefix]]
		if !ok {
			continue
		}
		end := -1
		for _, c := range cands {
			if i+len(c) > end && strings.HasPrefix(s[i:], c) {
				end = i + len(c)
			}
		}
		if end < 0 {
			continue
		}
		if n := len(spans); n > 0 && i <= spans[n-1][1] {
			spans[n-1][1] = max(spans[n-1][1], end)
		} else {
			spans = append(spans, [2]int{i, end})
		}
	}
	if spans == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	prev := 0
	for _, sp := range spans {
		b.WriteString(s[prev:sp[0]])
		b.WriteString(SensitiveMask)
		prev = sp[1]
	}
	b.WriteString(s[prev:])
	return b.String()
}
