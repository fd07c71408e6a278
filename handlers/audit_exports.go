package handlers

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/audit"
	"gantry/models/audit/exportfile"
	"gantry/models/errs"
	"gantry/views"
	"gantry/views/paths"
)

// The audit exports: asking for one, its page and live progress, its download, and
// the organization's public keys that verify it.

func exportRow(e audit.Export) views.AuditExportRow {
	row := views.AuditExportRow{ID: e.ID, Format: e.Format, From: e.FromTime, To: e.ToTime, Status: e.Status, Percent: e.Percent(),
		Events: e.EventsDone, CreatedAt: e.CreatedAt, SHA256: e.SHA256, Error: e.Error, URL: paths.AuditExport(e.ID), FileName: e.FileName(),
		Filtered: !e.Filters.Empty()}
	if e.EventsTotal != nil {
		row.Total = *e.EventsTotal
	}
	if e.Size != nil {
		row.Size = *e.Size
	}
	if e.Status == audit.ExportReady {
		row.DownloadURL = paths.AuditExportDownload(e.ID)
	}
	return row
}

func (h Audit) requestExport(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return fmt.Errorf("reading the form: %w", errs.ErrBadRequest)
	}
	q, err := queryFrom(form)
	problems, invalid := errs.AsValidation(err)
	if err != nil && !invalid {
		return err
	}
	q.Before, q.Limit = 0, 0 // an export is the whole range, not a page
	e, refused, err := h.Pages.RequestExport(c.Request().Context(), audit.ExportRequest{Query: q, Format: form.Get("format")}, problems)
	switch {
	case err != nil:
		return err
	case refused != nil && render.WantsJSON(c):
		return &errs.Validation{Fields: refused.ExportErrors}
	case refused != nil:
		// The history of the filters and range the export was asked with, saying what
		// is wrong: a range or a filter beside the filters' field (the export takes
		// theirs), the format beside its own.
		props := historyProps(*refused)
		props.Export.Format = form.Get("format")
		for field, msg := range refused.ExportErrors {
			if field == "format" {
				props.ExportErrors = map[string]string{field: msg}
				continue
			}
			if props.Errors == nil {
				props.Errors, props.Filters.From, props.Filters.To = map[string]string{}, form.Get("from"), form.Get("to")
			}
			props.Errors[field] = msg
		}
		return render.Page(c, http.StatusUnprocessableEntity, views.AuditHistory(props))
	case render.WantsJSON(c):
		return c.JSON(http.StatusAccepted, map[string]string{"id": e.ID, "status": e.Status, "url": paths.AuditExport(e.ID)})
	}
	return render.Redirect(c, paths.AuditExport(e.ID))
}

