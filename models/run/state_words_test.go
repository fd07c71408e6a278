package run

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryStateAndKindHasWords: every state of the table and every kind reads as words
// of their own (not the code, not another's words); Kinds names every Kind constant
// kind.go declares, so a kind added there without words fails here.
func TestEveryStateAndKindHasWords(t *testing.T) {
	seen := map[string]State{}
	for _, s := range States {
		w := s.Words()
		require.NotEqual(t, string(s), w, "state %s has no words", s)
		require.NotContains(t, w, "_", "state %s reads as a code", s)
		_, twice := seen[w]
		require.False(t, twice, "states %s and %s read the same: %q", seen[w], s, w)
		seen[w] = s
	}
	require.Len(t, stateWords, len(States), "words for a state the table does not know")
	require.Equal(t, "NOT_A_STATE", State("NOT_A_STATE").Words(), "an unknown state reads as its code")

	src, err := os.ReadFile("kind.go")
	require.NoError(t, err)
	declared := regexp.MustCompile(`(?m)^\s+(Kind[A-Za-z]+) +Kind = "([a-z_]+)"`).FindAllStringSubmatch(string(src), -1)
	require.GreaterOrEqual(t, len(declared), 5, "the scan finds kind.go's constants")
	for _, m := range declared {
		require.Contains(t, Kinds, Kind(m[2]), "%s (%q) is missing from Kinds", m[1], m[2])
	}
	require.Len(t, Kinds, len(declared))
	for _, k := range Kinds {
		require.NotEqual(t, string(k), k.Words(), "kind %s has no words", k)
		require.NotEmpty(t, k.Means(), "kind %s does not say what it does", k)
	}
	require.Len(t, kindWords, len(Kinds), "words for a kind Kinds does not list")
}
