package run

import (
	"fmt"

	"gantry/models/classify"
)

// SummarizePlan counts the resource changes of a `tofu show -json` plan by class, using
// the same classification the plan review uses (a replace is ["delete","create"] or
// ["create","delete"]).
func SummarizePlan(planJSON []byte) (Summary, error) {
	res, err := classify.Classify(planJSON, classify.Options{})
	if err != nil {
		return Summary{}, fmt.Errorf("reading plan JSON: %w", err)
	}
	return summaryOf(res.Counts), nil
}

// summaryOf is a classification's counts as a run's plan summary.
func summaryOf(c classify.Counts) Summary {
	return Summary{Create: c.Create, Update: c.Update, Replace: c.Replace, Delete: c.Destroy, NoOp: c.NoOp, Read: c.Read}
}
