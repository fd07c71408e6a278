package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
)

// Promotion (DESIGN §9): a workspace goes to the next environment of its organization's
// promotion order as a normal run there, through every gate of that environment, with
// the same template version (so the same module digest and provider lock) as the run
// last applied to it; of the inputs, only those the template marks capacity, count,
// retention or scaling may differ. Encryption, network shape, policy attachment and
// logging are marked fixed: a promotion that changes one is refused, naming each.

// mayDiverge are the divergence kinds whose inputs a promotion may change.
var mayDiverge = []string{"capacity", "count", "retention", "scaling"}

// MayDiverge is whether a promotion may change an input of divergence kind (one that
// names no kind is fixed).
func MayDiverge(kind string) bool { return slices.Contains(mayDiverge, kind) }

// Promotable is what promoting a workspace starts from: the run last applied to it and
// the environments it may go to.
type Promotable struct {
	Source       Run
	SourceLabel  string // "orders-db #3 in staging"
	Environments []environment.Environment
	// Inputs are the source's inputs as its configuration holds them; a sensitive
	// one's Value is left empty (it is typed again).
	Inputs []InputValue
}

// PromotionOf says what promoting workspaceID can start from, or why it cannot: nothing
// applied to it yet, the last environment of the order, a template version the catalog
// no longer offers. Another organization's or a hidden workspace is not found.
func (s *Promotions) PromotionOf(ctx context.Context, workspaceID string) (Promotable, error) {
	p, _, err := s.promotable(ctx, workspaceID)
	return p, err
}

// promotable is PromotionOf, and the source's inputs with the values of its sensitive
// ones, which a promotion compares and Promotable never carries (the source's bundle
// holds them in clear only if it predates sealing them).
func (s *Promotions) promotable(ctx context.Context, workspaceID string) (Promotable, []InputValue, error) {
	p, err := s.promotionOf(ctx, workspaceID)
	if err != nil {
		return Promotable{}, nil, err
	}
	withSecrets := p.Inputs
	p.Inputs = make([]InputValue, len(withSecrets))
	for i, in := range withSecrets {
		if in.Sensitive {
			in.Value = ""
		}
		p.Inputs[i] = in
	}
	return p, withSecrets, nil
}

// promotionOf is PromotionOf with the values of the sensitive inputs in.
func (s *Promotions) promotionOf(ctx context.Context, workspaceID string) (Promotable, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return Promotable{}, err
	}
	// Another organization's workspace, or one in an environment the person may not
	// see, is not found: before anything about it is said.
	ws, err := s.k.workspaces.Get(ctx, subject.OrganizationID, workspaceID)
	if err != nil {
		return Promotable{}, err
	}
	if err := s.k.environments.CheckVisible(ctx, subject, ws.EnvironmentID); err != nil {
		return Promotable{}, err
	}
	// The workspace's newest applied change: an apply, or a destroy that emptied it.
	runs, err := s.k.list(ctx, listQuery{workspaceID: workspaceID, states: []State{Succeeded}, kinds: []Kind{KindApply, KindDestroy},
		order: "number DESC", limit: 1})
	if err != nil {
		return Promotable{}, err
	}
	switch {
	case len(runs) == 0:
		return Promotable{}, errs.Explain(errs.ErrConflict, "Nothing has been applied to this workspace yet: there is nothing to promote.")
	case runs[0].Kind == KindDestroy:
		return Promotable{}, errs.Explain(errs.ErrConflict, fmt.Sprintf("Run %s destroyed what this workspace held: there is nothing to promote.", runs[0].Label()))
	}
	src := runs[0]
	out := Promotable{Source: src}
	name := ws.Name
	env, err := s.k.environments.Lookup(ctx, subject.OrganizationID, src.EnvironmentID)
	if err != nil {
		return Promotable{}, err
	}
	out.SourceLabel = name + " " + src.Label() + " in " + env.Name
	if facts, err := s.k.catalog.Facts(src.TemplateName); err != nil || facts.Version != src.TemplateVersion {
		return Promotable{}, errs.Explain(errs.ErrConflict, fmt.Sprintf("Run %s applied %s %s, which the catalog no longer offers: apply the template's current version here first, then promote.",
			out.SourceLabel, src.TemplateName, src.TemplateVersion))
	}
	next, err := s.k.environments.NextInPromotion(ctx, subject.OrganizationID, src.EnvironmentID)
	if err != nil {
		return Promotable{}, err
	}
	for _, e := range next {
		if s.k.environments.CheckVisible(ctx, subject, e.ID) == nil {
			out.Environments = append(out.Environments, e)
		}
	}
	if len(out.Environments) == 0 {
		return Promotable{}, errs.Explain(errs.ErrConflict, fmt.Sprintf("No environment comes after %s in this organization's promotion order: there is nowhere to promote to.", env.Name))
	}
	config, _, err := s.k.artifacts.Get(ctx, subject.OrganizationID, src.ConfigArtifactID)
	if err != nil {
		return Promotable{}, err
	}
	sealed, err := s.k.sensitiveValues(ctx, src)
	if err != nil {
		return Promotable{}, err
	}
	if out.Inputs, err = s.k.catalog.Inputs(src.TemplateName, config, sealed); err != nil {
		return Promotable{}, err
	}
	return out, nil
}

