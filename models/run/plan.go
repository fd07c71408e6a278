package run

import (
	"encoding/json"
	"fmt"
	"slices"
)

// planDoc is the part of `tofu show -json` the lifecycle reads.
type planDoc struct {
	ResourceChanges []struct {
		Change struct {
			Actions []string `json:"actions"`
		} `json:"change"`
	} `json:"resource_changes"`
}

// SummarizePlan counts the resource changes of a `tofu show -json` plan by action.
// A replace is ["delete","create"] or ["create","delete"]; the plan review's full
// classification builds on the same reading.
func SummarizePlan(planJSON []byte) (Summary, error) {
	var doc planDoc
	if err := json.Unmarshal(planJSON, &doc); err != nil {
		return Summary{}, fmt.Errorf("reading plan JSON: %w", err)
	}
	var s Summary
	for _, rc := range doc.ResourceChanges {
		a := rc.Change.Actions
		switch {
		case slices.Equal(a, []string{"create"}):
			s.Create++
		case slices.Equal(a, []string{"update"}):
			s.Update++
		case slices.Equal(a, []string{"delete", "create"}), slices.Equal(a, []string{"create", "delete"}):
			s.Replace++
		case slices.Equal(a, []string{"delete"}):
			s.Delete++
		case slices.Equal(a, []string{"read"}):
			s.Read++
		case slices.Equal(a, []string{"no-op"}):
			s.NoOp++
		default:
			return Summary{}, fmt.Errorf("plan JSON has unknown actions %v", a)
		}
	}
	return s, nil
}
