package run

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/listing"
)

// TestDefaultInboxSort: an owner, who decides the risk-3 runs, sees the riskiest first;
// every other role keeps the decisions that close first. A table over the rule, no
// database.
func TestDefaultInboxSort(t *testing.T) {
	t.Parallel()
	riskiest, closing := listing.Sort{Key: SortRisk, Desc: true}, listing.Sort{Key: SortDeadline}
	want := map[authz.Role]listing.Sort{
		authz.RoleOwner: riskiest, authz.RoleAdmin: closing, authz.RoleOperator: closing,
		authz.RoleViewer: closing, authz.RoleAuditor: closing, "": closing,
	}
	require.Len(t, want, len(authz.Roles)+1, "every role, and none")
	for role, sort := range want {
		require.Equal(t, sort, DefaultInboxSort(role), "role %q", role)
	}
	for _, s := range want {
		require.Contains(t, InboxSortKeys(), s.Key)
	}
}
