package pages

import (
	"context"
	"io"
	"slices"
	"strings"

	"gantry/models/audit"
	"gantry/models/audit/exportfile"
	"gantry/models/authz"
	"gantry/models/errs"
)

// AuditLog reads the audit log and the state of its chain (audit.Log).
type AuditLog interface {
	History(ctx context.Context, q audit.Query) (audit.HistoryPage, error)
	Chain(ctx context.Context) (audit.ChainState, error)
}

// AuditExportList lists the organization's signed exports, asks for one, reads one and
// its file (audit.Exports).
type AuditExportList interface {
	List(ctx context.Context, limit int) ([]audit.Export, error)
	Request(ctx context.Context, req audit.ExportRequest) (audit.Export, error)
	Get(ctx context.Context, id string) (audit.Export, error)
	Reader(ctx context.Context, e audit.Export) (io.ReadSeeker, error)
}

// SigningKeys are the organization's published signing keys (audit.Keys).
type SigningKeys interface {
	Published(ctx context.Context) (exportfile.KeySet, error)
}

// AuditNames resolves the ids events carry to names (the organization's directory).
type AuditNames interface {
	EnvironmentNames(ctx context.Context) (map[string]string, error)
	WorkspaceNames(ctx context.Context, ids []string) (map[string]string, error)
	MemberNames(ctx context.Context) (map[string]string, error)
}

// Audit builds the audit history page and what the API answers of it.
type Audit struct {
	Log     AuditLog
	Exports AuditExportList
	Keys    SigningKeys
	Names   AuditNames
	// Workspaces, Runs and Members find what the filters name (audit_filters.go).
	Workspaces AuditWorkspaces
	Runs       AuditRuns
	Members    AuditMembers
}

// AuditLine is one event of the log as a sentence with names.
type AuditLine struct {
	audit.Event
	Said audit.Sentence
	// ObjectVisible is false for a workspace the reader may not see (the sentence names
	// it without a link).
	ObjectVisible bool
}

// AuditPage is the audit history: the events a query asks for as sentences, the names
// its filters choose from, the chain's state and the latest exports.
type AuditPage struct {
	// Query is the query read: the filters' names resolved to ids (what the paging
	// links and the export carry). Shown is what the workspace and run fields show.
	Query audit.Query
	Shown AuditShown
	// FilterErrors are the filters that name nothing, or more than one thing, the
	// reader may see, by field: the page then holds no events.
	FilterErrors map[string]string
	// Actors are the actor filter's choices: the members by name, with their e-mail.
	Actors []AuditActor
	Lines  []AuditLine
	// Next is the seq below which the next (older) page starts (0: this is the last).
	Next  int64
	Chain audit.ChainState
	// Environments and Members name what the filters choose from (by id).
	Environments, Members map[string]string
	// CanExport: the reader may export the log; Exports are then the latest exports.
	CanExport bool
	Exports   []audit.Export
	// ExportErrors are the problems of a refused export request, beside its fields.
	ExportErrors map[string]string
}

// recentExports is how many exports the history page lists.
const recentExports = 10

// History reads the audit history for q. Without events (a query whose filters were
// refused) the page holds no events, only what its form and chain show. Only who may
// read the audit log reads it.
func (s Audit) History(ctx context.Context, q audit.Query, events bool) (AuditPage, error) {
	subject, err := authz.Require(ctx, authz.PermAuditRead)
	if err != nil {
		return AuditPage{}, err
	}
	p := AuditPage{CanExport: subject.Can(authz.PermAuditExport), Query: q, Shown: AuditShown{Workspace: q.WorkspaceID, Run: q.RunID}}
	if p.Environments, p.Members, err = s.names(ctx); err != nil {
		return AuditPage{}, err
	}
	if p.Actors, err = s.actors(ctx, q.ActorID); err != nil {
		return AuditPage{}, err
	}
	if events {
		if p.Query, p.Shown, p.FilterErrors, err = s.resolve(ctx, q, p.Environments); err != nil {
			return AuditPage{}, err
		}
	}
	if events && len(p.FilterErrors) == 0 {
		page, err := s.Log.History(ctx, p.Query)
		if err != nil {
			return AuditPage{}, err
		}
		p.Next = page.Next
		if p.Lines, err = s.describe(ctx, page.Events, p.Environments, p.Members); err != nil {
			return AuditPage{}, err
		}
	}
	if p.Chain, err = s.Log.Chain(ctx); err != nil {
		return AuditPage{}, err
	}
	if p.CanExport {
		if p.Exports, err = s.Exports.List(ctx, recentExports); err != nil {
			return AuditPage{}, err
		}
	}
	return p, nil
}

