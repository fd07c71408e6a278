package runner

import (
	"context"
	"sort"
	"time"
)

// Status is what the executors page shows of one runner.
type Status struct {
	Name      string
	Default   bool // the deployment's default executor
	Simulated bool
	Isolated  bool
	Healthy   bool
	Problem   string
	// Preparing is the progress of an executor still being prepared (not healthy yet,
	// not broken either: its jobs wait).
	Preparing *Preparation
}

// Statuses checks every runner (each bounded to a few seconds) and returns them by name.
// A runner without a Health method (the mock) is healthy; one without Isolated is not
// isolated unless it is simulated.
func (rs RunnerSet) Statuses(ctx context.Context) []Status {
	out := make([]Status, 0, len(rs))
	for name, r := range rs {
		st := Status{Name: name, Simulated: r.Simulated(), Healthy: true}
		if iso, ok := r.(interface{ Isolated() bool }); ok {
			st.Isolated = iso.Isolated()
		}
		if p, waiting := rs.Waiting(name); waiting {
			st.Healthy, st.Preparing = false, &p
		} else if h, ok := r.(interface{ Health(context.Context) error }); ok {
			hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := h.Health(hctx); err != nil {
				st.Healthy, st.Problem = false, err.Error()
			}
			cancel()
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Executors are the runners this portal offers and its default (the executors page).
type Executors struct {
	Runners RunnerSet
	Default string
}

// Statuses are the runners' statuses with the deployment's default marked.
func (e Executors) Statuses(ctx context.Context) []Status {
	out := e.Runners.Statuses(ctx)
	for i := range out {
		out[i].Default = out[i].Name == e.Default
	}
	return out
}

// Waiting is the preparation executor name's jobs wait for, and true while it lasts.
func (e Executors) Waiting(name string) (Preparation, bool) { return e.Runners.Waiting(name) }
