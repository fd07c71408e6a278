package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/pages"
	"gantry/models/risk"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// MatrixStore is what the approval matrix page needs (risk.Store).
type MatrixStore interface {
	History(ctx context.Context) ([]risk.Version, error)
	SaveOnto(ctx context.Context, base int, m risk.Matrix, comment string) (risk.Version, error)
}

// Matrix serves the organization's risk rules and approval matrix: every member reads
// it, owners edit it (the store checks).
type Matrix struct {
	Store MatrixStore
	// Saves saves an edit read onto the current matrix (pages.Matrix).
	Saves MatrixSaves
}

// MatrixSaves reads the approval matrix's page and saves edits of it (pages.Matrix).
type MatrixSaves interface {
	Page(ctx context.Context) (pages.MatrixSave, error)
	Save(ctx context.Context, edit pages.MatrixEdit) (pages.MatrixSave, error)
}

// Register adds the approval matrix routes to g.
func (h Matrix) Register(g *echo.Group) {
	g.GET(paths.ApprovalMatrix(), h.show)
	g.POST(paths.ApprovalMatrix(), h.save)
}

func (h Matrix) show(c echo.Context) error {
	out, err := h.Saves.Page(c.Request().Context())
	if err != nil {
		return err
	}
	return h.page(c, http.StatusOK, out, nil, 0)
}

func (h Matrix) save(c echo.Context) error {
	out, err := h.Saves.Save(c.Request().Context(), func(cur risk.Matrix) (risk.Matrix, int, string) { return matrixInput(c, cur) })
	if err != nil {
		return err
	}
	switch {
	case out.Errors != nil:
		return h.page(c, http.StatusUnprocessableEntity, out, out.Errors, 0)
	case out.Conflict != 0:
		// Show the edits against the version now current; saving again replaces it knowingly.
		return h.page(c, http.StatusConflict, out, nil, out.Conflict)
	}
	msg := "Approval matrix saved as version " + strconv.Itoa(out.Saved.Version) + "."
	if cur := risk.Latest(out.History); out.Saved.Version == cur.Version {
		msg = "Nothing changed: the approval matrix is still version " + strconv.Itoa(cur.Version) + "."
	}
	_ = render.Flash(c, "success", msg)
	return render.Redirect(c, paths.ApprovalMatrix())
}

// matrixInput reads the form onto the current matrix: rule ids, descriptions and order
// stay; classes and decisions come from the form. A class that is not a number becomes
// -1, which Validate refuses with a message beside the control.
func matrixInput(c echo.Context, cur risk.Matrix) (risk.Matrix, int, string) {
	m := risk.Matrix{Rules: make([]risk.Rule, len(cur.Rules))}
	for i, r := range cur.Rules {
		class, err := strconv.Atoi(c.FormValue(risk.ClassField(r.Condition)))
		if err != nil {
			class = -1
		}
		r.Class = risk.Class(class)
		m.Rules[i] = r
	}
	for _, l := range risk.Levels {
		m.Decisions = append(m.Decisions, risk.Decision{
			Level:              l,
			Approver:           risk.Approver(c.FormValue(risk.ApproverField(l))),
			FourEyes:           c.FormValue(risk.FourEyesField(l)) == "on",
			Elevated:           c.FormValue(risk.ElevatedField(l)) == "on",
			Escalation:         risk.Approver(c.FormValue(risk.EscalationField(l))),
			EscalateAfterHours: hours(c.FormValue(risk.EscalateAfterField(l))),
		})
	}
	base, err := strconv.Atoi(c.FormValue("base_version"))
	if err != nil {
		base = risk.AnyVersion
	}
	return m, base, c.FormValue("comment")
}

// hours reads an escalation's waiting time: empty is 0 (none); anything that is not a
// whole number is -1, which Validate refuses beside the control.
func hours(s string) int {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// page renders the matrix out.Submitted (the current one, or the one submitted) with
// the history, its controls as out answers them.
func (h Matrix) page(c echo.Context, status int, out pages.MatrixSave, fieldErrors map[string]string, conflict int) error {
	history, m := out.History, out.Submitted
	cur := risk.Latest(history)
	p := views.MatrixProps{
		Version: cur.Version, SavedBy: cur.CreatedByName, SavedAt: cur.CreatedAt, Comment: cur.Comment,
		CanEdit: out.CanEdit, BaseVersion: out.Base, NewComment: out.Comment,
		Errors: fieldErrors, ConflictVersion: conflict,
		ConfirmWord: run.ConfirmWord, MinReason: run.MinReasonLength, ElevationMinutes: int(run.ElevationWindow.Minutes()),
		Floors: run.FloorsSummary(), MaxEscalateAfterHours: risk.MaxEscalateAfterHours,
	}
	for _, a := range risk.Approvers {
		p.Approvers = append(p.Approvers, string(a))
	}
	for _, a := range risk.Escalations {
		p.Escalations = append(p.Escalations, string(a))
	}
	for _, r := range m.Rules {
		p.Rules = append(p.Rules, views.MatrixRuleRow{Condition: string(r.Condition), Description: r.Description, Class: int(r.Class)})
	}
	for _, d := range m.Decisions {
		row := views.MatrixDecisionRow{Level: string(d.Level), Approver: string(d.Approver),
			FourEyes: d.FourEyes, Elevated: d.Elevated, Escalation: string(d.Escalation), Summary: d.Summary()}
		if d.EscalateAfterHours != 0 {
			row.EscalateAfterHours = strconv.Itoa(d.EscalateAfterHours)
		}
		p.Decisions = append(p.Decisions, row)
	}
	p.History = matrixHistory(history)
	return render.Page(c, status, views.ApprovalMatrix(p))
}

// matrixHistory is the matrix's versions, newest first, each with what it changed from
// the one before (the first from the default).
func matrixHistory(history []risk.Version) []views.MatrixVersionRow {
	rows := make([]views.MatrixVersionRow, 0, len(history))
	for i, v := range history {
		before := risk.Default()
		if i+1 < len(history) {
			before = history[i+1].Matrix
		}
		row := views.MatrixVersionRow{Version: v.Version, By: v.CreatedByName, At: v.CreatedAt, Comment: v.Comment}
		for _, ch := range risk.Diff(before, v.Matrix) {
			row.Changes = append(row.Changes, ch.String())
		}
		rows = append(rows, row)
	}
	return rows
}
