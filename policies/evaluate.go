package policies

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// Actor is who started the run.
type Actor struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Role string `json:"role"` // the actor's role in the organization: viewer, operator, admin, owner, auditor
}

// Environment is the environment the run targets.
type Environment struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	Tier             string `json:"tier"` // development, staging or production
	RequiresApproval bool   `json:"requires_approval"`
	Restricted       bool   `json:"restricted"`
}

// Template is the template the run instantiates.
type Template struct {
	Name         string   `json:"name"`
	Version      string   `json:"version"`
	Source       string   `json:"source"` // "catalog" for catalog templates
	ModuleDigest string   `json:"module_digest"`
	Irreversible []string `json:"irreversible_types"` // data-bearing resource types
	OrgScoped    []string `json:"org_scoped_types"`   // organization-scoped resource types
}

// Risk is the run's risk class and the decision it requires (DESIGN §3).
type Risk struct {
	Class    int    `json:"class"`
	Rule     string `json:"rule"`
	Approver string `json:"approver"`
}

// ClassifiedChange is one resource change that does something, classified.
type ClassifiedChange struct {
	Address      string   `json:"address"`
	Type         string   `json:"type"`
	Class        string   `json:"class"` // create, update, replace or destroy
	Irreversible bool     `json:"irreversible"`
	OrgScoped    bool     `json:"org_scoped"`
	ActionReason string   `json:"action_reason"`
	Dependents   []string `json:"dependents"`
}

// Classification is the plan's changes by class.
type Classification struct {
	// Counts has the keys create, update, replace, destroy, read and no_op.
	Counts map[string]int `json:"counts"`
	// Changes holds only the changes that do something (not no-op, not read).
	Changes []ClassifiedChange `json:"changes"`
}

// RunContext is what the rules know about the run besides its plan: input.run.
type RunContext struct {
	ID             string         `json:"id"`
	Kind           string         `json:"kind"` // apply, plan_only or destroy
	Actor          Actor          `json:"actor"`
	Organization   string         `json:"organization"`
	Environment    Environment    `json:"environment"`
	Template       Template       `json:"template"`
	Risk           Risk           `json:"risk"`
	Classification Classification `json:"classification"`
}

// Result is one rule's verdict.
type Result struct {
	RuleID      string      `json:"rule_id"`
	Title       string      `json:"title"`
	RuleVersion string      `json:"rule_version"`
	Enforcement Enforcement `json:"enforcement"` // the mode in force for this evaluation
	Passed      bool        `json:"passed"`
	Messages    []string    `json:"messages"` // sorted, deduplicated deny messages
}

// Outcome sums up an evaluation.
type Outcome string

// The outcomes, from best to worst.
const (
	OutcomePass     Outcome = "pass"
	OutcomeAdvisory Outcome = "advisory"
	OutcomeSoft     Outcome = "soft_failed"
	OutcomeHard     Outcome = "hard_failed"
)

// Evaluation is the verdict of every rule of a bundle on one plan.
type Evaluation struct {
	BundleDigest string
	Results      []Result // sorted by RuleID, one per rule in the bundle
	// Digest is the sha256 (hex) of the JSON of Results: an override binds to it.
	Digest string
	// Outcome is hard_failed if a hard-mandatory rule failed, else soft_failed if a
	// soft-mandatory one failed, else advisory if an advisory one failed, else pass.
	Outcome Outcome
}

