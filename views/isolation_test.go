package views

import "testing"

// TestIsolationLabel: every executor's jobs are labelled with how they are isolated; a
// run names its executor, which may no longer be offered.
func TestIsolationLabel(t *testing.T) {
	for _, c := range []struct {
		runner              string
		simulated, isolated bool
		want                string
	}{
		{"mock", true, false, "SIMULATED"},
		{"tofu/process", false, false, "not isolated"},
		{"tofu/oci", false, true, "isolated (runc)"},
		{"tofu/kubernetes", false, true, "isolated (Kubernetes pod)"},
	} {
		if got := IsolationLabel(c.runner, c.simulated, c.isolated); got != c.want {
			t.Errorf("%s: %q, want %q", c.runner, got, c.want)
		}
		if got := isolatedExecutors[c.runner]; got != c.isolated {
			t.Errorf("%s: isolatedExecutors says %v, its executor says %v", c.runner, got, c.isolated)
		}
	}
}
