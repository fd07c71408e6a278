package pages

import (
	"context"
	"fmt"
	"time"

	"gantry/models/audit"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/models/runport"
	"gantry/models/timeline"
	"gantry/models/workspace"
)

// RunReads is what the run page reads of runs (run.Reads).
type RunReads interface {
	Get(ctx context.Context, id string) (run.Run, error)
	History(ctx context.Context, r run.Run) ([]audit.Event, error)
	// Gates reads the plan gates the timeline shows (policy evaluation, overrides).
	Gates(ctx context.Context, r run.Run) (run.Gates, error)
	Artifact(ctx context.Context, r run.Run, id *string) ([]byte, error)
	// LogChunks reads the live log of a phase of run id after chunk after.
	LogChunks(ctx context.Context, id string, phase run.JobKind, after, limit int) ([]run.LogChunk, error)
	// Queue reads where an approved run stands in its workspace's apply queue (nil:
	// it is not waiting to apply).
	Queue(ctx context.Context, r run.Run) (*run.Queue, error)
}

// RunPermissions says what the reader may do to a run now (run.Decisions): the only
// source of the controls a page shows.
type RunPermissions interface {
	Permissions(ctx context.Context, r run.Run) (run.Permissions, error)
}

// WorkspaceReader reads one workspace the reader may see (workspace.Service).
type WorkspaceReader interface {
	Get(ctx context.Context, id string) (workspace.View, error)
}

// ExecutorWaits says what an executor is still being prepared for (the runners).
type ExecutorWaits interface {
	// Waiting returns the preparation of executor name and true while it lasts.
	Waiting(name string) (runport.Preparation, bool)
}

// Runs builds the run page's read model, and what the run's API reads of it.
type Runs struct {
	Runs       RunReads
	Decisions  RunPermissions
	Workspaces WorkspaceReader
	// Executors tells a run waiting for its executor's preparation how far it has come
	// (nil: every executor is ready at once).
	Executors ExecutorWaits
}

// RunPage is the run page: the run's workspace, where it comes from (a rollback or a
// promotion; nil for a request of its own) and what moves while the run does.
type RunPage struct {
	Workspace workspace.View
	Origin    *RunOrigin
	RunLive
}

// RunLive is the part of the run page that moves while the run does: what the page's
// live stream sends again after every move.
type RunLive struct {
	Run         run.Run
	Permissions run.Permissions
	// Stages are the gates the run went through and those ahead (models/timeline).
	Stages  []timeline.Stage
	History []audit.Event // the run's audit events, oldest first
	Logs    PhaseLogs
	// Wait is the executor preparation the run's next phase waits for (nil: none).
	Wait *ExecutorWait
	// Queue is where the run stands among its workspace's runs waiting to apply, and
	// what holds the workspace (nil: it is not waiting to apply).
	Queue *run.Queue
	// StateNote says what the run's current state means for what comes next.
	StateNote string
	// Block is what stops a POLICY_BLOCKED run (nil: it is not blocked by a policy).
	Block *Block
}

// PhaseLogs are the stored logs of the phases that finished (a running phase's log
// streams in chunks instead).
type PhaseLogs struct{ Plan, Apply, Verify string }

// ExecutorWait is how far the preparation of the executor that the run's next phase
// (plan, apply or verification) waits for has come.
type ExecutorWait struct {
	runport.Preparation
	Phase string
}

// Count is the work done of the work needed, "1398 of 1920 packages": the numbers
// Percent is computed from, so the two shown side by side agree ("" before the work is
// counted). The step shown beside them names no count of its own.
func (w ExecutorWait) Count() string {
	if w.Total <= 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d packages", min(w.Done, w.Total), w.Total)
}

// RunVersion is what a page shows of a run: the run's version, and what moves without
// a new version of it: the progress of the executor preparation it waits for, and its
// place in the apply queue (another run's move changes it).
type RunVersion struct {
	UpdatedAt time.Time
	Wait      *ExecutorWait
	Queue     *run.Queue
}

// Version is the version of the run page l shows.
func (l RunLive) Version() RunVersion {
	return RunVersion{UpdatedAt: l.Run.UpdatedAt, Wait: l.Wait, Queue: l.Queue}
}

// Page reads run id's page. Another organization's or a hidden run is not found.
func (s Runs) Page(ctx context.Context, id string) (RunPage, error) {
	live, _, err := s.Live(ctx, id, nil)
	if err != nil {
		return RunPage{}, err
	}
	ws, err := s.Workspaces.Get(ctx, live.Run.WorkspaceID)
	if err != nil {
		return RunPage{}, err
	}
	origin, err := s.originOf(ctx, live.Run)
	if err != nil {
		return RunPage{}, err
	}
	return RunPage{Workspace: ws, Origin: origin, RunLive: live}, nil
}

// Live reads the moving part of run id's page. When the page shows that version already
// (shown, nil for none) it reads no further and answers changed false with only the run
// and its wait filled in: swapping identical HTML would only lose the reader's focus and
// what they typed.
func (s Runs) Live(ctx context.Context, id string, shown *RunVersion) (live RunLive, changed bool, err error) {
	r, err := s.Runs.Get(ctx, id)
	if err != nil {
		return RunLive{}, false, err
	}
	live = RunLive{Run: r, Wait: s.waiting(r)}
	if live.Queue, err = s.Runs.Queue(ctx, r); err != nil {
		return RunLive{}, false, err
	}
	if shown != nil && shown.same(live.Version()) {
		return live, false, nil
	}
	if live.Permissions, err = s.Decisions.Permissions(ctx, r); err != nil {
		return RunLive{}, false, err
	}
	if live.History, err = s.Runs.History(ctx, r); err != nil {
		return RunLive{}, false, err
	}
	gates, err := s.Runs.Gates(ctx, r)
	if err != nil {
		return RunLive{}, false, err
	}
	live.Stages = timeline.Of(r, live.History, gates)
	live.Block = BlockOf(r, gates.Evaluation, gates.Overrides, live.Permissions)
	if live.Logs, err = s.logs(ctx, r); err != nil {
		return RunLive{}, false, err
	}
	live.StateNote = stateNote(r)
	return live, true, nil
}

