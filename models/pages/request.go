package pages

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"gantry/models/authz"
	"gantry/models/catalog"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/models/state"
	"gantry/models/workspace"
)

// CatalogReader reads the catalog's templates (catalog.Catalog).
type CatalogReader interface {
	Get(name string) (catalog.Entry, error)
}

// RunRequester validates and queues runs (run.Requests).
type RunRequester interface {
	Request(ctx context.Context, req run.Request) (run.Run, error)
}

// RequestPreviewer says who decides and what a request costs before it is submitted
// (run.Previewer).
type RequestPreviewer interface {
	Preview(ctx context.Context, req run.Request) (run.Preview, error)
}

// EnvironmentChooser lists the environments the reader may request runs in
// (environment.Directory).
type EnvironmentChooser interface {
	Choices(ctx context.Context) ([]environment.Environment, error)
}

// RunHistory reads runs: one, and a workspace's, newest first (run.Reads).
type RunHistory interface {
	Get(ctx context.Context, id string) (run.Run, error)
	ListForWorkspace(ctx context.Context, workspaceID string, limit int) ([]run.Run, error)
}

// WorkspaceStates reads what a workspace's state holds (state.Service).
type WorkspaceStates interface {
	OfWorkspace(ctx context.Context, workspaceID string, limit int) (state.WorkspaceState, error)
}

// Requests builds the request forms (a new request, a request again from an earlier
// run; a change of a workspace, change.go; a workspace's destroy) and submits them: a refused
// submission answers the form to draw again, with the messages beside its fields.
type Requests struct {
	Catalog      CatalogReader
	Runs         RunRequester
	Previews     RequestPreviewer
	Environments EnvironmentChooser
	// A change of a workspace starts from what it holds: its environment, name and the
	// inputs of its last applied run.
	Workspaces WorkspaceReader
	History    RunHistory
	// A destroy restates what the workspace's state holds.
	States WorkspaceStates
}

// FormStart is where a request form starts: a template, and either nothing (a new
// workspace) or an earlier run to ask for again. A change of a workspace has its own
// form (Change).
type FormStart struct {
	Template string
	FromRun  string // a run of the template whose request to start from
}

// RequestForm is the request form as drawn.
type RequestForm struct {
	Template catalog.Template
	// Environments are those the reader may request runs in.
	Environments []environment.Environment
	// Request is what the form asks for: kind, environment, workspace, and the inputs
	// the preview was made of (defaults included).
	Request run.Request
	// Values are the fields' values ("inputs.<name>"), never a sensitive one: a form that
	// comes back with errors would write a secret just typed into the page; it is typed
	// again.
	Values map[string]string
	// Errors are the messages beside the fields of a refused submission.
	Errors  map[string]string
	Preview run.Preview
}

// Form draws the request form from start. Only who may request runs draws one; another
// organization's or a hidden workspace or run is not found, one of another template a
// bad request.
func (s Requests) Form(ctx context.Context, start FormStart) (RequestForm, error) {
	if _, err := authz.Require(ctx, authz.PermProvisioningPlan); err != nil {
		return RequestForm{}, err
	}
	e, err := s.Catalog.Get(start.Template)
	if err != nil {
		return RequestForm{}, err
	}
	values := map[string]string{}
	for _, in := range e.Template.Inputs {
		if in.Default != nil && !in.Sensitive {
			values["inputs."+in.Name] = fmt.Sprint(in.Default)
		}
	}
	req := run.Request{Kind: run.KindApply}
	if start.FromRun != "" {
		if req, err = s.resubmitOf(ctx, e.Template, start.FromRun, values); err != nil {
			return RequestForm{}, err
		}
	}
	return s.form(ctx, e.Template, req, values, nil)
}

// Request requests the run req asks for and reads it back as stored (with what the
// database filled in): the API's request, whose refusals are its field messages.
func (s Requests) Request(ctx context.Context, req run.Request) (run.Run, error) {
	r, err := s.Runs.Request(ctx, req)
	if err != nil {
		return run.Run{}, err
	}
	return s.History.Get(ctx, r.ID)
}

