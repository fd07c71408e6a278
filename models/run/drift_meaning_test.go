package run

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// kubeRefresh is what hashicorp/kubernetes 1.13.4 reads back right after creating a
// namespace and a quota: empty annotations and scopes where the state holds null.
const kubeRefresh = `{"format_version":"1.2","resource_drift":[
 {"address":"module.team-namespace.kubernetes_namespace.this","mode":"managed","type":"kubernetes_namespace",
  "change":{"actions":["update"],"before":{"id":"payments","metadata":[{"annotations":null,"labels":{"a":"b"},"name":"payments"}]},
            "after":{"id":"payments","metadata":[{"annotations":{},"labels":{"a":"b"},"name":"payments"}]}}},
 {"address":"module.team-namespace.kubernetes_resource_quota.this","mode":"managed","type":"kubernetes_resource_quota",
  "change":{"actions":["update"],"before":{"id":"payments/team-quota","spec":[{"hard":{"pods":"10"}}]},
            "after":{"id":"payments/team-quota","spec":[{"hard":{"pods":"10"},"scopes":[]}]}}}
]}`

// A provider's empty collection where the state holds null is no drift: a verification
// right after an apply converges, and a drift check finds nothing. Filling or emptying a
// collection that someone changed still is.
func TestDriftIgnoresEmptyForNull(t *testing.T) {
	t.Parallel()
	obs, err := DriftOf([]byte(kubeRefresh))
	require.NoError(t, err)
	require.Empty(t, obs)
	drifted, err := Drifted([]byte(kubeRefresh))
	require.NoError(t, err)
	require.False(t, drifted)

	for name, after := range map[string]string{
		"annotation added":   `{"id":"payments","metadata":[{"annotations":{"owner":"x"},"labels":{"a":"b"},"name":"payments"}]}`,
		"labels emptied":     `{"id":"payments","metadata":[{"annotations":null,"labels":{},"name":"payments"}]}`,
		"attribute appeared": `{"id":"payments","metadata":[{"annotations":null,"labels":{"a":"b"},"name":"payments"}],"finalizers":["x"]}`,
	} {
		plan := `{"resource_drift":[{"address":"k.ns","mode":"managed","type":"kubernetes_namespace","change":{"actions":["update"],
		  "before":{"id":"payments","metadata":[{"annotations":null,"labels":{"a":"b"},"name":"payments"}]},"after":` + after + `}}]}`
		drifted, err := Drifted([]byte(plan))
		require.NoError(t, err)
		require.True(t, drifted, name)
	}
}
