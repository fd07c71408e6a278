package handlers

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/classify"
	"gantry/models/errs"
	"gantry/models/pages"
	"gantry/models/review"
	"gantry/models/risk"
	"gantry/models/rollback/boundary"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// ReviewPages reads the plan review page and takes the decisions made on it, and asks
// before a cancel (pages.Reviews).
type ReviewPages interface {
	Page(ctx context.Context, id string) (pages.ReviewPage, error)
	Decide(ctx context.Context, id string, d pages.Decision) (pages.Decided, error)
	ConfirmCancel(ctx context.Context, id string) (pages.CancelPage, error)
}

// reviewSectionDef is one section of the review page: its id (in URLs and test
// hooks), title and the class of change it lists.
type reviewSectionDef struct {
	id, title string
	class     classify.Class
}

// The review sections, in the order DESIGN §7 shows them.
var reviewSections = []reviewSectionDef{
	{"destroy", "Destroyed", classify.ClassDestroy},
	{"replace", "Replaced", classify.ClassReplace},
	{"update", "Updated in place", classify.ClassUpdate},
	{"create", "Created", classify.ClassCreate},
}

// maxDependentsShown keeps one entry's dependents list readable; the count says how
// many more there are.
const maxDependentsShown = 10

// maxMessagesShown bounds one rule's deny messages on the page.
const maxMessagesShown = 20

// graphNodes bounds the blast-radius picture.
const graphNodes = 60

func (h Runs) review(c echo.Context) error {
	page, err := h.Reviews.Page(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	p, err := reviewProps(page, "", 1)
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.ReviewPage(p))
}

