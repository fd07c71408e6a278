package promotion

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/run"
)

// TestDifferences: a promotion may change capacity, count, retention and scaling
// inputs; any other kind, or none named, is fixed; an input set on one side only
// differs; a sensitive one is named without its values.
func TestDifferences(t *testing.T) {
	t.Parallel()
	source := []run.InputValue{
		{Name: "size", Divergence: "capacity", Value: `"small"`, Set: true},
		{Name: "replicas", Divergence: "scaling", Value: `2`, Set: true},
		{Name: "cidr", Label: "Network", Divergence: "fixed", Value: `"10.30.0.0/16"`, Set: true},
		{Name: "logging", Value: `true`, Set: true}, // no kind named: fixed
		{Name: "password", Divergence: "fixed", Sensitive: true, Value: `"hunter2"`, Set: true},
		{Name: "tags", Divergence: "fixed"},
	}
	same := append([]run.InputValue(nil), source...)
	require.Empty(t, differences(source, same))

	asked := []run.InputValue{
		{Name: "size", Divergence: "capacity", Value: `"large"`, Set: true},
		{Name: "replicas", Divergence: "scaling", Value: `5`, Set: true},
		{Name: "cidr", Label: "Network", Divergence: "fixed", Value: `"10.40.0.0/16"`, Set: true},
		{Name: "logging", Value: `false`, Set: true},
		{Name: "password", Divergence: "fixed", Sensitive: true, Value: `"other"`, Set: true},
		{Name: "tags", Divergence: "fixed", Value: `"team"`, Set: true},
	}
	require.Equal(t, []Difference{
		{Name: "cidr", Label: "Network", Divergence: "fixed", Source: "10.30.0.0/16", Requested: "10.40.0.0/16"},
		{Name: "logging", Divergence: "fixed", Source: "true", Requested: "false"},
		{Name: "password", Divergence: "fixed", Source: "(sensitive)", Requested: "(sensitive)", Sensitive: true},
		{Name: "tags", Divergence: "fixed", Source: "(none)", Requested: "team"},
	}, differences(source, asked))
	require.True(t, MayDiverge("retention"))
	require.False(t, MayDiverge("fixed"))
	require.False(t, MayDiverge(""))
}
