package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/audit"
	"gantry/models/risk"
	"gantry/models/run"
	"gantry/views/paths"
)

// matrixForm is the approval matrix form as a browser would post m.
func matrixForm(token string, base int, m risk.Matrix, comment string) url.Values {
	form := url.Values{"_csrf": {token}, "base_version": {strconv.Itoa(base)}, "comment": {comment}}
	for _, r := range m.Rules {
		form.Set(risk.ClassField(r.Condition), strconv.Itoa(int(r.Class)))
	}
	for _, d := range m.Decisions {
		form.Set(risk.ApproverField(d.Level), string(d.Approver))
		form.Set(risk.EscalationField(d.Level), string(d.Escalation))
		if d.FourEyes {
			form.Set(risk.FourEyesField(d.Level), "on")
		}
		if d.Elevated {
			form.Set(risk.ElevatedField(d.Level), "on")
		}
	}
	return form
}

func matrixVersions(t *testing.T, app *webtest.App, slug string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, app.DB.Table("risk_matrix_versions").Where("organization_id = ?", app.Orgs[slug]).Count(&n).Error)
	return n
}

func withClass(m risk.Matrix, c risk.Condition, class risk.Class) risk.Matrix {
	for i := range m.Rules {
		if m.Rules[i].Condition == c {
			m.Rules[i].Class = class
		}
	}
	return m
}

// TestApprovalMatrixOwnerEdits: an owner saves a change; it becomes version 1, shown on
// the page and in the history, and audited with the rows that changed.
func TestApprovalMatrixOwnerEdits(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "owner@acme.test")

	body := webtest.ReadBody(t, app.Get(t, c, paths.ApprovalMatrix()))
	require.Contains(t, body, "0 (built-in default)")
	require.Contains(t, body, `data-testid="matrix-history-empty"`)
	require.Contains(t, body, `id="save-matrix"`)
	require.NotContains(t, body, `data-testid="matrix-read-only"`)
	require.Contains(t, body, `aria-label="Risk class for any change in a production environment"`)
	require.Contains(t, body, "Floors no edit can lower: "+run.FloorsSummary()+".", "the floors in the rules' own words")
	require.Contains(t, body, `href="/settings/approval-matrix" aria-current="page"`, "the navigation links the page")

	token := app.CSRF(t, c)
	edited := withClass(risk.Default(), risk.CondProduction, 3)
	resp := app.PostForm(t, c, paths.ApprovalMatrix(), matrixForm(token, 0, edited, "production needs an owner"))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, paths.ApprovalMatrix(), resp.Header.Get("Location"))

	body = webtest.ReadBody(t, app.Get(t, c, paths.ApprovalMatrix()))
	require.Contains(t, body, "Approval matrix saved as version 1.")
	require.Regexp(t, `data-testid="matrix-version-number">\s*1\s*</dd>`, body)
	require.Regexp(t, `name="class.production_change"[^>]*>(<option value="[0-2]">[0-2]</option>)+<option value="3" selected>3</option>`, body)
	require.Contains(t, body, `name="base_version" value="1"`)
	require.Contains(t, body, `data-testid="matrix-history-1"`)
	require.Contains(t, body, "production needs an owner")
	require.Contains(t, body, "rule production_change class: 2 → 3")

	require.EqualValues(t, 1, matrixVersions(t, app, "acme"))
	var events []audit.Event
	require.NoError(t, app.DB.Where("organization_id = ? AND action = 'risk_matrix.updated'", app.Orgs["acme"]).Find(&events).Error)
	require.Len(t, events, 1)
	var data map[string]any
	require.NoError(t, json.Unmarshal(events[0].Data, &data))
	require.EqualValues(t, 0, data["before_version"])
	require.EqualValues(t, 1, data["after_version"])
	require.Equal(t, []any{map[string]any{"row": "rule production_change", "field": "class", "before": "2", "after": "3"}}, data["changes"])

	// The new version is what the service now classifies with.
	cur, err := app.System.Matrix.Current(t.Context(), app.Orgs["acme"])
	require.NoError(t, err)
	require.Equal(t, 1, cur.Version)
	require.Equal(t, edited, cur.Matrix)

	// Saving the same matrix again writes nothing; a form from before version 1 is refused.
	resp = app.PostForm(t, c, paths.ApprovalMatrix(), matrixForm(token, 1, edited, "again"))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Contains(t, webtest.ReadBody(t, app.Get(t, c, paths.ApprovalMatrix())), "Nothing changed")
	resp = app.PostForm(t, c, paths.ApprovalMatrix(), matrixForm(token, 0, risk.Default(), "stale page"))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, `data-testid="matrix-conflict"`)
	require.Contains(t, body, `name="base_version" value="1"`, "saving again goes onto the version now current")
	require.Contains(t, body, `value="stale page"`, "the submitted comment is kept")
	require.EqualValues(t, 1, matrixVersions(t, app, "acme"))
}

