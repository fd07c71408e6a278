package governance

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanGateFromTheExecutor: the plan gate is what the environment's executor says of
// itself: isolated holds, simulated holds as a simulation, a plain process is a finding
// naming the executor setting, and a name this portal does not run is unknown.
func TestPlanGateFromTheExecutor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ex              Executor
		status, finding string
	}{
		{Executor{Name: "tofu/oci", Offered: true, Isolated: true}, Enforced, ""},
		{Executor{Name: "mock", Offered: true, Simulated: true}, Simulated, ""},
		{Executor{Name: "tofu/process", Offered: true}, Flagged,
			"plan: executor tofu/process runs OpenTofu as a plain process of the portal's host, sharing its user and network: not isolated (it says so of itself)"},
		{Executor{Name: "kubernetes"}, UnenforcedUnknown, `plan: executor "kubernetes" is not one this portal runs: its runs cannot plan`},
	} {
		g := planGate(c.ex)
		require.Equal(t, c.status, g.Status, c.ex.Name)
		f, ok := gateFinding(g, Finding{})
		require.Equal(t, c.finding != "", ok && !g.Holds(), c.ex.Name)
		if c.finding != "" {
			require.Equal(t, c.finding, f.Text)
			require.Equal(t, PlaceEnvironment, f.Setting.Place)
		}
	}
}
