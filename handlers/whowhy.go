package handlers

import (
	"cmp"
	"slices"
	"strconv"

	"gantry/models/pages"
	"gantry/models/run"
	"gantry/views"
)

// whoWhyProps is the review's "Who and why" of run r: its requester, note and inputs
// against the run applied before it, the known changes first.
func whoWhyProps(w pages.WhoWhy, r run.Run) views.WhoWhyProps {
	p := views.WhoWhyProps{Requester: w.Requester, You: w.You, At: w.At.UTC().Format("2006-01-02 15:04 UTC"), Note: noteProps(r),
		Compared: string(w.Compared)}
	if a := w.Against; a != nil {
		p.AgainstID, p.AgainstLabel = a.ID, a.Label()
		if w.Compared == pages.CompareApplied && a.TemplateVersion != r.TemplateVersion {
			p.TemplateWas, p.TemplateNow = a.TemplateVersion, r.TemplateVersion
		}
	}
	switch {
	case r.RollbackVersionID != nil:
		p.Origin = "This is a rollback: its inputs are those that wrote state version " + strconv.Itoa(r.RollbackSerial) + ", not typed by the requester."
	case r.PromotedFromRunID != nil:
		p.Origin = "This is a promotion: its inputs are those applied in another environment."
	}
	for _, d := range w.Inputs {
		p.Inputs = append(p.Inputs, views.InputDiffRow{Name: d.Name, Was: d.Was, Now: d.Now, Status: string(d.Status), Changed: d.Changed(), Sensitive: d.Sensitive})
		if d.Changed() {
			p.ChangedCount++
		}
	}
	// Known changes first, then what cannot be known, then the rest; by name within.
	slices.SortStableFunc(p.Inputs, func(a, b views.InputDiffRow) int { return cmp.Compare(inputRank(a), inputRank(b)) })
	return p
}

func inputRank(in views.InputDiffRow) int {
	switch {
	case in.Changed:
		return 0
	case in.Status == string(run.InputSensitive):
		return 1
	}
	return 2
}

// noteProps is run r's reason and ticket as shown: the ticket a link only when it is
// an http(s) URL (run.TicketLink).
func noteProps(r run.Run) views.RequestNote {
	return views.RequestNote{Reason: r.RequestReason, Line: run.ReasonLine(r.RequestReason, run.ReasonLineLength), Ticket: r.RequestTicket,
		TicketURL: run.TicketLink(r.RequestTicket)}
}
