// Reading tofu addresses and the references of configuration expressions.

package classify

import "strings"

// cutSegment splits "a[0].b.c" into "a" and "b.c"; "a" into "a" and "".
// Instance keys after the first name are dropped.
func cutSegment(s string) (head, rest string, ok bool) {
	i := strings.IndexAny(s, ".[")
	if i < 0 {
		return s, "", s != ""
	}
	head = s[:i]
	if s[i] == '[' {
		j := skipKey(s, i)
		s = s[j:]
		if s == "" {
			return head, "", true
		}
		if s[0] != '.' {
			return head, "", true
		}
		return head, s[1:], true
	}
	return head, s[i+1:], true
}

// skipKey returns the index just after the "[...]" that starts at s[i],
// skipping quoted strings.
func skipKey(s string, i int) int {
	inStr := false
	for j := i + 1; j < len(s); j++ {
		c := s[j]
		switch {
		case inStr && c == '\\':
			j++
		case c == '"':
			inStr = !inStr
		case !inStr && c == ']':
			return j + 1
		}
	}
	return len(s)
}

// stripKeys drops the instance keys of an address:
// `module.a["x"].t.n[0]` -> `module.a.t.n`.
func stripKeys(addr string) string {
	if strings.IndexByte(addr, '[') < 0 {
		return addr
	}
	var b strings.Builder
	b.Grow(len(addr))
	for i := 0; i < len(addr); {
		if addr[i] == '[' {
			i = skipKey(addr, i)
			continue
		}
		b.WriteByte(addr[i])
		i++
	}
	return b.String()
}

// collectRefs appends the "references" found anywhere in an expression tree
// (an expression, or a nested block of expressions), skipping constant values.
func collectRefs(v any, refs []string) []string {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			switch k {
			case "constant_value":
			case "references":
				if list, ok := x.([]any); ok {
					for _, r := range list {
						if s, ok := r.(string); ok {
							refs = append(refs, s)
						}
					}
				} else {
					refs = collectRefs(x, refs)
				}
			default:
				refs = collectRefs(x, refs)
			}
		}
	case []any:
		for _, x := range t {
			refs = collectRefs(x, refs)
		}
	}
	return refs
}
