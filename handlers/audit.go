package handlers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/audit"
	"gantry/models/audit/exportfile"
	"gantry/models/errs"
	"gantry/models/pages"
	"gantry/views"
	"gantry/views/paths"
)

// AuditExports requests, lists and serves signed exports.
type AuditExports interface {
	Request(ctx context.Context, req audit.ExportRequest) (audit.Export, error)
	Get(ctx context.Context, id string) (audit.Export, error)
	List(ctx context.Context, limit int) ([]audit.Export, error)
	Reader(ctx context.Context, e audit.Export) (io.ReadSeeker, error)
}

// SigningKeys serves the organization's published signing keys.
type SigningKeys interface {
	Published(ctx context.Context) (exportfile.KeySet, error)
}

// AuditPages reads the audit history page and its JSON (pages.Audit).
type AuditPages interface {
	History(ctx context.Context, q audit.Query, events bool) (pages.AuditPage, error)
	RequestExport(ctx context.Context, req audit.ExportRequest, problems *errs.Validation) (audit.Export, *pages.AuditPage, error)
	Export(ctx context.Context, id string) (pages.ExportPage, error)
	ExportFile(ctx context.Context, id string) (audit.Export, io.ReadSeeker, error)
}

// Audit serves the audit history, its JSON API, exports and the signing keys.
type Audit struct {
	Pages   AuditPages
	Exports AuditExports
	Keys    SigningKeys
	// Heartbeat is the interval of SSE comments on the export progress stream.
	Heartbeat time.Duration
}

// Register adds the audit pages' routes to g (RegisterAPI adds the API's).
func (h Audit) Register(g *echo.Group) {
	g.GET(paths.Audit(), h.history)
	g.POST(paths.AuditExports(), h.requestExport)
	g.GET(paths.RouteAuditExport, h.export)
	g.GET(paths.RouteAuditExportProgress, h.progress)
	g.GET(paths.RouteAuditExportDownload, h.download)
}

// queryFrom reads the history's filters from URL values (the page's form and the API
// take the same names), naming every field it cannot read.
func queryFrom(v url.Values) (audit.Query, error) {
	q := audit.Query{ActorID: strings.TrimSpace(v.Get("actor")), Action: strings.TrimSpace(v.Get("action")),
		RunID: strings.TrimSpace(v.Get("run")), EnvironmentID: strings.TrimSpace(v.Get("environment")),
		WorkspaceID: strings.TrimSpace(v.Get("workspace"))}
	var bad errs.Validation
	for field, dst := range map[string]*time.Time{"from": &q.From, "to": &q.To} {
		raw := strings.TrimSpace(v.Get(field))
		if raw == "" {
			continue
		}
		t, err := parseWhen(raw)
		if err != nil {
			bad.Add(field, "must be a date and time such as 2026-12-01T09:30 (UTC) or RFC 3339")
			continue
		}
		*dst = t
	}
	for field, dst := range map[string]*int64{"before": &q.Before} {
		if raw := v.Get(field); raw != "" {
			n, err := strconv.ParseInt(raw, 10, 64)
			if err != nil || n <= 0 {
				bad.Add(field, "must be a positive whole number")
				continue
			}
			*dst = n
		}
	}
	if raw := v.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > audit.MaxPage {
			bad.Add("limit", fmt.Sprintf("must be a whole number from 1 to %d", audit.MaxPage))
		} else {
			q.Limit = n
		}
	}
	if err := bad.Err(); err != nil {
		return q, err
	}
	return q, q.Validate()
}

// parseWhen reads RFC 3339, or the browser's datetime-local form taken as UTC.
func parseWhen(raw string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, raw); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("not a time: %q", raw)
}

func formValue(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04")
}

// filterValues is the query as the form and the paging links carry it.
func filterValues(q audit.Query) url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"from": formValue(q.From), "to": formValue(q.To), "actor": q.ActorID, "action": q.Action,
		"run": q.RunID, "environment": q.EnvironmentID, "workspace": q.WorkspaceID} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

func (h Audit) history(c echo.Context) error {
	q, qerr := queryFrom(c.QueryParams())
	v, refused := errs.AsValidation(qerr)
	if qerr != nil && !refused {
		return qerr
	}
	page, err := h.Pages.History(c.Request().Context(), q, !refused)
	if err != nil {
		return err
	}
	props := historyProps(page)
	status := http.StatusOK
	switch {
	case refused:
		props.Errors, status = v.Fields, http.StatusUnprocessableEntity
	case len(page.FilterErrors) > 0:
		props.Errors, status = page.FilterErrors, http.StatusUnprocessableEntity
	}
	return render.Page(c, status, views.AuditHistory(props))
}

