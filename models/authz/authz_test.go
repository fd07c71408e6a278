package authz_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/errs"
)

func TestPermissionTable(t *testing.T) {
	t.Parallel()
	want := map[authz.Permission][]authz.Role{
		authz.PermOrgRead:            {authz.RoleViewer, authz.RoleOperator, authz.RoleAdmin, authz.RoleOwner, authz.RoleAuditor},
		authz.PermEnvironmentsManage: {authz.RoleAdmin, authz.RoleOwner},
		authz.PermAuditRead:          {authz.RoleAdmin, authz.RoleOwner, authz.RoleAuditor},
		authz.PermProvisioningPlan:   {authz.RoleOperator, authz.RoleAdmin, authz.RoleOwner},
		authz.PermProvisioningApply:  {authz.RoleOperator, authz.RoleAdmin, authz.RoleOwner},
		authz.PermPoliciesManage:     {authz.RoleAdmin, authz.RoleOwner},
		authz.PermMatrixManage:       {authz.RoleOwner},
		authz.PermMembersManage:      {authz.RoleAdmin, authz.RoleOwner},
		authz.PermEntitlementsManage: {authz.RoleOwner},
		authz.PermWebhooksManage:     {authz.RoleAdmin, authz.RoleOwner},
	}
	for perm, allowed := range want {
		for _, role := range authz.Roles {
			s := authz.Subject{UserID: "u", OrganizationID: "org-1", Role: role}
			require.Equal(t, contains(allowed, role), s.Can(perm), "%s %s", role, perm)
		}
		// Without an organization nobody holds anything; an unknown role holds nothing.
		require.False(t, authz.Subject{Role: authz.RoleOwner}.Can(perm))
		require.False(t, authz.Subject{OrganizationID: "org-1", Role: "superuser"}.Can(perm))
	}
}

func contains(roles []authz.Role, r authz.Role) bool {
	for _, x := range roles {
		if x == r {
			return true
		}
	}
	return false
}

func TestRequire(t *testing.T) {
	t.Parallel()
	_, err := authz.Require(context.Background(), authz.PermOrgRead)
	require.ErrorIs(t, err, errs.ErrUnauthenticated)

	ctx := authz.WithSubject(context.Background(), authz.Subject{UserID: "u", OrganizationID: "org-1", Role: authz.RoleViewer})
	_, err = authz.Require(ctx, authz.PermEnvironmentsManage)
	require.True(t, errors.Is(err, errs.ErrForbidden))
	s, err := authz.Require(ctx, authz.PermOrgRead)
	require.NoError(t, err)
	require.Equal(t, "u", s.UserID)
}

func TestRoleLadder(t *testing.T) {
	t.Parallel()
	require.True(t, authz.RoleOwner.AtLeast(authz.RoleAdmin))
	require.True(t, authz.RoleAdmin.AtLeast(authz.RoleAdmin))
	require.False(t, authz.RoleOperator.AtLeast(authz.RoleAdmin))
	require.False(t, authz.RoleAuditor.AtLeast(authz.RoleViewer), "the auditor is outside the ladder")
}
