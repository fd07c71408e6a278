package assemble

import (
	"context"

	"gantry/models/db"
	"gantry/telemetry"
)

// The portal's metrics gauges read these: runs by state and River's queue depth.

// runCounts are the runs by organization, environment and state for the metrics,
// labelled with the organization's slug and the environment's name.
func (p *Portal) runCounts(ctx context.Context) ([]telemetry.RunCount, error) {
	counts, err := p.Runs.Reads.StateCounts(ctx)
	if err != nil {
		return nil, err
	}
	orgs, err := p.Orgs.Organizations(ctx)
	if err != nil {
		return nil, err
	}
	slugs := make(map[string]string, len(orgs))
	for _, o := range orgs {
		slugs[o.ID] = o.Slug
	}
	envs, err := p.Environments.AllNames(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]telemetry.RunCount, len(counts))
	for i, c := range counts {
		out[i] = telemetry.RunCount{Organization: slugs[c.OrganizationID], Environment: envs[c.EnvironmentID], State: string(c.State), Count: c.Count}
	}
	return out, nil
}

// queueDepth is River's unfinished jobs by kind and state for the metrics.
func (p *Portal) queueDepth(ctx context.Context) ([]telemetry.QueueCount, error) {
	counts, err := db.QueueDepth(ctx, p.db)
	if err != nil {
		return nil, err
	}
	out := make([]telemetry.QueueCount, len(counts))
	for i, c := range counts {
		out[i] = telemetry.QueueCount(c)
	}
	return out, nil
}
