package audit

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"gantry/models/db"
	"gantry/models/runport"
)

// ApplyCount is one environment's applies as the chain records them (an apply is a run
// entering RUNNING), judged by the approval in force when each started: the last
// run.approved event of the run before it.
type ApplyCount struct {
	Applied int
	// Unevidenced: no approval before the apply, or one that bound another plan digest
	// than the apply record names.
	Unevidenced int
	// SelfApproved: the approval was a person's, and that person requested the run (the
	// approval's actor is the run.queued event's, or the approval says self_approved).
	SelfApproved int
	// SelfService: Gantry approved it by itself (risk 1 outside a protected
	// environment): no person's gate, which is not self-approval.
	SelfService int
	// Verified and VerificationFailed: runs that passed, and runs that failed, their
	// verification (the refresh-only plan after the apply).
	Verified, VerificationFailed int
	// The newest runs (at most RunsListed) of each kind, newest first.
	UnevidencedRuns, SelfApprovedRuns, SelfServiceRuns []RunRef
}

// RunRef names a run an event is about: its id and its number in its workspace.
type RunRef struct {
	ID     string
	Number int
}

// RunsListed is how many runs of each kind ApplyCount names.
const RunsListed = 10

// AppliesByEnvironment counts organization orgID's applies per environment from the
// log, for a service that has checked its own permission (the governance report).
func (l *Log) AppliesByEnvironment(ctx context.Context, orgID string) (map[string]ApplyCount, error) {
	var rows []struct {
		EnvironmentID                                      string
		Applied, Unevidenced, SelfApproved, SelfService    int
		UnevidencedRuns, SelfApprovedRuns, SelfServiceRuns string
	}
	// One row per apply with the approval in force and the run's requester (the actor of
	// its run.queued event), judged, then counted per environment with the newest runs
	// of each kind as "id:number" lists.
	err := db.Conn(ctx, l.db).Raw(`WITH applies AS (
	    SELECT COALESCE(r.environment_id, '') AS environment_id, r.target_id AS run_id, r.seq, COALESCE(r.data->>'number', '0') AS number,
	        a.data IS NULL OR (a.data->>'approved_plan_digest') IS DISTINCT FROM (r.data->>'plan_digest') AS unevidenced,
	        a.data->>'approval_kind' = 'self-service' AS self_service,
	        a.actor_id <> 'system' AND (a.actor_id = q.actor_id OR (a.data->>?)::boolean IS TRUE) AS self_approved
	    FROM audit_events r
	    LEFT JOIN LATERAL (SELECT actor_id, data FROM audit_events WHERE organization_id = r.organization_id AND target_type = 'run'
	        AND target_id = r.target_id AND action = 'run.approved' AND seq < r.seq ORDER BY seq DESC LIMIT 1) a ON true
	    LEFT JOIN LATERAL (SELECT actor_id FROM audit_events WHERE organization_id = r.organization_id AND target_type = 'run'
	        AND target_id = r.target_id AND action = 'run.queued' ORDER BY seq LIMIT 1) q ON true
	    WHERE r.organization_id = ? AND r.action = 'run.running')
	SELECT environment_id, count(*) AS applied,
	    count(*) FILTER (WHERE unevidenced) AS unevidenced,
	    count(*) FILTER (WHERE self_approved IS TRUE) AS self_approved,
	    count(*) FILTER (WHERE self_service IS TRUE) AS self_service,
	    array_to_string((array_agg(run_id || ':' || number ORDER BY seq DESC) FILTER (WHERE unevidenced))[1:?], ',') AS unevidenced_runs,
	    array_to_string((array_agg(run_id || ':' || number ORDER BY seq DESC) FILTER (WHERE self_approved IS TRUE))[1:?], ',') AS self_approved_runs,
	    array_to_string((array_agg(run_id || ':' || number ORDER BY seq DESC) FILTER (WHERE self_service IS TRUE))[1:?], ',') AS self_service_runs
	FROM applies GROUP BY environment_id`, runport.SelfApprovedField, orgID, RunsListed, RunsListed, RunsListed).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("counting applies: %w", err)
	}
	out := make(map[string]ApplyCount, len(rows))
	for _, r := range rows {
		out[r.EnvironmentID] = ApplyCount{Applied: r.Applied, Unevidenced: r.Unevidenced, SelfApproved: r.SelfApproved, SelfService: r.SelfService,
			UnevidencedRuns: runRefs(r.UnevidencedRuns), SelfApprovedRuns: runRefs(r.SelfApprovedRuns), SelfServiceRuns: runRefs(r.SelfServiceRuns)}
	}
	var ends []struct {
		EnvironmentID    string
		Verified, Failed int
	}
	err = db.Conn(ctx, l.db).Raw(`SELECT COALESCE(environment_id, '') AS environment_id,
	        count(*) FILTER (WHERE action = 'run.succeeded') AS verified,
	        count(*) FILTER (WHERE action = 'run.failed' AND data->>'from' = 'VERIFYING') AS failed
	    FROM audit_events WHERE organization_id = ? AND action IN ('run.succeeded', 'run.failed') GROUP BY 1`, orgID).Scan(&ends).Error
	if err != nil {
		return nil, fmt.Errorf("counting verifications: %w", err)
	}
	for _, e := range ends {
		c := out[e.EnvironmentID]
		c.Verified, c.VerificationFailed = e.Verified, e.Failed
		out[e.EnvironmentID] = c
	}
	return out, nil
}

// runRefs reads a list of "id:number" (run ids hold no comma or colon).
func runRefs(list string) []RunRef {
	var out []RunRef
	for item := range strings.SplitSeq(list, ",") {
		id, number, ok := strings.Cut(item, ":")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(number)
		out = append(out, RunRef{ID: id, Number: n})
	}
	return out
}
