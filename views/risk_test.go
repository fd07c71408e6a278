package views

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestApproveLabel: a destructive plan's approve control restates what it destroys and
// replaces; a harmless one reads as before.
func TestApproveLabel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    DecisionProps
		want string
	}{
		{DecisionProps{Counts: PlanCounts{Create: 3, Update: 1}}, "Approve this plan"},
		{DecisionProps{Destructive: true, Counts: PlanCounts{Destroy: 1}}, "Approve: destroys 1"},
		{DecisionProps{Destructive: true, Counts: PlanCounts{Create: 1, Replace: 2}}, "Approve: replaces 2"},
		{DecisionProps{Destructive: true, Counts: PlanCounts{Destroy: 1, Replace: 2}}, "Approve: destroys 1, replaces 2"},
		{DecisionProps{Destructive: true}, "Approve this destroy run"},
	} {
		require.Equal(t, c.want, approveLabel(c.d), "%+v", c.d)
	}
}

// TestRiskBadgesDiffer: every class has its own word, glyph and class, and no badge
// for a run not planned yet.
func TestRiskBadgesDiffer(t *testing.T) {
	t.Parallel()
	words, glyphs, classes := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, class := range []string{"0", "1", "2", "3"} {
		l := riskLookOf(class)
		words[l.Word], glyphs[l.Glyph], classes[l.Class] = true, true, true
		var b bytes.Buffer
		require.NoError(t, RiskBadge(class).Render(context.Background(), &b))
		require.Contains(t, b.String(), "risk "+class+" · "+l.Word)
		require.Contains(t, b.String(), `aria-hidden="true"`, "the glyph is decoration")
	}
	require.Len(t, words, 4)
	require.Len(t, glyphs, 4)
	require.Len(t, classes, 4)
	var b bytes.Buffer
	require.NoError(t, RiskBadge("").Render(context.Background(), &b))
	require.Empty(t, b.String())
}
