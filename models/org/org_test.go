package org_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/audit"
	"gantry/models/db/dbtest"
	"gantry/models/org"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// TestGroupsSnapshotIsReplacedAtEverySignIn: the groups a provider asserts are kept per
// user, cleaned (blank, control characters and repeats dropped, sorted), and a later
// sign-in replaces them, taking away a group the provider no longer sends.
func TestGroupsSnapshotIsReplacedAtEverySignIn(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	s := org.NewService(gdb, audit.New(gdb))
	ctx := context.Background()
	login := org.Login{Issuer: "https://idp.example", Subject: "ann", Email: "ann@acme.test", Name: "Ann",
		Groups: []string{"qa-leads", " ", "bad\x07group", "developers", "qa-leads"}}
	first, err := s.UpsertLoginUser(ctx, login)
	require.NoError(t, err)
	require.Equal(t, []string{"developers", "qa-leads"}, first.Groups)

	login.Groups, login.Name = []string{"developers"}, "Ann B."
	again, err := s.UpsertLoginUser(ctx, login)
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID, "the same person")
	var stored org.User
	require.NoError(t, gdb.Where("id = ?", first.ID).Take(&stored).Error)
	require.Equal(t, []string{"developers"}, stored.Groups, "qa-leads is gone with the provider's word")
	require.Equal(t, "Ann B.", stored.Name)

	login.Groups = nil // a provider that sends none: the user is in no group
	_, err = s.UpsertLoginUser(ctx, login)
	require.NoError(t, err)
	require.NoError(t, gdb.Where("id = ?", first.ID).Take(&stored).Error)
	require.Empty(t, stored.Groups)
}
