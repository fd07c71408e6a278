package timeline

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/policy"
	"gantry/models/run"
	"gantry/policies"
)

// TestStagesInWords: the stages are named as a person says them (no tool command
// lines), and the policy count has the right plural.
func TestStagesInWords(t *testing.T) {
	t.Parallel()
	r := run.Run{ID: "run-1", Kind: run.KindPlanOnly, State: run.Planned, TemplateName: "bucket", TemplateVersion: "1.1.1",
		PlanDigest: "sha256:abc"}
	passed := policies.Result{RuleID: "allowed_regions", Passed: true}
	failed := policies.Result{RuleID: "required_labels", Enforcement: policies.Advisory}
	for _, tc := range []struct {
		results []policies.Result
		want    string
	}{
		{[]policies.Result{passed}, "1 of 1 rule passed"},
		{[]policies.Result{failed}, "0 of 1 rule passed"},
		{[]policies.Result{passed, failed}, "1 of 2 rules passed"},
	} {
		g := run.Gates{Evaluation: &policy.Evaluation{Results: tc.results, CreatedAt: time.Now()}}
		stages := Of(r, nil, g)
		names := make([]string, len(stages))
		for i, st := range stages {
			names[i] = st.Name
			require.NotContains(t, st.Name, "-json", "a stage names a tool's command line")
			require.NotContains(t, st.Name, "(init", "a stage names a tool's command line")
		}
		require.Equal(t, "Plan", names[2])
		require.Equal(t, "Policy decision", stages[3].Name)
		require.True(t, strings.HasPrefix(stages[3].Detail, tc.want), "%q does not start with %q", stages[3].Detail, tc.want)
	}
}
