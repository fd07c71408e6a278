package policies

import (
	"context"
	"testing"

	"gantry/bench"
	"gantry/models/classify"
	"gantry/models/classify/classifytest"
)

// classification converts a classify.Result into the run context's classification, as
// the portal does: only the changes that do something.
func classification(res classify.Result) Classification {
	c := Classification{Counts: map[string]int{
		"create": res.Counts.Create, "update": res.Counts.Update, "replace": res.Counts.Replace,
		"destroy": res.Counts.Destroy, "read": res.Counts.Read, "no_op": res.Counts.NoOp,
	}}
	for _, ch := range res.Changes {
		if ch.Class == classify.ClassNoOp || ch.Class == classify.ClassRead {
			continue
		}
		c.Changes = append(c.Changes, ClassifiedChange{
			Address: ch.Address, Type: ch.Type, Class: string(ch.Class), Irreversible: ch.Irreversible,
			OrgScoped: ch.OrgScoped, ActionReason: ch.ActionReason, Dependents: ch.Dependents,
		})
	}
	return c
}

func bench10kRun(tb testing.TB, plan []byte) RunContext {
	tb.Helper()
	irreversible := []string{"sandbox_database", "sandbox_bucket"}
	orgScoped := []string{"sandbox_org_policy"}
	res, err := classify.Classify(plan, classify.Options{Irreversible: irreversible, OrgScoped: orgScoped})
	if err != nil {
		tb.Fatal(err)
	}
	return RunContext{
		ID: "run-bench", Kind: "apply", Organization: "org-acme",
		Actor:          Actor{ID: "usr-alice", Name: "Alice", Role: "operator"},
		Environment:    Environment{ID: "env-prod", Name: "production", Tier: "production", RequiresApproval: true},
		Template:       Template{Name: "platform", Version: "1.0.0", Source: "catalog", ModuleDigest: "sha256:abc", Irreversible: irreversible, OrgScoped: orgScoped},
		Risk:           Risk{Class: 3, Rule: "replace of an irreversible resource", Approver: "owner"},
		Classification: classification(res),
	}
}

// BenchmarkEvaluate10k evaluates every built-in rule on the 10,000-change plan, against
// a plain decode of it in the same run (goal: ratio ≤ 5, bench/goals.go).
func BenchmarkEvaluate10k(b *testing.B) {
	plan := classifytest.Plan10kFile(b)
	run := bench10kRun(b, plan)
	bundle, err := Builtin()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetBytes(int64(len(plan)))
	bench.Ratio(b, classifytest.PlainDecode(b, plan), func() { // the setup above is not timed
		ev, err := bundle.Evaluate(ctx, plan, run, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(ev.Results) != len(bundle.Rules()) {
			b.Fatalf("%d results", len(ev.Results))
		}
	})
}