// PromotionRequest asks to promote a workspace to an environment, as a workspace of a
// name there, with these inputs (the form's raw values).
type PromotionRequest struct {
	WorkspaceID   string
	EnvironmentID string
	Workspace     string
	Inputs        map[string]string
	// NewWorkspace confirms a new workspace whose name is close to an existing one
	// there ("did you mean", as on the request form).
	NewWorkspace bool
}

// Difference is one input a promotion may not change, with its value in the source
// and the value asked for (a sensitive one's values are not shown).
type Difference struct {
	Name, Label, Divergence string
	Source, Requested       string
	Sensitive               bool
}

// PromotionBlocked refuses a promotion that changes inputs the template fixes.
type PromotionBlocked struct {
	Differences []Difference
}

func (e *PromotionBlocked) Error() string {
	names := make([]string, len(e.Differences))
	for i, d := range e.Differences {
		names[i] = d.Name
	}
	return fmt.Sprintf("a promotion may not change %s: %v", strings.Join(names, ", "), errs.ErrConflict)
}

// Unwrap makes the refusal a conflict (409) wherever it is not shown side by side.
func (e *PromotionBlocked) Unwrap() error { return errs.ErrConflict }

// Promote requests the promotion: a normal run in the target environment (every gate
// of it, whatever the source passed), recording the run it promotes. A target that is
// not next in the order or bad inputs are field messages; a changed fixed input is
// *PromotionBlocked; nothing is written for either.
func (s *Promotions) Promote(ctx context.Context, req PromotionRequest) (Run, error) {
	p, source, err := s.promotable(ctx, req.WorkspaceID)
	if err != nil {
		return Run{}, err
	}
	if !slices.ContainsFunc(p.Environments, func(e environment.Environment) bool { return e.ID == req.EnvironmentID }) {
		v := &errs.Validation{}
		v.Add("environment", "Choose one of the environments that come next in this organization's promotion order.")
		return Run{}, v
	}
	validated, err := s.k.catalog.Validate(p.Source.TemplateName, req.Inputs)
	if err != nil {
		return Run{}, err
	}
	// Generated only to read the inputs as a configuration holds them, so the values
	// compare as the source's stored ones do.
	cfg, err := s.k.catalog.Generate(validated, p.Source.WorkspaceID, s.k.stateAddress(p.Source.Runner, p.Source.WorkspaceID))
	if err != nil {
		return Run{}, fmt.Errorf("generating configuration: %w", err)
	}
	tarball, _, err := cfg.Tar()
	if err != nil {
		return Run{}, err
	}
	asked, err := s.k.catalog.Inputs(p.Source.TemplateName, tarball, validated.Sensitive)
	if err != nil {
		return Run{}, err
	}
	if d := differences(source, asked); len(d) > 0 {
		return Run{}, &PromotionBlocked{Differences: d}
	}
	return s.requests.request(ctx, Request{EnvironmentID: req.EnvironmentID, Workspace: req.Workspace, Template: p.Source.TemplateName,
		Inputs: req.Inputs, Kind: KindApply, NewWorkspace: req.NewWorkspace}, &promotion{from: p.Source, label: p.SourceLabel})
}

// differences are the inputs asked changes from source that may not diverge: every
// kind but capacity, count, retention and scaling (an input that names no kind is fixed).
func differences(source, asked []InputValue) []Difference {
	var out []Difference
	for _, a := range asked {
		if MayDiverge(a.Divergence) {
			continue
		}
		i := slices.IndexFunc(source, func(s InputValue) bool { return s.Name == a.Name })
		var src InputValue
		if i >= 0 {
			src = source[i]
		}
		if src.Set == a.Set && src.Value == a.Value {
			continue
		}
		d := Difference{Name: a.Name, Label: a.Label, Divergence: a.Divergence, Source: shown(src), Requested: shown(a), Sensitive: a.Sensitive}
		if d.Divergence == "" { // the manifest says "fixed" for none; a caller may not
			d.Divergence = "fixed"
		}
		out = append(out, d)
	}
	return out
}

// shown is an input's value as a person reads it: "(none)" when unset, the string
// without its quotes, a sensitive one masked.
func shown(v InputValue) string {
	switch {
	case !v.Set:
		return "(none)"
	case v.Sensitive:
		return "(sensitive)"
	}
	var text string
	if json.Unmarshal([]byte(v.Value), &text) == nil {
		return text
	}
	return v.Value
}

// AsPromotionBlocked reports whether err refuses a promotion for changed fixed inputs.
func AsPromotionBlocked(err error) (*PromotionBlocked, bool) {
	var b *PromotionBlocked
	ok := errors.As(err, &b)
	return b, ok
}