// Submit requests the run req asks for (values are the form's fields as sent). A
// refused request answers the form to draw again with its messages (the run is then
// zero); a request of a template the catalog does not hold answers the messages alone.
func (s Requests) Submit(ctx context.Context, req run.Request, values map[string]string) (run.Run, *RequestForm, error) {
	r, err := s.Runs.Request(ctx, req)
	v, refused := errs.AsValidation(err)
	if !refused {
		return r, nil, err
	}
	e, gerr := s.Catalog.Get(req.Template)
	if gerr != nil {
		return run.Run{}, nil, err
	}
	form, ferr := s.form(ctx, e.Template, req, values, v.Fields)
	if ferr != nil {
		return run.Run{}, nil, ferr
	}
	return run.Run{}, &form, nil
}

// form is the form of template t for req with values in its fields, and its preview.
func (s Requests) form(ctx context.Context, t catalog.Template, req run.Request, values, problems map[string]string) (RequestForm, error) {
	envs, err := s.Environments.Choices(ctx)
	if err != nil {
		return RequestForm{}, err
	}
	// The preview of the form as drawn: its template and the values in its fields
	// (defaults included, and sensitive ones just typed).
	req.Template, req.Inputs = t.Name, map[string]string{}
	for k, v := range values {
		if name, ok := strings.CutPrefix(k, "inputs."); ok {
			req.Inputs[name] = v
		}
	}
	preview, err := s.Previews.Preview(ctx, req)
	if err != nil {
		return RequestForm{}, err
	}
	shown := maps.Clone(values)
	for _, in := range t.Inputs {
		if in.Sensitive {
			delete(shown, "inputs."+in.Name)
		}
	}
	return RequestForm{Template: t, Environments: envs, Request: req, Values: shown, Errors: problems, Preview: preview}, nil
}

// resubmitOf starts the request form from run id's request (a rejected plan, to edit
// and ask for again): its environment, workspace, kind and inputs (never a sensitive
// one). Another template's run is a bad request.
func (s Requests) resubmitOf(ctx context.Context, t catalog.Template, id string, values map[string]string) (run.Request, error) {
	r, err := s.History.Get(ctx, id)
	if err != nil {
		return run.Request{}, err
	}
	if r.TemplateName != t.Name {
		return run.Request{}, fmt.Errorf("run %s is a %s, not a %s: %w", r.ID, r.TemplateName, t.Name, errs.ErrBadRequest)
	}
	ws, err := s.Workspaces.Get(ctx, r.WorkspaceID)
	if err != nil {
		return run.Request{}, err
	}
	if err := inputsOf(r, t, values); err != nil {
		return run.Request{}, err
	}
	return run.Request{Kind: r.Kind, EnvironmentID: r.EnvironmentID, Workspace: ws.Name,
		Note: run.Note{Reason: r.RequestReason, Ticket: r.RequestTicket}}, nil
}

// inputsOf puts run r's inputs into values as form values, sensitive ones left out
// (they are stored masked).
func inputsOf(r run.Run, t catalog.Template, values map[string]string) error {
	var given map[string]any
	if err := json.Unmarshal(r.Inputs, &given); err != nil {
		return fmt.Errorf("reading the inputs of run %s: %w", r.ID, err)
	}
	for _, in := range t.Inputs {
		if v, ok := given[in.Name]; ok && !in.Sensitive {
			values["inputs."+in.Name] = fmt.Sprint(v)
		}
	}
	return nil
}

// lastApplied is the inputs of workspace id's last applied run, as form values
// ("inputs.<name>"), sensitive ones left out (they are stored masked); none when
// nothing was applied.
func (s Requests) lastApplied(ctx context.Context, t catalog.Template, id string) (map[string]string, error) {
	values, _, err := s.applied(ctx, t, id)
	return values, err
}

// workspaceToChange reads workspace id for a change: only who may request runs changes
// one; another organization's or a hidden workspace is not found.
func workspaceToChange(ctx context.Context, wss WorkspaceReader, id string) (workspace.View, error) {
	ws, err := wss.Get(ctx, id)
	if err != nil {
		return workspace.View{}, err
	}
	if _, err := authz.Require(ctx, authz.PermProvisioningPlan); err != nil {
		return workspace.View{}, err
	}
	return ws, nil
}
