package views

import "strings"

// paragraphs are a text's paragraphs as prose is read: a blank line starts a new one,
// and the single line breaks within one (a manifest's YAML wraps its notes at some
// column) are spaces. Blank-only text has none.
func paragraphs(text string) []string {
	var out, lines []string
	flush := func() {
		if len(lines) > 0 {
			out = append(out, strings.Join(lines, " "))
			lines = nil
		}
	}
	for _, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			flush()
			continue
		}
		lines = append(lines, line)
	}
	flush()
	return out
}