func (h Audit) export(c echo.Context) error {
	// The export page streams its progress; it opens no second stream for the inbox count.
	c.SetRequest(c.Request().WithContext(views.OwnStream(c.Request().Context())))
	page, err := h.Pages.Export(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	e, f := page.Export, page.Export.Filters
	props := views.AuditExportProps{Export: exportRow(e), Manifest: string(e.Manifest), KeysURL: paths.APIAuditKeys()}
	environment := f.Environment
	if name, ok := page.EnvironmentNames[environment]; ok {
		environment = name + " (" + f.Environment + ")"
	}
	for _, kv := range []views.AuditChoice{{Label: "actor", Value: f.Actor}, {Label: "action", Value: f.Action}, {Label: "environment", Value: environment},
		{Label: "workspace", Value: f.Workspace}, {Label: "run", Value: f.Run}} {
		if kv.Value != "" {
			props.Filters = append(props.Filters, kv)
		}
	}
	for _, k := range page.Keys.Keys {
		row := views.PublicKeyRow{KeyID: k.KeyID, Fingerprint: k.Fingerprint, Created: k.CreatedAt.UTC().Format("2006-01-02 15:04 UTC")}
		if k.RetiredAt != nil {
			row.Retired = k.RetiredAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		props.Keys = append(props.Keys, row)
	}
	return render.Page(c, http.StatusOK, views.AuditExport(props))
}

func (h Audit) progress(c echo.Context) error {
	ctx := c.Request().Context()
	e, err := h.Exports.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	w := c.Response()
	startStream(w)
	h.followExport(ctx, w, e)
	return nil
}

// followExport sends export e's progress as it moves until it is ready or failed (then
// tells the page the stream ends), or the browser goes away.
func (h Audit) followExport(ctx context.Context, w *echo.Response, e audit.Export) {
	// The build reports progress on its row; the stream reads the row twice a second
	// and sends what changed (a million events take seconds, so polling costs little).
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	beat := time.NewTicker(max(h.Heartbeat, time.Second))
	defer beat.Stop()
	var shown views.AuditExportRow
	for first := true; ; first = false {
		row := exportRow(e)
		if first || row != shown {
			if err := sendFragment(ctx, w, "export", views.AuditExportStatus(row)); err != nil {
				return
			}
			shown = row
		}
		if e.Status == audit.ExportReady || e.Status == audit.ExportFailed {
			fmt.Fprint(w, "event: end\ndata: done\n\n")
			w.Flush()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			w.Flush()
		case <-tick.C:
			var err error
			if e, err = h.Exports.Get(ctx, e.ID); err != nil {
				return
			}
		}
	}
}

// download serves the export's file; http.ServeContent answers Range and If-Range
// (the ETag is the file's sha256), so an interrupted download resumes byte-identical.
// The errors ServeContent answers itself (416 in plain text, 412 bare) go to the
// central error handler instead, which answers them as every other error.
func (h Audit) download(c echo.Context) error {
	e, r, err := h.Pages.ExportFile(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentDisposition, fmt.Sprintf("attachment; filename=%q", e.FileName()))
	w.Header().Set("ETag", `"`+e.SHA256+`"`)
	w.Header().Set(echo.HeaderCacheControl, "private, no-store")
	contentType := "application/x-ndjson"
	if e.Format == exportfile.CSV {
		contentType = "text/csv; charset=utf-8"
	}
	w.Header().Set(echo.HeaderContentType, contentType)
	modified := e.CreatedAt
	if e.FinishedAt != nil {
		modified = *e.FinishedAt
	}
	served := &servedErrors{ResponseWriter: w}
	http.ServeContent(served, c.Request(), e.FileName(), modified, r)
	return served.err()
}

// servedErrors passes an answer through, except an error status (400 and up) with
// its body, which it keeps back for err to hand to the central error handler.
type servedErrors struct {
	http.ResponseWriter
	status int
}

func (w *servedErrors) WriteHeader(status int) {
	if status >= http.StatusBadRequest {
		w.status = status
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *servedErrors) Write(p []byte) (int, error) {
	if w.status >= http.StatusBadRequest {
		return len(p), nil // http.Error's text: the error handler answers instead
	}
	return w.ResponseWriter.Write(p)
}

// err is the error answer kept back (nil: none). Content-Range (416) stays; the
// file's name goes, so that the answer is not saved as the file.
func (w *servedErrors) err() error {
	if w.status == 0 {
		return nil
	}
	w.Header().Del(echo.HeaderContentDisposition)
	switch w.status {
	case http.StatusRequestedRangeNotSatisfiable:
		return echo.NewHTTPError(w.status, "The range asked for lies outside the file (Content-Range gives its size): "+
			"ask for a range within it, or for the whole file without Range.")
	case http.StatusPreconditionFailed:
		return echo.NewHTTPError(w.status, "The file is not the one If-Match names, or changed since If-Unmodified-Since: download it whole again.")
	}
	return echo.NewHTTPError(w.status)
}

func (h Audit) keys(c echo.Context) error {
	set, err := h.Keys.Published(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, set)
}
