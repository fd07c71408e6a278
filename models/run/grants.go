package run

import (
	"context"
	"fmt"
)

// PhaseHolds reports whether the grant of a workload token for phase of run runID
// still holds (identity.PhaseGrants: the workload issuer asks at every call the token
// makes to a cloud): the run of organization orgID is in that phase's state (PLANNING,
// RUNNING, VERIFYING) and holds a lease of that phase the database clock has not seen
// expire. lease, when not zero, names exactly which lease: an apply token carries its
// fencing token, so only the attempt it was minted for is live, never an earlier one.
//
// Every end of a phase ends its token with no code of its own: a cancel, a finish or
// a failure moves the run out of the phase's state and ends its lease in the same
// transaction, the sweeper's takeover moves it on, and a worker that returns without
// finishing releases its lease (expired at once). An apply token always names its
// lease; one that names none is not live.
func (s *Jobs) PhaseHolds(ctx context.Context, orgID, runID, phase string, lease int64) (bool, error) {
	kind := JobKind(phase)
	st, ok := phaseState[kind]
	if !ok || (kind == JobApply && lease <= 0) {
		return false, nil
	}
	var holds bool
	err := s.k.store.conn(ctx).Raw(`SELECT EXISTS (SELECT 1 FROM runs r JOIN run_leases l ON l.run_id = r.id
		WHERE r.id = ? AND r.organization_id = ? AND r.state = ? AND l.phase = ? AND l.expires_at > clock_timestamp()
		AND (? = 0 OR l.token = ?))`, runID, orgID, string(st), string(kind), lease, lease).Scan(&holds).Error
	if err != nil {
		return false, fmt.Errorf("asking whether the %s of run %s still holds: %w", phase, runID, err)
	}
	return holds, nil
}
