// Package boundary says, for every resource a plan replaces or destroys, how it comes
// back if the change is regretted (DESIGN §9, rollback boundaries): only by a forward
// fix (it holds data, which no rollback restores), by a rollback to the state version
// the plan starts from (it holds no data), or by no way known (the catalog no longer
// describes its template, or no run wrote a state version to go back to).
//
// It is pure and stands below runs, so the two places that need it compute the same
// answer from the same plan: the review page, which shows it next to each change, and
// the decision, whose audit event records what the page showed (models/run). Its words
// are said here, once.
package boundary

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"gantry/models/classify"
)

// Kind is how a replaced or destroyed resource comes back; the values are what the
// audit event records.
type Kind string

// The kinds of rollback boundary.
const (
	// ForwardFixOnly: the resource holds data (the template says so); replacing or
	// destroying it loses the data, and a rollback brings back its configuration only.
	ForwardFixOnly Kind = "forward_fix_only"
	// StateVersion: the resource holds no data; a rollback to the state version the
	// plan starts from creates it again as configured there.
	StateVersion Kind = "restore_from_state_version"
	// NoneKnown: whether it holds data is not known (the catalog no longer describes
	// the template), or no run wrote the state version the plan starts from, so no
	// rollback can go back to it.
	NoneKnown Kind = "none_known"
)

// Facts are what a plan's boundary depends on besides the plan.
type Facts struct {
	// Template names the run's template; Known says the catalog still describes it
	// (which of its types hold data, and its notes).
	Template string
	Known    bool
	// Notes are the template's rollback notes, as its manifest says them.
	Notes string
	// Serial is the state version the plan starts from, when a run wrote it (a
	// rollback re-applies that run's inputs); 0 when there is none to go back to.
	Serial int
}

// Change is the boundary of one change: Index is its place in the classified plan's
// Changes.
type Change struct {
	Index   int
	Address string
	Type    string
	Class   classify.Class
	Kind    Kind
}

// Review is a plan's rollback boundary: the facts it was said from and one Change per
// replace or destroy, in plan order.
type Review struct {
	Facts
	Changes []Change
}

// Of is the rollback boundary of plan res (classified with the template's facts when
// f.Known, so its Irreversible marks say which changes lose data).
func Of(res classify.Result, f Facts) Review {
	f.Notes = strings.TrimSpace(f.Notes)
	out := Review{Facts: f}
	for i, c := range res.Changes {
		if c.Class != classify.ClassReplace && c.Class != classify.ClassDestroy {
			continue
		}
		out.Changes = append(out.Changes, Change{Index: i, Address: c.Address, Type: c.Type, Class: c.Class, Kind: kindOf(c, f)})
	}
	return out
}

// Touches reports whether a plan of counts c replaces or destroys anything: only such
// a plan has a boundary, so a plan that does not need not be read for one.
func Touches(c classify.Counts) bool { return c.Replace+c.Destroy > 0 }

func kindOf(c classify.Change, f Facts) Kind {
	switch {
	case !f.Known:
		return NoneKnown
	case c.Irreversible:
		return ForwardFixOnly
	case f.Serial > 0:
		return StateVersion
	}
	return NoneKnown
}

// At is the boundary of the classified plan's change i, if it has one.
func (r Review) At(i int) (Change, bool) {
	j := sort.Search(len(r.Changes), func(j int) bool { return r.Changes[j].Index >= i })
	if j < len(r.Changes) && r.Changes[j].Index == i {
		return r.Changes[j], true
	}
	return Change{}, false
}

// Label names c's boundary in a few words (a badge beside the change).
func (r Review) Label(c Change) string {
	switch c.Kind {
	case ForwardFixOnly:
		return "forward fix only"
	case StateVersion:
		return "restore from state version " + strconv.Itoa(r.Serial)
	}
	return "none known"
}

// Words say c's boundary in a sentence: what is lost, and what brings it back.
func (r Review) Words(c Change) string {
	switch {
	case c.Kind == ForwardFixOnly && r.Serial > 0:
		return fmt.Sprintf("The data it holds is lost with this change. A rollback to state version %d brings back its configuration, not its data: only a forward fix brings the data back (a restore from a backup, outside Gantry).", r.Serial)
	case c.Kind == ForwardFixOnly:
		return "The data it holds is lost with this change, and no state version written by a run precedes this plan to roll back to: only a forward fix brings it back (a restore from a backup, outside Gantry)."
	case c.Kind == StateVersion:
		return fmt.Sprintf("It holds no data: a rollback to state version %d, the state this plan starts from, re-applies the inputs that wrote that version and creates it again as it was (with a new id).", r.Serial)
	case !r.Known:
		return fmt.Sprintf("The catalog no longer describes template %s, so whether it holds data, and what a rollback brings back, is not known.", r.Template)
	}
	return "It holds no data, but no state version written by a run precedes this plan, so no rollback brings it back: only a new request does."
}

// LosesData reports whether c's boundary is one where something may not come back
// (its notes are shown open beside it).
func (c Change) LosesData() bool { return c.Kind != StateVersion }

// Audit is what the decision's audit event records of the boundary shown with the
// plan: that it was shown, and each resource's boundary (nil when the plan replaces
// and destroys nothing, so nothing was shown).
func (r Review) Audit() map[string]any {
	if len(r.Changes) == 0 {
		return nil
	}
	shown := make([]any, 0, len(r.Changes))
	for _, c := range r.Changes {
		shown = append(shown, map[string]any{"address": c.Address, "boundary": string(c.Kind)})
	}
	out := map[string]any{"rollback_boundary_shown": true, "rollback_boundary": shown}
	if r.Serial > 0 {
		out["rollback_boundary_state_version"] = r.Serial
	}
	return out
}
