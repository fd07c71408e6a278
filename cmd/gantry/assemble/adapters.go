package assemble

// The small adapters the composition root hands services: each gives one package what it
// asks of another through the interface it defines.

import (
	"context"
	"encoding/json"

	"gantry/models/attest"
	"gantry/models/catalog"
	"gantry/models/governance"
	"gantry/models/run"
	"gantry/runner"
)

// catalogTemplates is the catalog as the governance report reads it.
type catalogTemplates struct{ c *catalog.Catalog }

func (c catalogTemplates) Templates() []governance.Template {
	var out []governance.Template
	for _, e := range c.c.All() {
		if e.Usable() {
			out = append(out, governance.Template{Name: e.Template.Name, Version: e.Template.Version, Rollback: e.Template.Rollback,
				Irreversible: e.Template.Irreversible})
		}
	}
	return out
}

// governanceExecutors is the runner set as the governance report reads it: an
// environment's setting resolved as runs resolve it ("default" or empty is the
// deployment's default), and what the executor says of itself.
type governanceExecutors struct {
	runners runner.RunnerSet
	def     string
}

func (g governanceExecutors) Executor(setting string) governance.Executor {
	name := setting
	if name == "" || name == "default" {
		name = g.def
	}
	r, ok := g.runners[name]
	if !ok {
		return governance.Executor{Name: name}
	}
	iso, isolates := r.(interface{ Isolated() bool })
	return governance.Executor{Name: name, Offered: true, Simulated: r.Simulated(), Isolated: isolates && iso.Isolated()}
}

// attestor hands the run service's attestations to models/attest.
type attestor struct{ a *attest.Attestor }

func (a attestor) Attest(ctx context.Context, orgID, runID string, states []run.AttestedState, predicate map[string]any) error {
	subjects := make([]attest.Subject, len(states))
	for i, s := range states {
		subjects[i] = attest.Subject{Name: s.Name, SHA256: s.SHA256}
	}
	return a.a.Attest(ctx, orgID, runID, subjects, predicate)
}

func (a attestor) OfRun(ctx context.Context, orgID, runID string) ([]json.RawMessage, error) {
	return a.a.OfRun(ctx, orgID, runID)
}