// historyProps is the history page as page reads it, for its query.
func historyProps(page pages.AuditPage) views.AuditProps {
	q := page.Query
	props := views.AuditProps{CanExport: page.CanExport, Rows: auditRows(page.Lines), Paged: q.Before > 0,
		Newest: paths.AuditFiltered(filterValues(q)), Environments: views.SortedChoices(page.Environments),
		Filters: views.AuditFilters{From: formValue(q.From), To: formValue(q.To), Actor: q.ActorID, Action: q.Action, Run: page.Shown.Run,
			Environment: q.EnvironmentID, Workspace: page.Shown.Workspace},
		Chain: views.AuditChain{Head: page.Chain.Head, VerifiedSeq: page.Chain.VerifiedSeq, BrokenSeq: page.Chain.BrokenSeq,
			CheckedAt: page.Chain.CheckedAt, BrokenReason: page.Chain.BrokenReason}}
	for _, a := range page.Actors {
		props.Members = append(props.Members, views.AuditChoice{Value: a.ID, Label: a.Label})
	}
	for _, a := range audit.Actions {
		props.Actions = append(props.Actions, views.AuditChoice{Value: a.Code, Label: a.Label})
	}
	props.Export = exportScope(page, props, time.Now())
	if page.Next > 0 {
		next := filterValues(q)
		next.Set("before", strconv.FormatInt(page.Next, 10))
		props.Older = paths.AuditFiltered(next)
	}
	for _, e := range page.Exports {
		props.Exports = append(props.Exports, exportRow(e))
	}
	return props
}

// auditRows are the log's lines as sentences with links.
func auditRows(lines []pages.AuditLine) []views.AuditRow {
	rows := make([]views.AuditRow, 0, len(lines))
	for _, l := range lines {
		s := l.Said
		row := views.AuditRow{Seq: l.Seq, At: l.OccurredAt, Action: l.Action, Actor: s.Actor, Verb: s.Verb, Object: s.Object.Label, Rest: s.Rest}
		switch s.Object.Kind {
		case "run":
			row.ObjectURL = paths.Run(s.Object.ID)
		case "workspace":
			if l.ObjectVisible {
				row.ObjectURL = paths.Workspace(s.Object.ID)
			}
		case "export":
			row.ObjectURL = paths.AuditExport(s.Object.ID)
		case "breakglass":
			row.ObjectURL = paths.BreakglassWindow(s.Object.ID)
		}
		rows = append(rows, row)
	}
	return rows
}

// auditEventJSON is one event of the JSON API: the sentence, the codes and ids, and
// the hash-chain fields.
type auditEventJSON struct {
	Seq         int64     `json:"seq"`
	OccurredAt  time.Time `json:"occurred_at"`
	ActorID     string    `json:"actor_id"`
	ActorName   string    `json:"actor_name"`
	Action      string    `json:"action"`
	TargetType  string    `json:"target_type"`
	TargetID    string    `json:"target_id"`
	Environment string    `json:"environment_id,omitempty"`
	Workspace   string    `json:"workspace_id,omitempty"`
	Run         string    `json:"run_id,omitempty"`
	Summary     string    `json:"summary"`
	Data        any       `json:"data"`
	PrevHash    string    `json:"prev_hash"`
	Hash        string    `json:"hash"`
}

type auditPageJSON struct {
	Events []auditEventJSON `json:"events"`
	// Next is the URL of the next (older) page; absent on the last page.
	Next  string    `json:"next,omitempty"`
	Chain chainJSON `json:"chain"`
}

type chainJSON struct {
	Head         int64      `json:"head"`
	VerifiedSeq  int64      `json:"verified_seq"`
	CheckedAt    *time.Time `json:"checked_at,omitempty"`
	Intact       bool       `json:"intact"`
	BrokenSeq    int64      `json:"broken_seq,omitempty"`
	BrokenReason string     `json:"broken_reason,omitempty"`
}

func (h Audit) historyJSON(c echo.Context) error {
	q, err := queryFrom(c.QueryParams())
	if err != nil {
		return err
	}
	page, err := h.Pages.History(c.Request().Context(), q, true)
	if err != nil {
		return err
	}
	if len(page.FilterErrors) > 0 {
		return &errs.Validation{Fields: page.FilterErrors}
	}
	q = page.Query
	out := auditPageJSON{Events: make([]auditEventJSON, 0, len(page.Lines)), Chain: chainOf(page.Chain)}
	for _, l := range page.Lines {
		out.Events = append(out.Events, auditEventJSON{Seq: l.Seq, OccurredAt: l.OccurredAt.UTC(), ActorID: l.ActorID, ActorName: l.ActorName,
			Action: l.Action, TargetType: l.TargetType, TargetID: l.TargetID, Environment: l.EnvironmentID, Workspace: l.WorkspaceID, Run: l.RunID,
			Summary: l.Said.String(), Data: l.Data, PrevHash: fmt.Sprintf("%x", l.PrevHash), Hash: fmt.Sprintf("%x", l.Hash)})
	}
	if page.Next > 0 {
		next := filterValues(q)
		if q.Limit > 0 {
			next.Set("limit", strconv.Itoa(q.Limit))
		}
		next.Set("before", strconv.FormatInt(page.Next, 10))
		out.Next = paths.APIAuditEventsFiltered(next)
	}
	return c.JSON(http.StatusOK, out)
}

func chainOf(s audit.ChainState) chainJSON {
	out := chainJSON{Head: s.Head, VerifiedSeq: s.VerifiedSeq, Intact: s.Intact(), BrokenSeq: s.BrokenSeq, BrokenReason: s.BrokenReason}
	if !s.CheckedAt.IsZero() {
		at := s.CheckedAt.UTC()
		out.CheckedAt = &at
	}
	return out
}