// TestApprovalMatrixOnlyOwnersEdit: admins (and everyone else) read the matrix without
// controls; their POST is 403 and stores nothing.
func TestApprovalMatrixOnlyOwnersEdit(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	for _, role := range []string{"admin", "operator", "viewer", "auditor"} {
		c := app.LoggedIn(t, role+"@acme.test")
		resp := app.Get(t, c, paths.ApprovalMatrix())
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, role)
		require.Contains(t, body, `data-testid="matrix-read-only"`, role)
		require.Contains(t, body, "Only owners of this organization edit the approval matrix", role)
		require.NotContains(t, body, `id="save-matrix"`, role)
		require.NotContains(t, body, `<select id="class.`, role)
		require.Contains(t, body, "any replace", role)

		token := app.CSRF(t, c)
		resp = app.PostForm(t, c, paths.ApprovalMatrix(), matrixForm(token, 0, withClass(risk.Default(), risk.CondReplace, 3), "by "+role))
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, role)
	}
	require.Zero(t, matrixVersions(t, app, "acme"))
	var events int64
	require.NoError(t, app.DB.Table("audit_events").Where("action = 'risk_matrix.updated'").Count(&events).Error)
	require.Zero(t, events)
}

// TestApprovalMatrixInvalidInput: 422 with the message beside the control and the
// submitted values kept; nothing stored.
func TestApprovalMatrixInvalidInput(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "owner@acme.test")
	token := app.CSRF(t, c)

	m := withClass(risk.Default(), risk.CondCreateUpdateOnly, 0)
	for i := range m.Decisions {
		if m.Decisions[i].Level == risk.Level3 {
			m.Decisions[i].Approver = risk.ApproverSystem // self-service for risk 3: refused
			m.Decisions[i].Escalation = ""
		}
		if m.Decisions[i].Level == risk.Level2 {
			m.Decisions[i].Escalation = risk.ApproverOwner
			m.Decisions[i].FourEyes = false // a valid edit, kept in the re-rendered form
		}
	}
	resp := app.PostForm(t, c, paths.ApprovalMatrix(), matrixForm(token, 0, withClass(m, risk.CondReplace, 3), "tighten replaces"))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, `data-testid="error-summary"`)
	require.Contains(t, body, `id="class.create_update_only-error" data-testid="error-class.create_update_only"`)
	require.Contains(t, body, "A change needs risk 1 or higher")
	require.Contains(t, body, `data-testid="error-approver.3"`)
	require.Contains(t, body, "Self-service (system) approval is only for risk 0")
	require.Contains(t, body, `aria-invalid="true"`)
	// The submitted values come back: replace at 3, level 2 without four-eyes, the comment.
	require.Regexp(t, `name="class.replace"[^>]*>(<option value="[0-2]">[0-2]</option>)+<option value="3" selected>3</option>`, body)
	require.Regexp(t, `id="four_eyes.2" name="four_eyes.2" value="on" aria-label`, body, "unchecked as submitted")
	require.Regexp(t, `id="four_eyes.3" name="four_eyes.3" value="on" checked`, body)
	require.Contains(t, body, `value="tighten replaces"`)

	// A class that is not a number is a field message too.
	form := matrixForm(token, 0, risk.Default(), "")
	form.Set(risk.ClassField(risk.CondDestroy), "lots")
	resp = app.PostForm(t, c, paths.ApprovalMatrix(), form)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, `data-testid="error-class.destroy"`)
	require.Contains(t, body, "Choose a risk class from 0 to 3.")

	require.Zero(t, matrixVersions(t, app, "acme"))
	body = webtest.ReadBody(t, app.Get(t, c, paths.ApprovalMatrix()))
	require.Contains(t, body, "0 (built-in default)")
}

