package run

import "context"

// appliedBeforeWindow bounds how many of a workspace's applied runs AppliedBefore reads.
const appliedBeforeWindow = 50

// AppliedBefore is the newest run that applied a change to run r's workspace before r
// (an apply or a destroy that succeeded, with a smaller number): what r's inputs are
// compared with. prev is nil when nothing was applied before r; known is false when
// the answer lies beyond the runs read (more than appliedBeforeWindow applies after r):
// then nothing may be claimed. Another organization's or a hidden workspace has none.
func (s *Reads) AppliedBefore(ctx context.Context, r Run) (prev *Run, known bool, err error) {
	runs, err := s.k.list(ctx, listQuery{workspaceID: r.WorkspaceID, states: []State{Succeeded}, kinds: []Kind{KindApply, KindDestroy},
		order: "number DESC", limit: appliedBeforeWindow})
	if err != nil {
		return nil, false, err
	}
	for i := range runs {
		if runs[i].Number < r.Number {
			return &runs[i], true, nil
		}
	}
	return nil, len(runs) < appliedBeforeWindow, nil
}