// RunStatus is a run with where it stands in its workspace's apply queue: the API's run.
type RunStatus struct {
	Run   run.Run
	Queue *run.Queue // nil: not waiting to apply
}

// Status reads run id and its place in the apply queue.
func (s Runs) Status(ctx context.Context, id string) (RunStatus, error) {
	r, err := s.Runs.Get(ctx, id)
	if err != nil {
		return RunStatus{}, err
	}
	q, err := s.Runs.Queue(ctx, r)
	if err != nil {
		return RunStatus{}, err
	}
	return RunStatus{Run: r, Queue: q}, nil
}

// Timeline reads the gates run id went through, as its page shows them.
func (s Runs) Timeline(ctx context.Context, id string) ([]timeline.Stage, error) {
	r, err := s.Runs.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	events, err := s.Runs.History(ctx, r)
	if err != nil {
		return nil, err
	}
	gates, err := s.Runs.Gates(ctx, r)
	if err != nil {
		return nil, err
	}
	return timeline.Of(r, events, gates), nil
}

// PlanJSON reads run id's plan as OpenTofu's JSON (sensitive values as OpenTofu masks
// them). A run without a plan yet is not found, and says so.
func (s Runs) PlanJSON(ctx context.Context, id string) ([]byte, error) {
	r, err := s.Runs.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.PlanJSONArtifactID == nil {
		return nil, errs.Explain(errs.ErrNotFound, "This run has no plan yet.")
	}
	return s.Runs.Artifact(ctx, r, r.PlanJSONArtifactID)
}

// logChunkPage is how many chunks one read of a live log takes.
const logChunkPage = 500

// Log reads the log of run id's phase (plan, apply or verify): the whole stored log of a
// finished phase, or what the live log holds while it runs.
func (s Runs) Log(ctx context.Context, id string, phase run.JobKind) ([]byte, error) {
	r, err := s.Runs.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	stored := map[run.JobKind]*string{run.JobPlan: r.PlanLogArtifactID, run.JobApply: r.ApplyLogArtifactID, run.JobVerify: r.VerifyLogArtifactID}
	artifact, ok := stored[phase]
	if !ok {
		v := &errs.Validation{}
		v.Add("phase", "must be plan, apply or verify")
		return nil, v
	}
	if artifact != nil {
		return s.Runs.Artifact(ctx, r, artifact)
	}
	var text []byte
	for after := 0; ; {
		chunks, err := s.Runs.LogChunks(ctx, r.ID, phase, after, logChunkPage)
		if err != nil {
			return nil, err
		}
		for _, ch := range chunks {
			text = append(text, ch.Text...)
			after = ch.Seq
		}
		if len(chunks) < logChunkPage {
			return text, nil
		}
	}
}

// logs reads the stored logs of run r's finished phases.
func (s Runs) logs(ctx context.Context, r run.Run) (PhaseLogs, error) {
	var out PhaseLogs
	for _, l := range []struct {
		id  *string
		dst *string
	}{{r.PlanLogArtifactID, &out.Plan}, {r.ApplyLogArtifactID, &out.Apply}, {r.VerifyLogArtifactID, &out.Verify}} {
		if l.id == nil {
			continue
		}
		body, err := s.Runs.Artifact(ctx, r, l.id)
		if err != nil {
			return PhaseLogs{}, err
		}
		*l.dst = string(body)
	}
	return out, nil
}

// waitingPhase names the phase a run in state s would start next: the phases whose jobs
// wait for an executor being prepared.
var waitingPhase = map[run.State]string{run.Queued: "plan", run.Approved: "apply", run.Verifying: "verification"}

// waiting is what run r's next phase waits for, or nil.
func (s Runs) waiting(r run.Run) *ExecutorWait {
	phase, ok := waitingPhase[r.State]
	if !ok || s.Executors == nil {
		return nil
	}
	if p, waiting := s.Executors.Waiting(r.Runner); waiting {
		return &ExecutorWait{Preparation: p, Phase: phase}
	}
	return nil
}

// same reports whether v is the version shown: the same run version, the same place in
// the apply queue, and the same progress of the executor preparation it waits for (or
// none on both sides).
func (shown RunVersion) same(v RunVersion) bool {
	if shown.UpdatedAt.IsZero() || !shown.UpdatedAt.Equal(v.UpdatedAt) {
		return false
	}
	if (shown.Queue == nil) != (v.Queue == nil) || shown.Queue != nil && *shown.Queue != *v.Queue {
		return false
	}
	if shown.Wait == nil || v.Wait == nil {
		return shown.Wait == v.Wait
	}
	return shown.Wait.What == v.Wait.What && shown.Wait.Step == v.Wait.Step &&
		shown.Wait.Percent() == v.Wait.Percent() && shown.Wait.Phase == v.Wait.Phase
}

// stateNote says what run r's state means for what comes next ("" when the state says it).
func stateNote(r run.Run) string {
	if r.State == run.Approved && r.ApprovalExpiresAt != nil {
		return fmt.Sprintf("The apply starts by itself and must begin by %s (within %d minutes of the approval); otherwise the approval expires.",
			r.ApprovalExpiresAt.UTC().Format("15:04:05 UTC"), int(run.ApprovalValidity.Minutes()))
	}
	return ""
}