// TestApprovalMatrixFloorsThroughTheForm: an owner loosening the matrix below the
// design's floors gets a field error at each loosened field (the other fields keep what
// was typed), and nothing is saved.
func TestApprovalMatrixFloorsThroughTheForm(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "owner@acme.test")
	token := app.CSRF(t, c)
	for name, tc := range map[string]struct {
		edit  func(risk.Matrix) risk.Matrix
		field string
	}{
		"destroy self-service":       {func(m risk.Matrix) risk.Matrix { return withClass(m, risk.CondDestroy, 1) }, "class.destroy"},
		"data loss at risk 2":        {func(m risk.Matrix) risk.Matrix { return withClass(m, risk.CondIrreversible, 2) }, "class.irreversible_loss"},
		"production at risk 1":       {func(m risk.Matrix) risk.Matrix { return withClass(m, risk.CondProduction, 1) }, "class.production_change"},
		"risk 3 by an admin":         {withDecision(risk.Level3, func(d *risk.Decision) { d.Approver = risk.ApproverAdmin }), "approver.3"},
		"risk 3 without four eyes":   {withDecision(risk.Level3, func(d *risk.Decision) { d.FourEyes = false }), "four_eyes.3"},
		"risk 3 without elevation":   {withDecision(risk.Level3, func(d *risk.Decision) { d.Elevated = false }), "elevated.3"},
		"risk 3 escalating to admin": {withDecision(risk.Level3, func(d *risk.Decision) { d.Escalation = risk.ApproverAdmin }), "escalation.3"},
	} {
		resp := app.PostForm(t, c, paths.ApprovalMatrix(), matrixForm(token, 0, tc.edit(risk.Default()), "loosen: "+name))
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, name)
		require.Contains(t, body, `data-testid="error-summary"`, name)
		require.Contains(t, body, `data-testid="error-`+tc.field+`"`, name)
		require.Equal(t, 1, strings.Count(body, `data-testid="error-`)-strings.Count(body, `data-testid="error-summary"`), "%s: one field error", name)
		require.Contains(t, body, `value="loosen: `+name+`"`, "%s: the comment is kept", name)
	}
	require.Zero(t, matrixVersions(t, app, "acme"))
}

// withDecision edits the decision of level l.
func withDecision(l risk.Level, edit func(*risk.Decision)) func(risk.Matrix) risk.Matrix {
	return func(m risk.Matrix) risk.Matrix {
		for i := range m.Decisions {
			if m.Decisions[i].Level == l {
				edit(&m.Decisions[i])
			}
		}
		return m
	}
}

// TestApprovalMatrixTenantIsolation: one organization's versions and comments never show
// in another's page, and its saves do not move the other's numbering.
func TestApprovalMatrixTenantIsolation(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	acme := app.LoggedIn(t, "owner@acme.test")
	resp := app.PostForm(t, acme, paths.ApprovalMatrix(),
		matrixForm(app.CSRF(t, acme), 0, withClass(risk.Default(), risk.CondReplace, 3), "acme-only-comment"))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	globex := app.LoggedIn(t, "owner@globex.test")
	body := webtest.ReadBody(t, app.Get(t, globex, paths.ApprovalMatrix()))
	require.NotContains(t, body, "acme-only-comment")
	require.Contains(t, body, "0 (built-in default)")
	require.Contains(t, body, `data-testid="matrix-history-empty"`)
	require.NotContains(t, body, `data-testid="matrix-history-1"`)

	// Globex edits from its own version 0: no conflict with Acme's version 1.
	resp = app.PostForm(t, globex, paths.ApprovalMatrix(),
		matrixForm(app.CSRF(t, globex), 0, withClass(risk.Default(), risk.CondProduction, 3), "globex change"))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.EqualValues(t, 1, matrixVersions(t, app, "globex"))
	require.EqualValues(t, 1, matrixVersions(t, app, "acme"))
	body = webtest.ReadBody(t, app.Get(t, acme, paths.ApprovalMatrix()))
	require.NotContains(t, body, "globex change")
	require.Contains(t, body, "acme-only-comment")
}
