package run

import (
	"context"
	"fmt"
)

// StateCount is how many runs of one environment are in one state.
type StateCount struct {
	OrganizationID string
	EnvironmentID  string
	State          State
	Count          int64
}

// StateCounts counts every organization's runs by environment and state: the
// operators' metric (/metrics), read from the database so every replica reports the
// same. The system reads it; it holds counts only, never a run.
func (s *Reads) StateCounts(ctx context.Context) ([]StateCount, error) {
	var out []StateCount
	err := s.k.store.conn(ctx).Raw(`SELECT organization_id, environment_id, state, count(*) AS count FROM runs
		GROUP BY organization_id, environment_id, state ORDER BY 1, 2, 3`).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("counting runs by state: %w", err)
	}
	return out, nil
}
