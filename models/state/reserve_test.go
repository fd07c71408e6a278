package state_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/state"
	"gantry/models/state/statetest"
)

// TestApplyReservesTheStateLock: Gantry takes the state lock for an apply before tofu
// runs, with the next fence. Meanwhile another run of the workspace can neither lock
// nor write; the apply's tofu takes the reservation over as the same holding (same
// fence), writes under its own lock id and unlocks. A second reservation while another
// run holds the lock is refused, and fencing the run releases a reservation tofu never
// took.
func TestApplyReservesTheStateLock(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	ctx := context.Background()
	other := f.Run(t, f.OrgID, f.WorkspaceID)
	applyUser, applyPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	apply, err := f.Service.Authenticate(ctx, applyUser, applyPass)
	require.NoError(t, err)
	otherUser, otherPass := f.Issue(t, f.WorkspaceID, other, state.PhaseApply)
	intruder, err := f.Service.Authenticate(ctx, otherUser, otherPass)
	require.NoError(t, err)

	fence, err := f.Service.Reserve(ctx, f.OrgID, f.WorkspaceID, f.RunID, applyUser)
	require.NoError(t, err)
	lock, err := f.Service.LockOf(ctx, f.WorkspaceID)
	require.NoError(t, err)
	require.True(t, lock.Held)
	require.Equal(t, fence, lock.Fence)
	require.Equal(t, f.RunID, lock.RunID)
	again, err := f.Service.Reserve(ctx, f.OrgID, f.WorkspaceID, f.RunID, applyUser)
	require.NoError(t, err)
	require.Equal(t, fence, again, "a retried reservation is the same holding")

	// Another run can neither lock nor write, nor reserve.
	err = f.Service.Lock(ctx, intruder, f.WorkspaceID, []byte(`{"ID":"intruder","Operation":"OperationTypePlan"}`))
	require.ErrorIs(t, err, state.ErrLocked)
	require.ErrorIs(t, f.Service.Write(ctx, intruder, f.WorkspaceID, "", statetest.StateJSON(1, "lin-reserve", "")), state.ErrLocked)
	_, err = f.Service.Reserve(ctx, f.OrgID, f.WorkspaceID, other, otherUser)
	require.ErrorIs(t, err, state.ErrLocked)
	// Nor can the reservation's own lock id be guessed by another credential of the run.
	planUser, planPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhasePlan)
	plan, err := f.Service.Authenticate(ctx, planUser, planPass)
	require.NoError(t, err)
	require.ErrorIs(t, f.Service.Lock(ctx, plan, f.WorkspaceID, []byte(`{"ID":"tofu-plan","Operation":"OperationTypePlan"}`)), state.ErrLocked)

	// The apply's tofu takes it over, writes and unlocks.
	info := []byte(`{"ID":"tofu-lock-1","Operation":"OperationTypeApply","Who":"tofu"}`)
	require.NoError(t, f.Service.Lock(ctx, apply, f.WorkspaceID, info))
	lock, err = f.Service.LockOf(ctx, f.WorkspaceID)
	require.NoError(t, err)
	require.Equal(t, "tofu-lock-1", lock.LockID)
	require.Equal(t, fence, lock.Fence, "the same holding: the fence did not move")
	require.NoError(t, f.Service.Write(ctx, apply, f.WorkspaceID, "tofu-lock-1", statetest.StateJSON(1, "lin-reserve", "")))
	require.NoError(t, f.Service.Unlock(ctx, apply, f.WorkspaceID, info))
	lock, err = f.Service.LockOf(ctx, f.WorkspaceID)
	require.NoError(t, err)
	require.False(t, lock.Held)

	// A reservation tofu never took is released when the run is fenced.
	fence2, err := f.Service.Reserve(ctx, f.OrgID, f.WorkspaceID, other, otherUser)
	require.NoError(t, err)
	require.Greater(t, fence2, fence, "every holding gets the next fence")
	require.NoError(t, f.Service.FenceAndRelease(ctx, f.WorkspaceID, other, "the apply died before tofu ran"))
	lock, err = f.Service.LockOf(ctx, f.WorkspaceID)
	require.NoError(t, err)
	require.False(t, lock.Held)
	require.Greater(t, lock.Fence, fence2)
}
