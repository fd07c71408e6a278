// Package promotion promotes a workspace to the next environment (DESIGN §9): a
// workspace goes to the next environment of its organization's promotion order as a
// normal run there, through every gate of that environment, with the same template
// version (so the same module digest and provider lock) as the run last applied to it;
// of the inputs, only those the template marks capacity, count, retention or scaling
// may differ. Encryption, network shape, policy attachment and logging are marked
// fixed: a promotion that changes one is refused, naming each.
//
// It stands outside the run lifecycle and asks it through its roles, as
// models/breakglass does: what was last applied and with which inputs (run.Reads), and
// a request that records where it comes from (run.Requests).
package promotion

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
	"gantry/models/run"
	"gantry/models/workspace"
)

// What promotions need from elsewhere, each a small interface its owner implements.

// Runs is what promotions read of runs (run.Reads).
type Runs interface {
	// LastApplied is the newest run that applied a change to the workspace (nil: none).
	LastApplied(ctx context.Context, workspaceID string) (*run.Run, error)
	// InputsOf are a run's inputs, the sensitive ones' values in (compared, never shown).
	InputsOf(ctx context.Context, runID string) ([]run.InputValue, error)
}

// Requests requests the promoted run (run.Requests).
type Requests interface {
	RequestPromoted(ctx context.Context, req run.Request, fromID, label string) (run.Run, error)
}

// Environments reads where a workspace may go (environment.Directory).
type Environments interface {
	Lookup(ctx context.Context, orgID, id string) (environment.Environment, error)
	CheckVisible(ctx context.Context, subject authz.Subject, id string) error
	NextInPromotion(ctx context.Context, orgID, id string) ([]environment.Environment, error)
}

// Workspaces reads the workspace promoted (workspace.Store).
type Workspaces interface {
	Get(ctx context.Context, orgID, id string) (workspace.Workspace, error)
}

// Config is what a Service is built from; every field is required.
type Config struct {
	Runs         Runs
	Requests     Requests
	Environments Environments
	Workspaces   Workspaces
	// Catalog validates the inputs asked for and reads them as a configuration holds
	// them (catalog.ForRuns).
	Catalog run.Catalog
	// StateAddress is the state backend address of a workspace's jobs (as for runs): a
	// configuration generated to read the inputs asked for is generated with it.
	StateAddress func(runner, workspaceID string) string
}

// Service promotes workspaces. Every method authorizes the subject in ctx.
type Service struct {
	runs         Runs
	requests     Requests
	environments Environments
	workspaces   Workspaces
	catalog      run.Catalog
	stateAddress func(runner, workspaceID string) string
}

// New returns the promotion service.
func New(c Config) (*Service, error) {
	if c.Runs == nil || c.Requests == nil || c.Environments == nil || c.Workspaces == nil || c.Catalog == nil || c.StateAddress == nil {
		return nil, errors.New("promotion: Runs, Requests, Environments, Workspaces, Catalog and StateAddress are required")
	}
	return &Service{runs: c.Runs, requests: c.Requests, environments: c.Environments, workspaces: c.Workspaces,
		catalog: c.Catalog, stateAddress: c.StateAddress}, nil
}

// mayDiverge are the divergence kinds whose inputs a promotion may change.
var mayDiverge = []string{"capacity", "count", "retention", "scaling"}

// MayDiverge is whether a promotion may change an input of divergence kind (one that
// names no kind is fixed).
func MayDiverge(kind string) bool { return slices.Contains(mayDiverge, kind) }

// DivergenceInWords is what divergence kind means for a person reading a template:
// whether a promotion keeps the input or lets it differ between environments.
func DivergenceInWords(kind string) string {
	if MayDiverge(kind) {
		return "may differ between environments (" + kind + ")"
	}
	return "the same in every environment"
}

// Promotable is what promoting a workspace starts from: the run last applied to it and
// the environments it may go to.
type Promotable struct {
	Source       run.Run
	SourceLabel  string // "orders-db #3 in staging"
	Environments []environment.Environment
	// Inputs are the source's inputs as its configuration holds them; a sensitive
	// one's Value is left empty (it is typed again).
	Inputs []run.InputValue
}

// PromotionOf says what promoting workspaceID can start from, or why it cannot: nothing
// applied to it yet, the last environment of the order, a template version the catalog
// no longer offers. Another organization's or a hidden workspace is not found.
func (s *Service) PromotionOf(ctx context.Context, workspaceID string) (Promotable, error) {
	p, _, err := s.promotable(ctx, workspaceID)
	return p, err
}

// promotable is PromotionOf, and the source's inputs with the values of its sensitive
// ones, which a promotion compares and Promotable never carries (the source's bundle
// holds them in clear only if it predates sealing them).
func (s *Service) promotable(ctx context.Context, workspaceID string) (Promotable, []run.InputValue, error) {
	p, err := s.promotionOf(ctx, workspaceID)
	if err != nil {
		return Promotable{}, nil, err
	}
	withSecrets := p.Inputs
	p.Inputs = make([]run.InputValue, len(withSecrets))
	for i, in := range withSecrets {
		if in.Sensitive {
			in.Value = ""
		}
		p.Inputs[i] = in
	}
	return p, withSecrets, nil
}