// reviewSection answers the pager of one section: for htmx the section alone (the
// page's fragment, swapped in place), otherwise the whole page with that section on
// the page asked for, so the pager's links also work without JavaScript or in a new tab.
func (h Runs) reviewSection(c echo.Context) error {
	id := c.Param("section")
	if !slices.ContainsFunc(reviewSections, func(s reviewSectionDef) bool { return s.id == id }) {
		return errs.ErrNotFound
	}
	page, err := strconv.Atoi(c.QueryParam("page"))
	if err != nil || page < 1 {
		page = 1
	}
	rp, err := h.Reviews.Page(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	p, err := reviewProps(rp, id, page)
	if err != nil {
		return err
	}
	// The answer depends on the header: caches must not hand one for the other.
	c.Response().Header().Add("Vary", "HX-Request")
	if c.Request().Header.Get("HX-Request") == "true" {
		return render.Fragment(c, http.StatusOK, views.ReviewPage(p), views.ReviewSectionFragment(id))
	}
	return render.Page(c, http.StatusOK, views.ReviewPage(p))
}

// reviewProps is review page rp as drawn, with section pagedID on page page and every
// other section on its first page (and a decision that came back, if any).
func reviewProps(rp pages.ReviewPage, pagedID string, page int) (views.ReviewProps, error) {
	r, ws, perms, data := rp.Run, rp.Workspace, rp.Permissions, rp.Plan
	p := views.ReviewProps{RunID: r.ID, Label: r.Label(), WorkspaceID: ws.ID, WorkspaceName: ws.Name, Environment: ws.EnvironmentName,
		Template: r.TemplateName, Version: r.TemplateVersion, Kind: string(r.Kind), State: runState(r), StateReason: stateReason(r),
		Simulated: r.Simulated, Risk: riskView(r, perms), Expiry: expiry(r), Decision: decisionProps(r, perms, rp.Refused, rp.Errors),
		Policy: policyView(data, perms), Cost: costView(r.Cost), Graph: review.Graph(data.Classification, graphNodes),
		Block: blockView(r, rp.Block, perms, true), WhoWhy: whoWhyProps(rp.WhoWhy, r)}
	if r.Kind == run.KindPlanOnly {
		p.Risk.DryRun = run.DryRunHeadline(rp.IfApplied)
	}
	if rb := rp.Rollback; rb != nil {
		p.Rollback = &views.RollbackView{Serial: rb.Serial, SourceLabel: ws.Name + " " + rb.SourceLabel, Lost: rb.Lost, ForwardFix: rb.ForwardFix}
	}
	if r.Kind == run.KindCodify && r.BreakglassWindowID != nil {
		p.Codifies = *r.BreakglassWindowID
	}
	c1 := data.Classification.Counts
	p.Counts = []views.KV{{Key: "destroy", Value: strconv.Itoa(c1.Destroy)}, {Key: "replace", Value: strconv.Itoa(c1.Replace)},
		{Key: "update in place", Value: strconv.Itoa(c1.Update)}, {Key: "create", Value: strconv.Itoa(c1.Create)},
		{Key: "read", Value: strconv.Itoa(c1.Read)}, {Key: "unchanged", Value: strconv.Itoa(c1.NoOp)}}
	for _, s := range reviewSections {
		n := 1
		if s.id == pagedID {
			n = page
		}
		sec, err := section(r, data, rp.Boundary, s, n)
		if err != nil {
			return views.ReviewProps{}, err
		}
		p.Sections = append(p.Sections, sec)
	}
	return p, nil
}

// section is one page of one section's changes, each replace and destroy with its
// rollback boundary from b.
func section(r run.Run, data run.ReviewData, b boundary.Review, s reviewSectionDef, page int) (views.ReviewSection, error) {
	res := data.Classification
	pg := review.Section(review.Indexes(res, s.class), page, views.ReviewPageSize())
	out := views.ReviewSection{RunID: r.ID, ID: s.id, Title: s.title, Total: pg.Total, Page: pg.Number, Pages: pg.Pages}
	for _, i := range pg.Items {
		ch := res.Changes[i]
		e := views.ReviewEntry{Address: ch.Address, Reason: changeReason(r, ch), CreateFirst: ch.CreateBeforeDestroy,
			Irreversible: ch.Irreversible, OrgScoped: ch.OrgScoped}
		for _, rp := range ch.ReplacePaths {
			e.ReplacePaths = append(e.ReplacePaths, pathString(rp))
		}
		deps := ch.Dependents
		if len(deps) > maxDependentsShown {
			e.MoreDependents = len(deps) - maxDependentsShown
			deps = deps[:maxDependentsShown]
		}
		e.Dependents = deps
		if c, ok := b.At(i); ok {
			e.Boundary = &views.BoundaryView{Kind: string(c.Kind), Label: b.Label(c), Words: b.Words(c), Notes: b.Notes, LosesData: c.LosesData()}
		}
		attrs, err := data.Doc.Attributes(i)
		if err != nil {
			return views.ReviewSection{}, err
		}
		for _, a := range attrs {
			e.Attrs = append(e.Attrs, attrRow(a))
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}

func attrRow(a review.AttrChange) views.AttrRow {
	row := views.AttrRow{Path: a.Path, Before: a.Before, After: a.After, Forces: a.ForcesReplacement, Changed: a.Changed}
	if a.BeforeSensitive {
		row.Before = "(sensitive value)"
	}
	if a.AfterSensitive {
		row.After = "(sensitive value)"
	}
	if a.Unknown {
		row.After = "(known after apply)"
	}
	return row
}

// pathString renders a replace path such as ["settings", 0, "tier"] as settings[0].tier.
func pathString(p []any) string {
	var b strings.Builder
	for _, step := range p {
		switch v := step.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(v)
		default:
			fmt.Fprintf(&b, "[%v]", v)
		}
	}
	return b.String()
}

// changeReason says in words why tofu plans a replace or destroy.
func changeReason(r run.Run, ch classify.Change) string {
	switch ch.ActionReason {
	case "replace_because_cannot_update":
		return "An attribute that cannot change in place changed, so the resource is replaced."
	case "replace_because_tainted":
		return "The object is tainted (a create failed part-way), so it is replaced."
	case "replace_by_request":
		return "Replacement was requested explicitly."
	case "replace_by_triggers":
		return "A replace_triggered_by reference changed."
	case "delete_because_no_resource_config":
		return "The resource is no longer in the configuration."
	case "delete_because_no_module":
		return "Its module is no longer in the configuration."
	case "delete_because_wrong_repetition":
		return "The resource's count or for_each changed shape."
	case "delete_because_count_index":
		return "Its count index is beyond the new count."
	case "delete_because_each_key":
		return "Its for_each key is no longer in the map."
	case "read_because_config_unknown":
		return "The data source depends on values known only after apply."
	case "read_because_dependency_pending":
		return "The data source depends on a resource with pending changes."
	}
	if ch.Class == classify.ClassDestroy && r.Kind == run.KindDestroy {
		return "This is a destroy run: everything in the workspace is destroyed."
	}
	if ch.ActionReason != "" {
		return ch.ActionReason
	}
	return ""
}

func riskView(r run.Run, perms run.Permissions) views.RiskView {
	d := perms.Deciders
	v := views.RiskView{Level: r.RiskLevel, Rule: r.RiskRule, Reason: r.RiskReason, Approver: string(run.RequiredApproverOf(r)),
		Deciders: d.Summary(), Escalated: d.Escalated, FourEyes: d.Decision.FourEyes, Elevated: d.Decision.Elevated,
		Elevation: run.ElevationSummary(), MatrixVersion: r.MatrixVersion}
	if a := risk.Approver(r.RequiredApprover); !a.Person() && r.State != run.PendingApproval {
		// The system decided (or nothing needed deciding): nobody else does.
		v.Approver, v.Deciders = r.RequiredApprover, ""
	}
	if r.RiskClass != nil {
		v.Class = strconv.Itoa(*r.RiskClass)
	}
	if r.Kind == run.KindPlanOnly {
		// The review restates this with the risk the change would carry if applied.
		v.DryRun, v.FourEyesText = "Dry run: nothing is applied, so nobody decides it.", run.DryRunFourEyes()
	}
	return v
}

func expiry(r run.Run) string {
	switch {
	case r.Waiting() && r.DecisionDeadline != nil:
		return "decide by " + r.DecisionDeadline.UTC().Format("2006-01-02 15:04 UTC")
	case r.State == run.Approved && r.ApprovalExpiresAt != nil:
		return "the apply must start by " + r.ApprovalExpiresAt.UTC().Format("15:04:05 UTC")
	}
	return ""
}

// stateNote says why a stale, expired or rejected run will not apply, in words
// ("rejected by Adam: …" as "This run was rejected by Adam: …"); a reason ending in a
// full stop (a person's rejection reason, often) gets no second one. "" otherwise.
func stateNote(r run.Run) string {
	switch r.State {
	case run.Stale, run.Expired, run.Rejected:
	default:
		return ""
	}
	state, reason := strings.ToLower(r.State.Words()), strings.TrimRight(r.StateReason, ". ")
	if strings.HasPrefix(reason, state+" ") {
		return "This run was " + reason + "."
	}
	return "This run is " + state + ": " + reason + "."
}

// decisionProps are the decision forms the rules allow this person on run r, bound
// to the run's evidence; again is a decision that came back with field errors.
func decisionProps(r run.Run, perms run.Permissions, again *pages.Decision, problems map[string]string) views.DecisionProps {
	ev := run.EvidenceOf(r)
	fields := ev.Fields()
	d := views.DecisionProps{RunID: r.ID, PlanDigest: ev.PlanDigest, Elevated: perms.Deciders.Decision.Elevated,
		ConfirmWord: run.ConfirmWord, MinReason: run.MinReasonLength, ElevationMinutes: int(run.ElevationWindow.Minutes()),
		CanApprove: perms.Approve.Allowed() || perms.FreshSignIn, NeedsReauth: perms.FreshSignIn,
		CanReject: perms.Reject.Allowed(), CanPlanAgain: perms.PlanAgain.Allowed(),
		Counts:      views.PlanCounts{Create: r.PlanSummary.Create, Update: r.PlanSummary.Update, Replace: r.PlanSummary.Replace, Destroy: r.PlanSummary.Delete},
		Destructive: pages.Destructive(r)}
	for _, f := range run.EvidenceFields {
		d.Evidence = append(d.Evidence, views.KV{Key: f, Value: fields[f]})
	}
	if d.CanReject && !d.CanApprove {
		d.ApproveWhyNot = perms.Approve.Reason()
		if r.SoftBlocked() && perms.Override.Allowed() {
			d.ApproveWhyNot = "A soft-mandatory policy blocks it until its failed rules are overridden with a reason: you may do that just below."
		}
	}
	if r.Waiting() {
		d.Deciders = perms.Deciders.Summary()
		if !d.CanApprove && !d.CanReject && perms.Visible {
			d.WhyNot = perms.Approve.Reason()
			if r.SoftBlocked() {
				d.WhyNot = perms.Reject.Reason()
			}
		}
	}
	d.StateNote = stateNote(r)
	if perms.Resubmit.Allowed() {
		// A rejected or blocked request is usually changed before it is asked for again.
		d.ResubmitURL = paths.ResubmitRun(r.TemplateName, r.ID)
	}
	if again != nil {
		d.Failed, d.FailedRule, d.Errors, d.Reason = string(again.Action), again.RuleID, problems, again.Reason
	}
	return d
}

func policyView(data run.ReviewData, perms run.Permissions) views.PolicyView {
	ev := data.Evaluation
	if ev == nil {
		return views.PolicyView{}
	}
	v := views.PolicyView{Evaluated: true, Outcome: outcomeOf(ev.Outcome), EvaluationID: ev.ID, BundleDigest: ev.BundleDigest, ResultDigest: ev.ResultDigest}
	// Failed rules first: they are what the reader is here for.
	for _, res := range pages.FailedFirst(ev.Results) {
		row := views.PolicyRow{RuleID: res.RuleID, Title: res.Title, Version: res.RuleVersion, Enforcement: string(res.Enforcement),
			Passed: res.Passed, Messages: res.Messages}
		if len(row.Messages) > maxMessagesShown {
			row.MoreMessages = len(row.Messages) - maxMessagesShown
			row.Messages = row.Messages[:maxMessagesShown]
		}
		if o, ok := data.Overrides[res.RuleID]; ok {
			row.Overridden = "by " + o.OverriddenByName + ": " + o.Reason
		}
		row.CanOverride = perms.OverrideRule(ev.Results, data.Overrides, res.RuleID, res.RuleVersion).Allowed()
		v.Rows = append(v.Rows, row)
	}
	return v
}

func costView(c *review.Cost) views.CostView {
	if c == nil {
		return views.CostView{}
	}
	v := views.CostView{Known: true, Unpriced: c.Unpriced}
	v.Before, v.After, v.Delta = c.Amounts()
	for _, l := range c.Lines {
		v.Lines = append(v.Lines, views.CostLineView{Type: l.Type, Before: l.Before, After: l.After, Unit: review.Money(l.UnitPrice),
			BeforeCost: review.Money(l.BeforeCost), AfterCost: review.Money(l.AfterCost)})
	}
	return v
}

// planText serves the plan as tofu printed it (the plan log), on demand.
func (h Runs) planText(c echo.Context) error {
	body, err := h.Pages.Log(c.Request().Context(), c.Param("id"), run.JobPlan)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMETextPlainCharsetUTF8, body)
}
