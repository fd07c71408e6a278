package views

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParagraphs: a manifest's notes read as prose: the YAML's hard line breaks are
// spaces, a blank line starts a paragraph.
func TestParagraphs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		want []string
	}{
		{"", nil},
		{" \n\n \n", nil},
		{"One line.", []string{"One line."}},
		{"A bucket holds objects: destroying it deletes them. Versioning and retention changes roll\nback by a new run with the previous inputs.\n",
			[]string{"A bucket holds objects: destroying it deletes them. Versioning and retention changes roll back by a new run with the previous inputs."}},
		{"First, wrapped\nhere.\n\nSecond.\r\n\r\n\r\nThird,\r\n  indented.", []string{"First, wrapped here.", "Second.", "Third, indented."}},
	} {
		require.Equal(t, c.want, paragraphs(c.text), "%q", c.text)
	}
}