// RequestExport asks for a signed export of req, whose form already found problems
// (nil: none). A refused request answers the history page of the same filters and
// range to draw again with the problems (the export is then zero).
func (s Audit) RequestExport(ctx context.Context, req audit.ExportRequest, problems *errs.Validation) (audit.Export, *AuditPage, error) {
	v := problems
	if v == nil {
		e, err := s.Exports.Request(ctx, req)
		var refused bool
		if v, refused = errs.AsValidation(err); !refused {
			return e, nil, err
		}
	}
	page, err := s.History(ctx, req.Query, problems == nil)
	if err != nil {
		return audit.Export{}, nil, err
	}
	page.ExportErrors = v.Fields
	return audit.Export{}, &page, nil
}

// names are the organization's environments and members by id, the system among them.
func (s Audit) names(ctx context.Context) (envs, members map[string]string, err error) {
	if envs, err = s.Names.EnvironmentNames(ctx); err != nil {
		return nil, nil, err
	}
	if members, err = s.Names.MemberNames(ctx); err != nil {
		return nil, nil, err
	}
	members["system"] = "Gantry (system)"
	return envs, members, nil
}

// Describe turns events into sentences with the organization's names.
func (s Audit) Describe(ctx context.Context, events []audit.Event) ([]AuditLine, error) {
	envs, members, err := s.names(ctx)
	if err != nil {
		return nil, err
	}
	return s.describe(ctx, events, envs, members)
}

// describe turns events into sentences with names (envs and members, completed with
// the workspaces the events name).
func (s Audit) describe(ctx context.Context, events []audit.Event, envs, members map[string]string) ([]AuditLine, error) {
	var wsIDs []string
	for _, e := range events {
		for _, id := range []string{e.WorkspaceID, workspaceOfData(e)} {
			if id != "" && !slices.Contains(wsIDs, id) {
				wsIDs = append(wsIDs, id)
			}
		}
	}
	workspaces, err := s.Names.WorkspaceNames(ctx, wsIDs)
	if err != nil {
		return nil, err
	}
	names := audit.Names{Environments: envs, Workspaces: workspaces, Users: members, RunStates: runStateWords}
	lines := make([]AuditLine, 0, len(events))
	for _, e := range events {
		l := AuditLine{Event: e, Said: audit.Describe(e, names), ObjectVisible: true}
		if l.Said.Object.Kind == "workspace" {
			_, l.ObjectVisible = workspaces[l.Said.Object.ID]
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// workspaceOfData is the workspace an older event names only in its data.
func workspaceOfData(e audit.Event) string {
	if e.WorkspaceID != "" || !strings.HasPrefix(e.Action, "run.") {
		return ""
	}
	return audit.WorkspaceOfData(e)
}

// ExportPage is a signed export's page: the export, the keys that verify it and the
// environments its filters name (by id).
type ExportPage struct {
	Export           audit.Export
	Keys             exportfile.KeySet
	EnvironmentNames map[string]string
}

// Export reads export id's page. Another organization's export is not found.
func (s Audit) Export(ctx context.Context, id string) (ExportPage, error) {
	e, err := s.Exports.Get(ctx, id)
	if err != nil {
		return ExportPage{}, err
	}
	p := ExportPage{Export: e}
	if p.Keys, err = s.Keys.Published(ctx); err != nil {
		return ExportPage{}, err
	}
	if p.EnvironmentNames, err = s.Names.EnvironmentNames(ctx); err != nil {
		return ExportPage{}, err
	}
	return p, nil
}

// ExportFile opens export id's file to download; an export not ready yet is a conflict
// that says so.
func (s Audit) ExportFile(ctx context.Context, id string) (audit.Export, io.ReadSeeker, error) {
	e, err := s.Exports.Get(ctx, id)
	if err != nil {
		return audit.Export{}, nil, err
	}
	if e.Status != audit.ExportReady {
		return audit.Export{}, nil, errs.Explain(errs.ErrConflict, "This export is not ready yet.")
	}
	r, err := s.Exports.Reader(ctx, e)
	if err != nil {
		return audit.Export{}, nil, err
	}
	return e, r, nil
}
