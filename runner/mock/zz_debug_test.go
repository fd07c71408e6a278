package mock_test

import (
	"os"
	"testing"
	"gantry/runner"
)

func TestZZDebug(t *testing.T) {
	cfg := postgresBundle(t, nil)
	p1 := plan(t, runner.KindApply, cfg, nil)
	a1 := apply(t, cfg, p1, nil)
	cfg2 := postgresBundle(t, func(in map[string]string) { in["engine_version"] = `"17"`; in["size"] = `"large"` })
	p2 := plan(t, runner.KindApply, cfg2, a1.State)
	a2 := apply(t, cfg2, p2, a1.State)
	os.WriteFile("/tmp/p1.json", p1.PlanJSON, 0o644)
	os.WriteFile("/tmp/p1.log", p1.Log, 0o644)
	os.WriteFile("/tmp/p1.planfile", p1.PlanFile, 0o644)
	os.WriteFile("/tmp/a1.state", a1.State, 0o644)
	os.WriteFile("/tmp/a1.log", a1.Log, 0o644)
	os.WriteFile("/tmp/a1.out", a1.Outputs, 0o644)
	os.WriteFile("/tmp/p2.json", p2.PlanJSON, 0o644)
	os.WriteFile("/tmp/p2.log", p2.Log, 0o644)
	os.WriteFile("/tmp/a2.log", a2.Log, 0o644)
	n := networkBundle(t, 3)
	np := plan(t, runner.KindApply, n, nil)
	na := apply(t, n, np, nil)
	np2 := plan(t, runner.KindApply, networkBundle(t, 2), na.State)
	os.WriteFile("/tmp/np2.log", np2.Log, 0o644)
	os.WriteFile("/tmp/na.out", na.Outputs, 0o644)
	d := plan(t, runner.KindDestroy, cfg, a1.State)
	os.WriteFile("/tmp/d.log", d.Log, 0o644)
	os.WriteFile("/tmp/d.json", d.PlanJSON, 0o644)
}