// Evaluate runs every rule of the bundle once against the input
// {"plan": <planJSON>, "run": run}, where the plan's sensitive values are masked as
// SensitiveMask; a sensitive string found in a message or an error anyway is masked
// there too. modes sets the enforcement per rule id (the environment's settings);
// rules it does not name keep their default, and ids of rules not in the bundle are
// ignored.
//
// A rule whose evaluation fails at run time (say, a conflict between two of its
// definitions) fails closed: it is reported as failed with the error as its message.
func (b *Bundle) Evaluate(ctx context.Context, planJSON []byte, run RunContext, modes map[string]Enforcement) (Evaluation, error) {
	if err := ctx.Err(); err != nil {
		return Evaluation{}, fmt.Errorf("policies: evaluating: %w", err)
	}
	for id, m := range modes {
		if !m.Valid() {
			return Evaluation{}, fmt.Errorf("policies: rule %s: invalid enforcement %q", id, m)
		}
	}
	plan, secrets, err := planValue(planJSON)
	if err != nil {
		return Evaluation{}, err
	}
	input := ast.NewObject(
		[2]*ast.Term{ast.InternedTerm("plan"), ast.NewTerm(plan)},
		[2]*ast.Term{ast.InternedTerm("run"), ast.NewTerm(runValue(&run))},
	)

	denies := make([][]string, len(b.rules))
	failures := make([]string, len(b.rules))
	rs, err := b.query.Eval(ctx, rego.EvalParsedInput(input))
	switch {
	case err == nil && len(rs) == 1:
		for i, v := range b.denies {
			if denies[i], err = messages(rs[0].Bindings[v]); err != nil {
				failures[i] = err.Error()
			}
		}
	case ctx.Err() != nil:
		return Evaluation{}, fmt.Errorf("policies: evaluating: %w", ctx.Err())
	default:
		// Something failed (or a deny set was undefined, which a set rule never is):
		// find which rules, one at a time.
		queries, perr := b.prepared()
		if perr != nil {
			return Evaluation{}, perr
		}
		for i, q := range queries {
			rs, err := q.Eval(ctx, rego.EvalParsedInput(input))
			switch {
			case ctx.Err() != nil:
				return Evaluation{}, fmt.Errorf("policies: evaluating: %w", ctx.Err())
			case err != nil:
				failures[i] = err.Error()
			case len(rs) != 1:
				failures[i] = "deny is undefined"
			default:
				if denies[i], err = messages(rs[0].Bindings["deny"]); err != nil {
					failures[i] = err.Error()
				}
			}
		}
	}

	// The messages are stored and shown: mask any sensitive string a rule or an
	// error copied into them (input.plan has them masked already).
	red := newRedactor(secrets)
	ev := Evaluation{BundleDigest: b.digest, Results: make([]Result, len(b.rules)), Outcome: OutcomePass}
	for i, r := range b.rules {
		mode, ok := modes[r.ID]
		if !ok {
			mode = r.Enforcement
		}
		msgs := denies[i]
		if failures[i] != "" {
			msgs = []string{"the rule could not be evaluated: " + red.redact(failures[i])}
		} else if red != nil && len(msgs) > 0 {
			for j, m := range msgs {
				msgs[j] = red.redact(m)
			}
			msgs = sortDistinct(msgs)
		}
		if msgs == nil {
			msgs = []string{}
		}
		res := Result{RuleID: r.ID, Title: r.Title, RuleVersion: r.Version, Enforcement: mode, Passed: len(msgs) == 0, Messages: msgs}
		ev.Results[i] = res
		if !res.Passed {
			ev.Outcome = worse(ev.Outcome, mode)
		}
	}
	ev.Digest, err = ResultDigest(ev.Results)
	if err != nil {
		return Evaluation{}, err
	}
	return ev, nil
}

// ResultDigest is the sha256 (hex) of the JSON of results, as Evaluation.Digest.
func ResultDigest(results []Result) (string, error) {
	data, err := json.Marshal(results)
	if err != nil {
		return "", fmt.Errorf("policies: encoding results: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

var outcomeRank = map[Outcome]int{OutcomePass: 0, OutcomeAdvisory: 1, OutcomeSoft: 2, OutcomeHard: 3}

func worse(o Outcome, failed Enforcement) Outcome {
	var f Outcome
	switch failed {
	case HardMandatory:
		f = OutcomeHard
	case SoftMandatory:
		f = OutcomeSoft
	default:
		f = OutcomeAdvisory
	}
	if outcomeRank[f] > outcomeRank[o] {
		return f
	}
	return o
}

// messages reads a deny set (as the query returns it: a JSON array) into sorted,
// distinct strings. A message that is not a string is shown as its JSON.
func messages(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("deny is a %T, not a set of messages", v)
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			data, err := json.Marshal(x)
			if err != nil {
				return nil, fmt.Errorf("deny message: %w", err)
			}
			s = string(data)
		}
		out = append(out, s)
	}
	return sortDistinct(out), nil
}

// sortDistinct sorts the messages and drops duplicates (a set has none, but two
// values may render the same, or be the same once redacted).
func sortDistinct(out []string) []string {
	sort.Strings(out)
	n := 0
	for i, s := range out {
		if i == 0 || s != out[n-1] {
			out[n] = s
			n++
		}
	}
	return out[:n]
}

// ErrPlan marks a plan document that is not a JSON object.
var ErrPlan = errors.New("policies: the plan is not a JSON object")
