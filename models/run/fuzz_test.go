package run

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"gantry/models/classify"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/risk"
	"gantry/policies"
)

// FuzzPolicyInput turns any bytes into what the plan gates compute from a plan, as
// assess does without its stores: the classification, the risk facts, the policy
// input's classification and the policy evaluation of the built-in rules. Nothing
// panics; the risk facts and input.run.classification say what the classification
// says (every count, only the changes that do something, in plan order, dependents
// capped at maxPolicyDependents); the risk class is a class; and a plan Classify reads
// is always evaluated, one result per rule, each passed exactly when it has no
// message, the outcome the worst failed enforcement and the digest the results'.
func FuzzPolicyInput(f *testing.F) {
	var seeds []string
	for _, dir := range []string{filepath.Join("..", "classify", "testdata"), filepath.Join("..", "..", "policies", "testdata")} {
		paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil || len(paths) == 0 {
			f.Fatalf("no seeds in %s: %v", dir, err)
		}
		seeds = append(seeds, paths...)
	}
	for i, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint8(i), "sandbox_database", "sandbox_org_policy")
	}
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"sandbox_org_policy.p","type":"sandbox_org_policy","change":{"actions":["update"]}},{"address":"d.x","type":"d","mode":"data","change":{"actions":["read"]}}]}`),
		uint8(7), "", "sandbox_org_policy")
	bundle, err := policies.Builtin()
	if err != nil {
		f.Fatal(err)
	}
	rules := bundle.Rules()
	f.Fuzz(func(t *testing.T, plan []byte, bits uint8, irreversible, orgPolicy string) {
		kind := []Kind{KindApply, KindPlanOnly, KindDestroy}[int(bits)%3]
		tier := environment.Tiers[int(bits>>2)%len(environment.Tiers)]
		facts := TemplateFacts{Source: "catalog", Irreversible: []string{irreversible}, OrgScoped: []string{orgPolicy, "sandbox_iam_binding"},
			OrgPolicy: []string{orgPolicy}, Prices: map[string]float64{irreversible: 10}}
		res, err := classify.Classify(plan, facts.ClassifyOptions())
		if err != nil {
			return
		}
		r := Run{ID: "run-1", OrganizationID: "org-1", EnvironmentID: "env-1", Kind: kind, TemplateName: "t", TemplateVersion: "1.0.0",
			ModuleDigest: "sha256:00", RequestedBy: "usr-1", RequestedByName: "Ann"}
		env := environment.Environment{ID: "env-1", Name: string(tier), Tier: tier, RequiresApproval: bits&0x10 != 0, Restricted: bits&0x20 != 0}

		rf := factsOf(r, env, res, facts)
		c := res.Counts
		switch {
		case rf.Create != c.Create || rf.Update != c.Update || rf.Replace != c.Replace || rf.Destroy != c.Destroy:
			t.Fatalf("risk facts count %+v, the classification %+v", rf, c)
		case rf.HasChanges != (c.Create+c.Update+c.Replace+c.Destroy > 0):
			t.Fatalf("HasChanges %v for %+v", rf.HasChanges, c)
		case rf.Irreversible != res.HasIrreversible || rf.OrgScopedChange != res.TouchesOrgScoped:
			t.Fatalf("risk facts %+v, classification irreversible %v org-scoped %v", rf, res.HasIrreversible, res.TouchesOrgScoped)
		case rf.Kind != string(kind) || rf.Tier != string(tier) || rf.RequiresApproval != env.RequiresApproval:
			t.Fatalf("risk facts %+v for a %s run in %s", rf, kind, tier)
		}
		policyChange := slices.ContainsFunc(res.Changes, func(ch classify.Change) bool {
			return ch.Type == orgPolicy && ch.Class != classify.ClassNoOp && ch.Class != classify.ClassRead
		})
		if rf.OrgPolicyChange != policyChange {
			t.Fatalf("OrgPolicyChange %v, want %v", rf.OrgPolicyChange, policyChange)
		}
		a := assessRisk(risk.Default(), rf)
		if a.Class < 0 || a.Class > risk.MaxClass {
			t.Fatalf("risk class %d", a.Class)
		}

		pc := policyClassification(res)
		want := map[string]int{"create": c.Create, "update": c.Update, "replace": c.Replace, "destroy": c.Destroy, "read": c.Read, "no_op": c.NoOp}
		if len(pc.Counts) != len(want) {
			t.Fatalf("counts %v, want %v", pc.Counts, want)
		}
		for k, n := range want {
			if pc.Counts[k] != n {
				t.Fatalf("counts %v, want %v", pc.Counts, want)
			}
		}
		k := 0
		for _, ch := range res.Changes {
			if ch.Class == classify.ClassNoOp || ch.Class == classify.ClassRead {
				continue
			}
			if k >= len(pc.Changes) {
				t.Fatalf("%s is missing from the policy input", ch.Address)
			}
			got := pc.Changes[k]
			k++
			deps := ch.Dependents[:min(len(ch.Dependents), maxPolicyDependents)]
			if got.Address != ch.Address || got.Type != ch.Type || got.Class != string(ch.Class) || got.Irreversible != ch.Irreversible ||
				got.OrgScoped != ch.OrgScoped || got.ActionReason != ch.ActionReason || !slices.Equal(got.Dependents, deps) {
				t.Fatalf("policy input change %+v for %+v", got, ch)
			}
		}
		if k != len(pc.Changes) {
			t.Fatalf("%d changes in the policy input, %d that do something", len(pc.Changes), k)
		}

		input := policies.RunContext{ID: r.ID, Kind: string(r.Kind), Organization: r.OrganizationID,
			Actor:       policies.Actor{ID: r.RequestedBy, Name: r.RequestedByName, Role: "operator"},
			Environment: policies.Environment{ID: env.ID, Name: env.Name, Tier: string(env.Tier), RequiresApproval: env.RequiresApproval, Restricted: env.Restricted},
			Template: policies.Template{Name: r.TemplateName, Version: r.TemplateVersion, Source: facts.Source, ModuleDigest: r.ModuleDigest,
				Irreversible: facts.Irreversible, OrgScoped: facts.OrgScoped},
			Risk:           policies.Risk{Class: int(a.Class), Rule: a.Rule.ID, Approver: string(a.Decision.Approver)},
			Classification: pc,
		}
		ev, err := bundle.Evaluate(context.Background(), plan, input, nil)
		if err != nil {
			t.Fatalf("a plan Classify reads is not evaluated: %v", err)
		}
		checkEvaluation(t, rules, ev)
	})
}

func checkEvaluation(t *testing.T, rules []policies.Rule, ev policies.Evaluation) {
	t.Helper()
	if len(ev.Results) != len(rules) {
		t.Fatalf("%d results for %d rules", len(ev.Results), len(rules))
	}
	rank := map[policies.Outcome]int{policies.OutcomePass: 0, policies.OutcomeAdvisory: 1, policies.OutcomeSoft: 2, policies.OutcomeHard: 3}
	outcome := policies.OutcomePass
	for i, res := range ev.Results {
		if res.RuleID != rules[i].ID || res.Enforcement != rules[i].Enforcement {
			t.Fatalf("result %d is %s (%s), rule %s (%s)", i, res.RuleID, res.Enforcement, rules[i].ID, rules[i].Enforcement)
		}
		if res.Messages == nil || res.Passed != (len(res.Messages) == 0) {
			t.Fatalf("%s: passed %v with messages %q", res.RuleID, res.Passed, res.Messages)
		}
		if !slices.IsSorted(res.Messages) || len(slices.Compact(slices.Clone(res.Messages))) != len(res.Messages) {
			t.Fatalf("%s: messages not sorted and distinct: %q", res.RuleID, res.Messages)
		}
		if !res.Passed {
			o := map[policies.Enforcement]policies.Outcome{policies.Advisory: policies.OutcomeAdvisory,
				policies.SoftMandatory: policies.OutcomeSoft, policies.HardMandatory: policies.OutcomeHard}[res.Enforcement]
			if rank[o] > rank[outcome] {
				outcome = o
			}
		}
	}
	if ev.Outcome != outcome {
		t.Fatalf("outcome %s, the results say %s", ev.Outcome, outcome)
	}
	digest, err := policies.ResultDigest(ev.Results)
	if err != nil || digest != ev.Digest {
		t.Fatalf("digest %s, the results' %s (%v)", ev.Digest, digest, err)
	}
}

// FuzzParseEvidence reads any submitted evidence form: ParseEvidence never panics, a
// refusal is an *errs.Validation on the "evidence" field only (422 INVALID_INPUT),
// accepted evidence has its required fields and non-negative numbers and reads back the
// same from its own fields; and the evidence a run carries (EvidenceOf), sent back as
// the review page's hidden fields, parses to evidence the run accepts.
func FuzzParseEvidence(f *testing.F) {
	f.Add("run-1", "3", "sha256:plan", "sha256:config", "sv-1", "4", "lineage-1", "sha256:state", "pe-1", "sha256:result", "sha256:bundle", uint16(0))
	f.Add("run-1", "0", "sha256:plan", "sha256:config", NoPredecessor, "", "", "", "", "", "", uint16(0))
	f.Add("run-1", "+7", "d", "c", "sv-1", "-1", "l", "d", "", "", "", uint16(0x7ff))
	f.Add("", "x", "", "", "", "99999999999999999999", "", "", "", "", "", uint16(0xffff))
	f.Add("run-1", " 1", "d", "c", "none", "1e3", "l", "d", "e", "r", "b", uint16(0x100))
	f.Fuzz(func(t *testing.T, runID, revision, plan, config, prior, serial, lineage, stateDigest, evalID, result, bundle string, missing uint16) {
		values := map[string]string{
			FieldRunID: runID, FieldPlanRevision: revision, FieldPlanDigest: plan, FieldConfigDigest: config,
			FieldPriorVersionID: prior, FieldPriorSerial: serial, FieldPriorLineage: lineage, FieldPriorDigest: stateDigest,
			FieldPolicyEvaluationID: evalID, FieldPolicyResultDigest: result, FieldPolicyBundleDigest: bundle,
		}
		// Each bit of missing leaves one field out of the form.
		for i, field := range EvidenceFields {
			if missing&(1<<i) != 0 {
				delete(values, field)
			}
		}
		get := func(field string) (string, bool) { s, ok := values[field]; return s, ok }
		ev, err := ParseEvidence(get)
		if err != nil {
			v, ok := errs.AsValidation(err)
			if !ok || errs.CodeOf(err) != errs.CodeInvalidInput {
				t.Fatalf("refused with %v, want a validation error", err)
			}
			if len(v.Fields) != 1 || v.Fields["evidence"] == "" {
				t.Fatalf("refused on fields %v, want the evidence field", v.Fields)
			}
		} else {
			checkEvidence(t, ev, values)
		}

		// The run's own evidence, round-tripped through the review page's fields.
		n, _ := strconv.Atoi(revision)
		s, _ := strconv.Atoi(serial)
		r := Run{ID: runID, PlanRevision: max(n, 0), PlanDigest: plan, ConfigDigest: config,
			PolicyResultDigest: result, PolicyBundleDigest: bundle}
		if prior != "" && prior != NoPredecessor {
			r.PriorStateVersionID, r.PriorSerial, r.PriorLineage, r.PriorStateDigest = &prior, max(s, 0), lineage, stateDigest
		}
		if evalID != "" {
			r.PolicyEvaluationID = &evalID
		}
		own := EvidenceOf(r)
		fields := own.Fields()
		back, err := ParseEvidence(func(field string) (string, bool) { s, ok := fields[field]; return s, ok })
		required := runID != "" && plan != "" && config != "" &&
			(r.PriorStateVersionID == nil || (lineage != "" && stateDigest != ""))
		switch {
		case required && err != nil:
			t.Fatalf("the run's own evidence %+v is refused: %v", own, err)
		case err == nil && back != own:
			t.Fatalf("the run's evidence %+v reads back as %+v", own, back)
		case err == nil:
			if cerr := back.check(r); cerr != nil {
				t.Fatalf("the run refuses its own evidence: %v", cerr)
			}
		}
	})
}

func checkEvidence(t *testing.T, ev Evidence, values map[string]string) {
	t.Helper()
	switch {
	case ev.RunID == "" || ev.PlanDigest == "" || ev.ConfigDigest == "" || ev.Predecessor.VersionID == "":
		t.Fatalf("accepted without a required field: %+v", ev)
	case ev.PlanRevision < 0 || ev.Predecessor.Serial < 0:
		t.Fatalf("accepted a negative number: %+v", ev)
	case !ev.Predecessor.None() && (ev.Predecessor.Lineage == "" || ev.Predecessor.Digest == ""):
		t.Fatalf("accepted a predecessor without lineage or digest: %+v", ev)
	case ev.Predecessor.None() && ev.Predecessor != (Predecessor{VersionID: NoPredecessor}):
		t.Fatalf("no predecessor, but %+v", ev.Predecessor)
	}
	for _, field := range []string{FieldPolicyEvaluationID, FieldPolicyResultDigest, FieldPolicyBundleDigest} {
		if _, ok := values[field]; !ok {
			t.Fatalf("accepted without %s", field)
		}
	}
	fields := ev.Fields()
	again, err := ParseEvidence(func(field string) (string, bool) { s, ok := fields[field]; return s, ok })
	if err != nil || again != ev {
		t.Fatalf("%+v reads back from its fields as %+v, %v", ev, again, err)
	}
}

// FuzzRedactPlan redacts any bytes as a plan: RedactPlan never panics; what it accepts
// comes back as one JSON object in which every value a marker marks is masked or null
// (redacting it again changes nothing, byte for byte: masking is what changes bytes),
// and a plan with nothing to mask comes back exactly as given; the value of a root
// variable the configuration declares sensitive never survives.
func FuzzRedactPlan(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join("..", "classify", "testdata", "*.json"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"variables":{"secret":{"value":"canary-canary"}},"configuration":{"root_module":{"variables":{"secret":{"sensitive":true}}}},` +
		`"resource_changes":[{"change":{"before":null,"after":{"labels":{"key_digest":"9f86d0"},"l":[1,"x"]},"after_sensitive":{"labels":{"key_digest":true},"l":[false,true]}}}]}`))
	f.Add([]byte(`{"planned_values":{"outputs":{"o":{"sensitive":true,"value":{"k":"v"}}},"root_module":{"child_modules":[{"resources":[{"values":"x","sensitive_values":{"a":true}}]}]}}}`))
	f.Fuzz(func(t *testing.T, plan []byte) {
		out, err := RedactPlan(plan)
		if err != nil {
			return
		}
		var doc map[string]any
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber() // 1e400 is a JSON number, if not a float64
		if err := dec.Decode(&doc); err != nil || doc == nil {
			t.Fatalf("the redacted plan is not a JSON object: %v\n%s", err, out)
		}
		again, err := RedactPlan(out)
		if err != nil {
			t.Fatalf("the redacted plan does not redact again: %v", err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("redacting twice masked more: a marked value survived the first time\n%s\n%s", out, again)
		}
		if !bytes.Equal(out, plan) && !bytes.Contains(out, []byte(SensitiveValue)) {
			t.Fatalf("the plan changed but masks nothing\n%s\n%s", plan, out)
		}
		decls, _ := doc["configuration"].(map[string]any)
		root, _ := decls["root_module"].(map[string]any)
		vars, _ := root["variables"].(map[string]any)
		values, _ := doc["variables"].(map[string]any)
		for name, d := range vars {
			if decl, _ := d.(map[string]any); decl["sensitive"] == true {
				if v, _ := values[name].(map[string]any); v["value"] != nil && v["value"] != SensitiveValue {
					t.Fatalf("sensitive variable %s kept its value %v", name, v["value"])
				}
			}
		}
	})
}