// promotionOf is PromotionOf with the values of the sensitive inputs in.
func (s *Service) promotionOf(ctx context.Context, workspaceID string) (Promotable, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return Promotable{}, err
	}
	// Another organization's workspace, or one in an environment the person may not
	// see, is not found: before anything about it is said.
	ws, err := s.workspaces.Get(ctx, subject.OrganizationID, workspaceID)
	if err != nil {
		return Promotable{}, err
	}
	if err := s.environments.CheckVisible(ctx, subject, ws.EnvironmentID); err != nil {
		return Promotable{}, err
	}
	// The workspace's newest applied change: an apply, or a destroy that emptied it.
	last, err := s.runs.LastApplied(ctx, workspaceID)
	if err != nil {
		return Promotable{}, err
	}
	switch {
	case last == nil:
		return Promotable{}, errs.Explain(errs.ErrConflict, "Nothing has been applied to this workspace yet: there is nothing to promote.")
	case last.Kind == run.KindDestroy:
		return Promotable{}, errs.Explain(errs.ErrConflict, fmt.Sprintf("Run %s destroyed what this workspace held: there is nothing to promote.", last.Label()))
	}
	src := *last
	out := Promotable{Source: src}
	name := ws.Name
	env, err := s.environments.Lookup(ctx, subject.OrganizationID, src.EnvironmentID)
	if err != nil {
		return Promotable{}, err
	}
	out.SourceLabel = name + " " + src.Label() + " in " + env.Name
	if facts, err := s.catalog.Facts(src.TemplateName); err != nil || facts.Version != src.TemplateVersion {
		return Promotable{}, errs.Explain(errs.ErrConflict, fmt.Sprintf("Run %s applied %s %s, which the catalog no longer offers: apply the template's current version here first, then promote.",
			out.SourceLabel, src.TemplateName, src.TemplateVersion))
	}
	next, err := s.environments.NextInPromotion(ctx, subject.OrganizationID, src.EnvironmentID)
	if err != nil {
		return Promotable{}, err
	}
	for _, e := range next {
		if s.environments.CheckVisible(ctx, subject, e.ID) == nil {
			out.Environments = append(out.Environments, e)
		}
	}
	if len(out.Environments) == 0 {
		return Promotable{}, errs.Explain(errs.ErrConflict, fmt.Sprintf("No environment comes after %s in this organization's promotion order: there is nowhere to promote to.", env.Name))
	}
	if out.Inputs, err = s.runs.InputsOf(ctx, src.ID); err != nil {
		return Promotable{}, err
	}
	return out, nil
}

// Request asks to promote a workspace to an environment, as a workspace of a name
// there, with these inputs (the form's raw values).
type Request struct {
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

// Blocked refuses a promotion that changes inputs the template fixes.
type Blocked struct {
	Differences []Difference
}

func (e *Blocked) Error() string {
	names := make([]string, len(e.Differences))
	for i, d := range e.Differences {
		names[i] = d.Name
	}
	return fmt.Sprintf("a promotion may not change %s: %v", strings.Join(names, ", "), errs.ErrConflict)
}

// Unwrap makes the refusal a conflict (409) wherever it is not shown side by side.
func (e *Blocked) Unwrap() error { return errs.ErrConflict }

// Promote requests the promotion: a normal run in the target environment (every gate
// of it, whatever the source passed), recording the run it promotes. A target that is
// not next in the order or bad inputs are field messages; a changed fixed input is
// *Blocked; nothing is written for either.
func (s *Service) Promote(ctx context.Context, req Request) (run.Run, error) {
	p, source, err := s.promotable(ctx, req.WorkspaceID)
	if err != nil {
		return run.Run{}, err
	}
	if !slices.ContainsFunc(p.Environments, func(e environment.Environment) bool { return e.ID == req.EnvironmentID }) {
		v := &errs.Validation{}
		v.Add("environment", "Choose one of the environments that come next in this organization's promotion order.")
		return run.Run{}, v
	}
	validated, err := s.catalog.Validate(p.Source.TemplateName, req.Inputs)
	if err != nil {
		return run.Run{}, err
	}
	// Generated only to read the inputs as a configuration holds them, so the values
	// compare as the source's stored ones do (in the source's place: a template that
	// labels its resources with the environment needs one).
	validated.OrganizationID, validated.EnvironmentID = p.Source.OrganizationID, p.Source.EnvironmentID
	if validated.Modules, err = s.catalog.Modules(ctx, p.Source.TemplateName); err != nil {
		return run.Run{}, err
	}
	cfg, err := s.catalog.Generate(validated, p.Source.WorkspaceID, s.stateAddress(p.Source.Runner, p.Source.WorkspaceID))
	if err != nil {
		return run.Run{}, fmt.Errorf("generating configuration: %w", err)
	}
	tarball, _, err := cfg.Tar()
	if err != nil {
		return run.Run{}, err
	}
	asked, err := s.catalog.Inputs(p.Source.TemplateName, tarball, validated.Sensitive)
	if err != nil {
		return run.Run{}, err
	}
	if d := differences(source, asked); len(d) > 0 {
		return run.Run{}, &Blocked{Differences: d}
	}
	return s.requests.RequestPromoted(ctx, run.Request{EnvironmentID: req.EnvironmentID, Workspace: req.Workspace, Template: p.Source.TemplateName,
		Inputs: req.Inputs, Kind: run.KindApply, NewWorkspace: req.NewWorkspace}, p.Source.ID, p.SourceLabel)
}

// differences are the inputs asked changes from source that may not diverge: every
// kind but capacity, count, retention and scaling (an input that names no kind is fixed).
func differences(source, asked []run.InputValue) []Difference {
	var out []Difference
	for _, a := range asked {
		if MayDiverge(a.Divergence) {
			continue
		}
		i := slices.IndexFunc(source, func(s run.InputValue) bool { return s.Name == a.Name })
		var src run.InputValue
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
func shown(v run.InputValue) string {
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

// AsBlocked reports whether err refuses a promotion for changed fixed inputs.
func AsBlocked(err error) (*Blocked, bool) {
	var b *Blocked
	ok := errors.As(err, &b)
	return b, ok
}
