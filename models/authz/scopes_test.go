package authz

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTokenScopesNarrowTheRole walks the scope table: a token does what one of its
// scopes grants and its holder's role allows, nothing else; a person's session is the
// role alone.
func TestTokenScopesNarrowTheRole(t *testing.T) {
	t.Parallel()
	all := []Permission{PermOrgRead, PermEnvironmentsManage, PermAuditRead, PermAuditExport, PermProvisioningPlan, PermProvisioningApply,
		PermRunsApply, PermPoliciesManage, PermMatrixManage, PermMembersManage, PermEntitlementsManage, PermWebhooksManage}
	for _, role := range Roles {
		person := Subject{UserID: "u", OrganizationID: "org", Role: role}
		for _, sc := range Scopes {
			token := person
			token.TokenID, token.Scopes = "tok-1", []Scope{sc}
			for _, p := range all {
				want := role.allows(p) && slices.Contains(sc.Permissions(), p)
				require.Equal(t, want, token.Can(p), "%s with scope %s: %s", role, sc, p)
				require.Equal(t, role.allows(p), person.Can(p), "a session of %s: %s", role, p)
			}
		}
	}
	// Scopes add up; none reads less than the holder may see, none does more than the role.
	both := Subject{UserID: "u", OrganizationID: "org", Role: RoleAdmin, TokenID: "tok-2", Scopes: []Scope{ScopePlan, ScopeDecide}}
	require.True(t, both.Can(PermProvisioningPlan))
	require.True(t, both.Can(PermProvisioningApply))
	require.False(t, both.Can(PermRunsApply), "plan is not apply")
	require.False(t, both.Can(PermEnvironmentsManage))
	viewer := Subject{UserID: "u", OrganizationID: "org", Role: RoleViewer, TokenID: "tok-3", Scopes: Scopes}
	require.False(t, viewer.Can(PermProvisioningPlan), "every scope on a viewer's token still plans nothing")
	require.False(t, Subject{UserID: "u", OrganizationID: "org", Role: RoleOwner, TokenID: "tok-4"}.Can(PermOrgRead), "a token without scopes does nothing")
	for _, sc := range Scopes {
		require.True(t, sc.Valid())
		require.Contains(t, sc.Permissions(), PermOrgRead, "every scope reads")
	}
	require.False(t, Scope("write").Valid())
}

// TestScopeTableInTheDocs: docs/api.md's scope table says what Scope.Permissions does,
// row for row.
func TestScopeTableInTheDocs(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/api.md")
	require.NoError(t, err)
	row := regexp.MustCompile("(?m)^\\| `([a-z]+)` \\| (`[a-z.]+`(?:, `[a-z.]+`)*) \\|$")
	seen := map[Scope]bool{}
	for _, m := range row.FindAllStringSubmatch(string(raw), -1) {
		sc := Scope(m[1])
		require.True(t, sc.Valid(), "docs/api.md names scope %q", sc)
		var perms []Permission
		for _, p := range strings.Split(m[2], ", ") {
			perms = append(perms, Permission(strings.Trim(p, "`")))
		}
		require.Equal(t, sc.Permissions(), perms, "docs/api.md's row of scope %s", sc)
		seen[sc] = true
	}
	for _, sc := range Scopes {
		require.True(t, seen[sc], "docs/api.md has no row for scope %s", sc)
	}
}
