package views

import (
	"regexp"
	"strings"
)

type textPart struct{ Text, URL string }

var urlPattern = regexp.MustCompile(`https?://[^\s<>"]+`)

// textLinks splits text into plain parts and http(s) URLs.
func textLinks(text string) []textPart {
	var out []textPart
	last := 0
	for _, m := range urlPattern.FindAllStringIndex(text, -1) {
		u := strings.TrimRight(text[m[0]:m[1]], ".,;:)")
		end := m[0] + len(u)
		if m[0] > last {
			out = append(out, textPart{Text: text[last:m[0]]})
		}
		out = append(out, textPart{URL: u})
		last = end
	}
	if last < len(text) {
		out = append(out, textPart{Text: text[last:]})
	}
	return out
}
