package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/errs"
	"gantry/models/pages"
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
	d, err := decisionForm(c)
	if err != nil {
		return err
	}
	out, err := h.Reviews.Decide(c.Request().Context(), c.Param("id"), d)
	if v, ok := errs.AsValidation(err); ok && d.Action == run.ActionCancel && d.Redraw {
		return h.cancelRefused(c, d, v)
	}
	if err != nil {
		return err
	}
	if out.Refused != nil {
		p, err := reviewProps(*out.Refused, "", 1)
		if err != nil {
			return err
		}
		return render.Page(c, http.StatusUnprocessableEntity, views.ReviewPage(p))
	}
	msg, location := decidedMessage(c.Param("id"), d, out)
	if msg != "" {
		_ = render.Flash(c, "success", msg)
	}
	return render.Redirect(c, location)
}

// decisionForm reads a decision from its form: the action in the path, the evidence the
// review page showed (a field missing is refused with the decision), the confirmation
// and reason. A cancel is confirmed on its confirmation page first.
func decisionForm(c echo.Context) (pages.Decision, error) {
	d := pages.Decision{Action: run.Action(c.Param("action")), Confirm: c.FormValue("confirm"), Reason: c.FormValue("reason"),
		RuleID: c.FormValue("rule_id"), RuleVersion: c.FormValue("rule_version"), Redraw: !render.WantsJSON(c)}
	switch {
	case !slices.Contains(run.Actions, d.Action):
		return d, errs.ErrNotFound
	case d.Action == run.ActionCancel && d.Confirm != "yes":
		v := &errs.Validation{}
		v.Add("confirm", "Confirm the cancellation on its confirmation page.")
		return d, v
	case d.Action == run.ActionApprove || d.Action == run.ActionReject || d.Action == run.ActionOverride:
		ev, err := evidenceForm(c)
		if v, ok := errs.AsValidation(err); ok {
			d.Problems = v
		} else if err != nil {
			return d, err
		}
		d.Evidence = ev
	}
	return d, nil
}

// decidedMessage is the flash after decision d on run id came to out, and where to go
// next. After an approval or a rejection with more runs waiting for the person, that is
// the inbox, which says what became of this run and offers the next as a link: never
// the next run's review, whose approve button a double click would press in the same
// place. With nothing else waiting, it is this run's page. What follows an approval
// belongs to the APPROVED state, which the run page says while it lasts; the flash
// only reports what the person did ("": none).
func decidedMessage(id string, d pages.Decision, out pages.Decided) (msg, location string) {
	said := out.Workspace + " " + out.Run.Label()
	switch d.Action {
	case run.ActionApprove:
		msg = "You approved " + said + "."
	case run.ActionReject:
		msg = "You rejected " + said + ": it will not apply."
	case run.ActionOverride:
		return "Override recorded for " + d.RuleID + ".", paths.RunReview(id)
	case run.ActionCancel:
		if out.Run.State == run.ApplyInterrupted {
			return "Stopping the apply: OpenTofu is interrupted and stores the state it wrote. An admin recovers the run once the workspace was checked.", paths.Run(id)
		}
		return "Cancelled: the run stopped and will not apply.", paths.Run(id)
	case run.ActionRecover:
		return "Recovered: the run is closed and the workspace is free.", paths.Run(id)
	case run.ActionPlanAgain:
		return "Planning again as run " + out.Run.Label() + ".", paths.Run(out.Run.ID)
	}
	if out.Next != nil {
		// The inbox's panel says what the person did (no flash to say it twice).
		return "", paths.Filtered(paths.Approvals(), url.Values{"decided": {id}})
	}
	return msg, paths.Run(id)
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
	p, err := h.Reviews.ConfirmCancel(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.ConfirmCancel(cancelProps(p, "", nil)))
}

// cancelProps draws the confirmation of cancelling p's run, with what was typed and the
// refusals at the fields when the form comes back.
func cancelProps(p pages.CancelPage, reason string, errors map[string]string) views.ConfirmCancelProps {
	out := views.ConfirmCancelProps{RunID: p.Run.ID, Label: p.Run.Label(), WorkspaceName: p.Workspace.Name, State: runState(p.Run),
		Reason: reason, Errors: errors}
	if p.Run.State == run.Running {
		out.Apply = &views.StopApplyProps{EndsAs: stateOf(run.ApplyInterrupted), MinReason: run.MinReasonLength}
	}
	return out
}

// cancelRefused draws the confirmation again after the service refused a cancel at its
// fields (a reason too short to stop an apply): the messages at the fields, the reason
// kept.
func (h Runs) cancelRefused(c echo.Context, d pages.Decision, v *errs.Validation) error {
	p, err := h.Reviews.ConfirmCancel(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusUnprocessableEntity, views.ConfirmCancel(cancelProps(p, d.Reason, v.Fields)))
}
