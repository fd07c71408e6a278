package pages

import (
	"context"

	"gantry/models/evidence"
	"gantry/models/run"
)

// EvidenceReports builds a run's evidence report (evidence.Reports).
type EvidenceReports interface {
	Of(ctx context.Context, r run.Run) (evidence.Report, error)
}

// Evidence reads a run's evidence report: its page, download, JSON and attestations,
// and the API's.
type Evidence struct {
	Runs    RunGetter
	Reports EvidenceReports
}

// Report reads run id's evidence report. Another organization's or a hidden run is
// not found.
func (s Evidence) Report(ctx context.Context, id string) (evidence.Report, error) {
	r, err := s.Runs.Get(ctx, id)
	if err != nil {
		return evidence.Report{}, err
	}
	return s.Reports.Of(ctx, r)
}
