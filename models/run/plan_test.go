package run

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func planWith(actions ...string) []byte {
	var rcs []string
	for i, a := range actions {
		rcs = append(rcs, fmt.Sprintf(`{"address":"sandbox_bucket.b%d","mode":"managed","type":"sandbox_bucket","name":"b%d","change":{"actions":%s}}`, i, i, a))
	}
	return []byte(`{"format_version":"1.2","resource_changes":[` + strings.Join(rcs, ",") + `]}`)
}

func TestSummarizePlan(t *testing.T) {
	t.Parallel()
	s, err := SummarizePlan(planWith(`["create"]`, `["create"]`, `["update"]`, `["delete","create"]`, `["create","delete"]`,
		`["delete"]`, `["no-op"]`, `["read"]`))
	require.NoError(t, err)
	require.Equal(t, Summary{Create: 2, Update: 1, Replace: 2, Delete: 1, NoOp: 1, Read: 1}, s)
	require.Equal(t, 6, s.Changes())

	_, err = SummarizePlan(planWith(`["explode"]`))
	require.Error(t, err)
	_, err = SummarizePlan([]byte(`not json`))
	require.Error(t, err)
}
