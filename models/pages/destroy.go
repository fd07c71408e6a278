package pages

import (
	"context"
	"strings"

	"gantry/models/catalog"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/models/state"
	"gantry/models/workspace"
)

// DestroyForm asks before a workspace is destroyed: it restates every resource its
// state holds and the template's sensitive inputs, which are typed again (they are never
// stored readable).
type DestroyForm struct {
	Workspace workspace.View
	Resources []state.Resource
	Sensitive []catalog.Input
	// Errors are the messages beside the fields of a refused submission.
	Errors map[string]string
}

// DestroyConfirmation is what a person sends to destroy a workspace: its name typed
// again, and the template's sensitive inputs.
type DestroyConfirmation struct {
	Name      string
	Sensitive map[string]string
}

// Destroy draws workspace id's destroy form. Only who may request runs draws one;
// another organization's or a hidden workspace is not found.
func (s Requests) Destroy(ctx context.Context, id string) (DestroyForm, error) {
	ws, err := workspaceToChange(ctx, s.Workspaces, id)
	if err != nil {
		return DestroyForm{}, err
	}
	return s.destroyForm(ctx, ws, nil)
}

// SubmitDestroy requests a destroy run of workspace id once its name was typed: with the
// inputs of its last applied run (and the sensitive ones typed again), through the same
// service as every request (its floors make a destroy risk 3). A refused request answers
// the form to draw again with its messages (the run is then zero).
func (s Requests) SubmitDestroy(ctx context.Context, id string, c DestroyConfirmation) (run.Run, *DestroyForm, error) {
	ws, err := workspaceToChange(ctx, s.Workspaces, id)
	if err != nil {
		return run.Run{}, nil, err
	}
	r, err := s.requestDestroy(ctx, ws, c)
	v, refused := errs.AsValidation(err)
	if err == nil {
		// As stored, with what the database filled in (the API answers it).
		r, err = s.History.Get(ctx, r.ID)
	}
	if !refused {
		return r, nil, err
	}
	form, ferr := s.destroyForm(ctx, ws, v.Fields)
	if ferr != nil {
		return run.Run{}, nil, ferr
	}
	return run.Run{}, &form, nil
}

// requestDestroy requests the destroy run of workspace ws that c confirms.
func (s Requests) requestDestroy(ctx context.Context, ws workspace.View, c DestroyConfirmation) (run.Run, error) {
	if strings.TrimSpace(c.Name) != ws.Name {
		v := &errs.Validation{}
		v.Add("confirm", "Type the workspace's name, "+ws.Name+", to confirm.")
		return run.Run{}, v
	}
	e, err := s.Catalog.Get(ws.TemplateName)
	if err != nil {
		return run.Run{}, err
	}
	values, err := s.lastApplied(ctx, e.Template, ws.ID)
	if err != nil {
		return run.Run{}, err
	}
	req := run.Request{EnvironmentID: ws.EnvironmentID, Workspace: ws.Name, Template: ws.TemplateName, Kind: run.KindDestroy,
		Inputs: map[string]string{}}
	for key, v := range values {
		req.Inputs[strings.TrimPrefix(key, "inputs.")] = v
	}
	for _, in := range e.Template.Inputs {
		if in.Sensitive {
			req.Inputs[in.Name] = c.Sensitive[in.Name]
		}
	}
	return s.Runs.Request(ctx, req)
}

// destroyForm is workspace ws's destroy form with problems beside its fields.
func (s Requests) destroyForm(ctx context.Context, ws workspace.View, problems map[string]string) (DestroyForm, error) {
	st, err := s.States.OfWorkspace(ctx, ws.ID, 1)
	if err != nil {
		return DestroyForm{}, err
	}
	f := DestroyForm{Workspace: ws, Resources: st.Resources, Errors: problems}
	// A template the catalog no longer offers: no sensitive inputs to ask for.
	if e, err := s.Catalog.Get(ws.TemplateName); err == nil {
		for _, in := range e.Template.Inputs {
			if in.Sensitive {
				f.Sensitive = append(f.Sensitive, in)
			}
		}
	}
	return f, nil
}
