package pages

import (
	"context"

	"gantry/models/breakglass"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/models/workspace"
)

// BreakglassService is what the manual change path's pages need (breakglass.Service).
type BreakglassService interface {
	Get(ctx context.Context, id string) (breakglass.View, error)
	Check(ctx context.Context, req breakglass.Request) error
	Request(ctx context.Context, req breakglass.Request) (breakglass.Window, error)
	Approve(ctx context.Context, id, terms string) (breakglass.Window, error)
	Reject(ctx context.Context, id, terms, reason string) (breakglass.Window, error)
	Cancel(ctx context.Context, id string) (breakglass.Window, error)
	Open(ctx context.Context, id string) (breakglass.Window, breakglass.Credentials, error)
	IssueCredentials(ctx context.Context, id string) (breakglass.Window, breakglass.Credentials, error)
	End(ctx context.Context, id string) (breakglass.Window, error)
	Codify(ctx context.Context, id string) (breakglass.Window, run.Run, error)
	Close(ctx context.Context, id, reason string) (breakglass.Window, error)
	Recent(ctx context.Context, limit int) ([]breakglass.Window, error)
}

// WorkspaceViews reads workspaces: one, and several at once (those the reader may see)
// (workspace.Service).
type WorkspaceViews interface {
	Get(ctx context.Context, id string) (workspace.View, error)
	Views(ctx context.Context, ids []string) (map[string]workspace.View, error)
}

// RunGetter reads one run the reader may see (run.Reads).
type RunGetter interface {
	Get(ctx context.Context, id string) (run.Run, error)
}

// Breakglass builds the manual change path's pages: the request form on a workspace,
// the list of windows and each window's page; and takes their actions.
type Breakglass struct {
	Windows    BreakglassService
	Workspaces WorkspaceViews
	Runs       RunGetter
}

// WindowForm is the request form of a break-glass window on a workspace.
type WindowForm struct {
	Workspace workspace.View
	// Request is what was asked for (a refused request's, or the defaults).
	Request breakglass.Request
	// Errors are field messages: of a refused request, or (before anything was typed)
	// why this person may not ask for a window here; Refused says the refusal is about
	// the workspace or the person, not about what was typed.
	Errors  map[string]string
	Refused bool
}

// Form draws the request form on workspace id: what would refuse the request whatever
// is typed (the person, the workspace) is said before anything is typed.
func (s Breakglass) Form(ctx context.Context, id string) (WindowForm, error) {
	ws, err := workspaceToChange(ctx, s.Workspaces, id)
	if err != nil {
		return WindowForm{}, err
	}
	f := WindowForm{Workspace: ws, Request: breakglass.Request{WorkspaceID: ws.ID, Duration: breakglass.DefaultDuration}}
	probe := f.Request
	probe.Reason = "a reason long enough"
	err = s.Windows.Check(ctx, probe)
	if v, ok := errs.AsValidation(err); ok {
		f.Errors, f.Refused = v.Fields, true
	} else if err != nil {
		return WindowForm{}, err
	}
	return f, nil
}

// Submit asks for the window req describes; a refusal answers the form to draw again
// with what was typed (the window is then zero).
func (s Breakglass) Submit(ctx context.Context, req breakglass.Request) (breakglass.Window, *WindowForm, error) {
	ws, err := workspaceToChange(ctx, s.Workspaces, req.WorkspaceID)
	if err != nil {
		return breakglass.Window{}, nil, err
	}
	req.WorkspaceID = ws.ID
	w, err := s.Windows.Request(ctx, req)
	v, refused := errs.AsValidation(err)
	if !refused {
		return w, nil, err
	}
	_, aboutWorkspace := v.Fields["workspace"]
	return breakglass.Window{}, &WindowForm{Workspace: ws, Request: req, Errors: v.Fields, Refused: aboutWorkspace}, nil
}

// WindowEntry is a window in a list, with its workspace's name and environment.
type WindowEntry struct {
	breakglass.Window
	Workspace, Environment string
}

