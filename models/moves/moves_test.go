package moves_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/moves"
)

// TestLog: moves are kept in order; Last changes the newest in place; Annotate adds to
// what it bound and leaves an empty log alone.
func TestLog(t *testing.T) {
	t.Parallel()
	var l moves.Log[string]
	require.Nil(t, l.Last())
	l.Annotate(map[string]any{"lost": true}) // nothing to annotate: no panic, no move
	require.Empty(t, l)

	l.Add("A", "B", "first", nil)
	l.Add("B", "C", "second", map[string]any{"kept": 1})
	l.Last().Reason = "second, elevated"
	l.Annotate(map[string]any{"added": 2})
	l.Annotate(map[string]any{"kept": 3})
	require.Equal(t, moves.Log[string]{
		{From: "A", To: "B", Reason: "first"},
		{From: "B", To: "C", Reason: "second, elevated", Data: map[string]any{"kept": 3, "added": 2}},
	}, l)

	// Annotate makes the data of a move that bound none.
	one := moves.Log[string]{{From: "A", To: "B"}}
	one.Annotate(map[string]any{"x": "y"})
	require.Equal(t, map[string]any{"x": "y"}, one[0].Data)
}
