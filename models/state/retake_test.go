package state_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/state"
	"gantry/models/state/statetest"
)

// TestApplyRetakesItsOwnLock: an apply whose tofu could not unlock (the database was
// away) leaves its lock held; the runner's `tofu state push` of the errored.tfstate then
// locks under a new lock id with the same credential. That is the same holding (the
// fence stays), and only the new lock id writes from then on. Nobody else may do it: not
// another credential of the same run (a plan's, or a later apply's), nor another run.
func TestApplyRetakesItsOwnLock(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	ctx := context.Background()
	auth := func(run string, phase state.Phase) (state.Credential, string) {
		u, p := f.Issue(t, f.WorkspaceID, run, phase)
		c, err := f.Service.Authenticate(ctx, u, p)
		require.NoError(t, err)
		return c, u
	}
	apply, applyUser := auth(f.RunID, state.PhaseApply)
	fence, err := f.Service.Reserve(ctx, f.OrgID, f.WorkspaceID, f.RunID, applyUser)
	require.NoError(t, err)
	applyLock := []byte(`{"ID":"tofu-apply","Operation":"OperationTypeApply"}`)
	require.NoError(t, f.Service.Lock(ctx, apply, f.WorkspaceID, applyLock))

	// Others are refused while the apply's lock is held.
	plan, _ := auth(f.RunID, state.PhasePlan)
	later, _ := auth(f.RunID, state.PhaseApply)
	other, _ := auth(f.Run(t, f.OrgID, f.WorkspaceID), state.PhaseApply)
	for name, c := range map[string]state.Credential{"plan of the run": plan, "another apply credential of the run": later, "another run": other} {
		err := f.Service.Lock(ctx, c, f.WorkspaceID, []byte(`{"ID":"tofu-push","Operation":"OperationTypeInvalid"}`))
		require.ErrorIs(t, err, state.ErrLocked, name)
	}

	// The push takes it again: same holding, and the apply's lock id writes no more.
	pushLock := []byte(`{"ID":"tofu-push","Operation":"OperationTypeInvalid"}`)
	require.NoError(t, f.Service.Lock(ctx, apply, f.WorkspaceID, pushLock))
	lock, err := f.Service.LockOf(ctx, f.WorkspaceID)
	require.NoError(t, err)
	require.Equal(t, "tofu-push", lock.LockID)
	require.Equal(t, f.RunID, lock.RunID)
	require.Equal(t, fence, lock.Fence, "the same holding: the fence did not move")
	require.ErrorIs(t, f.Service.Write(ctx, apply, f.WorkspaceID, "tofu-apply", statetest.StateJSON(1, "lin-retake", "")), state.ErrLocked)
	require.NoError(t, f.Service.Write(ctx, apply, f.WorkspaceID, "tofu-push", statetest.StateJSON(1, "lin-retake", "")))
	require.NoError(t, f.Service.Unlock(ctx, apply, f.WorkspaceID, pushLock))
	lock, err = f.Service.LockOf(ctx, f.WorkspaceID)
	require.NoError(t, err)
	require.False(t, lock.Held)
}
