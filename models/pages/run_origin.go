package pages

import (
	"context"
	"errors"
	"time"

	"gantry/models/errs"
	"gantry/models/run"
)

// Where a run comes from, when it is not a request of its own: a rollback re-applies the
// configuration of the run that wrote an earlier state version; a promotion carries an
// applied run of another environment's workspace here. The run page says so in its
// header, with a link to that run.

// OriginKind names what a run re-applies: a rollback or a promotion.
type OriginKind string

const (
	OriginRollback  OriginKind = "rollback"
	OriginPromotion OriginKind = "promotion"
)

// RunOrigin is the run a rollback or a promotion comes from.
type RunOrigin struct {
	Kind OriginKind
	// RunID is the source run. Visible is false when the reader may not see it (a
	// promotion from an environment hidden from them): the page then names no more.
	RunID   string
	Visible bool
	// Label ("#3"), Workspace and Environment name the source run; AppliedAt is when it
	// finished applying.
	Label, Workspace, Environment string
	AppliedAt                     *time.Time
	// Serial is the state version a rollback goes back to (0 for a promotion).
	Serial int
}

// originOf reads where run r comes from (nil: it is a request of its own).
func (s Runs) originOf(ctx context.Context, r run.Run) (*RunOrigin, error) {
	var o RunOrigin
	switch {
	case r.RollbackVersionID != nil && r.SourceRunID != nil:
		o = RunOrigin{Kind: OriginRollback, RunID: *r.SourceRunID, Serial: r.RollbackSerial}
	case r.PromotedFromRunID != nil:
		o = RunOrigin{Kind: OriginPromotion, RunID: *r.PromotedFromRunID}
	default:
		return nil, nil
	}
	src, err := s.Runs.Get(ctx, o.RunID)
	if errors.Is(err, errs.ErrNotFound) {
		return &o, nil
	}
	if err != nil {
		return nil, err
	}
	ws, err := s.Workspaces.Get(ctx, src.WorkspaceID)
	if errors.Is(err, errs.ErrNotFound) {
		return &o, nil
	}
	if err != nil {
		return nil, err
	}
	o.Visible, o.Label, o.Workspace, o.Environment, o.AppliedAt = true, src.Label(), ws.Name, ws.EnvironmentName, src.FinishedAt
	return &o, nil
}
