package handlers

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// The decisions on a run: one POST route per action, each bound to an idempotency key
// and, for approve, reject and override, to the evidence the review page showed.

// decide handles the decisions on a run (approve, reject, override, cancel, recover,
// plan again). A decision on a run that moved on, or on other evidence than the run
// carries, is a 409 from the service. Its idempotency key is the web layer's, as for
// every mutating request: a repeat of a decision that went through (a double click, a
// retry) gets the same redirect and flash again without deciding twice; a failed
// decision records nothing, so its key may be retried. A decision with field errors
// draws the review page again, the messages at their fields and the typed reason kept.
func (h Runs) decide(c echo.Context) error {
	action := run.Action(c.Param("action"))
	if !slices.Contains(run.Actions, action) {
		return errs.ErrNotFound
	}
	msg, location, err := h.decideOnce(c.Request().Context(), c, action)
	if v, ok := errs.AsValidation(err); ok && onDecisionForm(action, v) && !render.WantsJSON(c) {
		again := &retry{action: action, rule: c.FormValue("rule_id"), errors: v.Fields, reason: c.FormValue("reason")}
		p, perr := h.reviewProps(c.Request().Context(), c.Param("id"), "", 1, again)
		if perr != nil {
			return err
		}
		return render.Page(c, http.StatusUnprocessableEntity, views.ReviewPage(p))
	}
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", msg)
	return render.Redirect(c, location)
}

// onDecisionForm reports whether v's messages belong at the fields of the review page's
// decision forms (then the page is drawn again with them); any other refusal (a missing
// idempotency key, say) goes to the error page.
func onDecisionForm(action run.Action, v *errs.Validation) bool {
	if action != run.ActionApprove && action != run.ActionReject && action != run.ActionOverride {
		return false
	}
	for f := range v.Fields {
		if f != "confirm" && f != "reason" && f != "evidence" {
			return false
		}
	}
	return true
}

// decideOnce makes the service call of one decision and returns its flash message and
// where to go next.
func (h Runs) decideOnce(ctx context.Context, c echo.Context, action run.Action) (msg, location string, err error) {
	id, reason := c.Param("id"), c.FormValue("reason")
	location = paths.Run(id)
	var ev run.Evidence
	if action == run.ActionApprove || action == run.ActionReject || action == run.ActionOverride {
		if ev, err = evidenceForm(c); err != nil {
			return "", "", err
		}
	}
	switch action {
	case run.ActionApprove:
		var r run.Run
		if r, err = h.Decisions.Approve(ctx, id, run.Approval{Evidence: ev, Confirm: c.FormValue("confirm"), Reason: reason}); err == nil {
			// What follows belongs to the APPROVED state, which the run page says while
			// it lasts; the flash only reports what the person did.
			msg, err = h.said(ctx, "You approved %s.", r)
		}
	case run.ActionOverride:
		_, err = h.Decisions.Override(ctx, id, ev, c.FormValue("rule_id"), c.FormValue("rule_version"), reason)
		msg, location = "Override recorded for "+c.FormValue("rule_id")+".", paths.RunReview(id)
	case run.ActionReject:
		var r run.Run
		if r, err = h.Decisions.Reject(ctx, id, ev, reason); err == nil {
			msg, err = h.said(ctx, "You rejected %s: it will not apply.", r)
		}
	case run.ActionCancel:
		if c.FormValue("confirm") != "yes" {
			v := &errs.Validation{}
			v.Add("confirm", "Confirm the cancellation on its confirmation page.")
			return "", "", v
		}
		_, err = h.Decisions.Cancel(ctx, id, reason)
		msg = "Cancelled: the run stopped and will not apply."
	case run.ActionRecover:
		_, err = h.Decisions.Recover(ctx, id, reason)
		msg = "Recovered: the run is closed and the workspace is free."
	case run.ActionPlanAgain:
		var r run.Run
		if r, err = h.Decisions.PlanAgain(ctx, id); err == nil {
			msg, location = "Planning again as run "+r.Label()+".", paths.Run(r.ID)
		}
	}
	if err != nil {
		return "", "", err
	}
	if action == run.ActionApprove || action == run.ActionReject {
		// The next run waiting for this person takes them on.
		next, err := h.Inbox.WaitingForYou(ctx, nil, 2)
		if err != nil {
			return "", "", err
		}
		for _, e := range next {
			if e.ID == id {
				continue
			}
			next, err := h.said(ctx, " Next waiting for you: %s.", e.Run)
			if err != nil {
				return "", "", err
			}
			return msg + next, paths.RunReview(e.ID), nil
		}
	}
	return msg, location, nil
}

// evidenceForm reads the evidence a review page submits with a decision: a field
// missing is a 422.
func evidenceForm(c echo.Context) (run.Evidence, error) {
	form, err := c.FormParams()
	if err != nil {
		return run.Evidence{}, fmt.Errorf("reading the form: %v: %w", err, errs.ErrBadRequest)
	}
	return run.ParseEvidence(func(field string) (string, bool) {
		vals, ok := form[field]
		if !ok || len(vals) == 0 {
			return "", false
		}
		return vals[0], true
	})
}

// confirmCancel asks before cancelling: what cancelling means, an optional reason,
// and the button that does it (the focus starts there).
func (h Runs) confirmCancel(c echo.Context) error {
	ctx := c.Request().Context()
	r, err := h.Runs.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	perms, err := h.Decisions.Permissions(ctx, r)
	if err != nil {
		return err
	}
	if !perms.Cancel.Allowed() {
		return perms.Cancel.Err()
	}
	ws, err := h.Workspaces.Get(ctx, r.WorkspaceID)
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.ConfirmCancel(views.ConfirmCancelProps{RunID: r.ID, Label: r.Label(),
		WorkspaceName: ws.Name, State: runState(r)}))
}

// said formats a message naming run r by its workspace-qualified label
// ("billing-prod #3").
func (h Runs) said(ctx context.Context, format string, r run.Run) (string, error) {
	ws, err := h.Workspaces.Get(ctx, r.WorkspaceID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(format, ws.Name+" "+r.Label()), nil
}