// List reads the most recent windows (at most limit) with their workspaces' names.
func (s Breakglass) List(ctx context.Context, limit int) ([]WindowEntry, error) {
	windows, err := s.Windows.Recent(ctx, limit)
	if err != nil {
		return nil, err
	}
	return WindowEntries(ctx, s.Workspaces, windows)
}

// WindowEntries are windows with their workspaces' names (a window whose workspace the
// reader may not see keeps no name).
func WindowEntries(ctx context.Context, workspaces WorkspaceViews, windows []breakglass.Window) ([]WindowEntry, error) {
	ids := make([]string, len(windows))
	for i, w := range windows {
		ids[i] = w.WorkspaceID
	}
	names, err := workspaces.Views(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]WindowEntry, 0, len(windows))
	for _, w := range windows {
		e := WindowEntry{Window: w}
		if v, ok := names[w.WorkspaceID]; ok {
			e.Workspace, e.Environment = v.Name, v.EnvironmentName
		}
		out = append(out, e)
	}
	return out, nil
}

// WindowPage is a window's page: the window, what the reader may do to it, and the runs
// it started (the drift check after it ended, its codification).
type WindowPage struct {
	breakglass.View
	DriftCheck, Codification *run.Run
	// Credentials are those just minted, shown once; Errors the problems of a refused
	// action.
	Credentials *breakglass.Credentials
	Errors      map[string]string
}

// Window reads window id's page. Another organization's or a hidden window is not
// found.
func (s Breakglass) Window(ctx context.Context, id string) (WindowPage, error) {
	v, err := s.Windows.Get(ctx, id)
	if err != nil {
		return WindowPage{}, err
	}
	p := WindowPage{View: v}
	for _, link := range []struct {
		id  *string
		dst **run.Run
	}{{v.DriftCheckRunID, &p.DriftCheck}, {v.CodifyRunID, &p.Codification}} {
		if link.id == nil {
			continue
		}
		// A run the reader may not see is left unlinked.
		if r, err := s.Runs.Get(ctx, *link.id); err == nil {
			*link.dst = &r
		}
	}
	return p, nil
}

// WindowAction is one action on a window: approve, reject, cancel, open, credentials,
// end, codify or close, with the terms digest a decision binds to and a reason.
type WindowAction struct {
	Name, Terms, Reason string
}

// Acted is what an action on a window came to: the page to draw (with credentials just
// minted, shown once, or the problems of a refused action), or the codification it
// requested; neither for any other action done.
type Acted struct {
	Page         *WindowPage
	Codification run.Run
}

// Act takes action a on window id. Field problems answer the window's page with them;
// other refusals are errors (not found, forbidden, a conflict with its reason).
func (s Breakglass) Act(ctx context.Context, id string, a WindowAction) (Acted, error) {
	var creds breakglass.Credentials
	var out Acted
	var err error
	switch a.Name {
	case "approve":
		_, err = s.Windows.Approve(ctx, id, a.Terms)
	case "reject":
		_, err = s.Windows.Reject(ctx, id, a.Terms, a.Reason)
	case "cancel":
		_, err = s.Windows.Cancel(ctx, id)
	case "open":
		_, creds, err = s.Windows.Open(ctx, id)
	case "credentials":
		_, creds, err = s.Windows.IssueCredentials(ctx, id)
	case "end":
		_, err = s.Windows.End(ctx, id)
	case "codify":
		_, out.Codification, err = s.Windows.Codify(ctx, id)
	case "close":
		_, err = s.Windows.Close(ctx, id, a.Reason)
	default:
		return Acted{}, errs.ErrNotFound
	}
	v, refused := errs.AsValidation(err)
	if err != nil && !refused {
		return Acted{}, err
	}
	if !refused && creds.Token == "" {
		return out, nil
	}
	page, err := s.Window(ctx, id)
	if err != nil {
		return Acted{}, err
	}
	if refused {
		page.Errors = v.Fields
	} else {
		page.Credentials = &creds
	}
	return Acted{Page: &page}, nil
}
