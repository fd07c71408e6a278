package run

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSummarizePlan(t *testing.T) {
	t.Parallel()
	plan := []byte(`{"resource_changes":[
	 {"change":{"actions":["create"]}},{"change":{"actions":["create"]}},
	 {"change":{"actions":["update"]}},
	 {"change":{"actions":["delete","create"]}},{"change":{"actions":["create","delete"]}},
	 {"change":{"actions":["delete"]}},{"change":{"actions":["no-op"]}},{"change":{"actions":["read"]}}]}`)
	s, err := SummarizePlan(plan)
	require.NoError(t, err)
	require.Equal(t, Summary{Create: 2, Update: 1, Replace: 2, Delete: 1, NoOp: 1, Read: 1}, s)
	require.Equal(t, 6, s.Changes())

	_, err = SummarizePlan([]byte(`{"resource_changes":[{"change":{"actions":["explode"]}}]}`))
	require.ErrorContains(t, err, "unknown actions")
	_, err = SummarizePlan([]byte(`not json`))
	require.Error(t, err)
}
