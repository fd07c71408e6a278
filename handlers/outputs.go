package handlers

import (
	"encoding/json"
	"sort"

	"gantry/models/state"
	"gantry/views"
)

// runOutputs are a run's outputs as `tofu output` shows them: a string as itself,
// anything else as its JSON; a sensitive one without its value.
func runOutputs(raw json.RawMessage) []views.OutputRow {
	var m map[string]struct {
		Value     json.RawMessage `json:"value"`
		Sensitive bool            `json:"sensitive"`
	}
	_ = json.Unmarshal(raw, &m)
	out := make([]views.OutputRow, 0, len(m))
	for name, o := range m {
		row := views.OutputRow{Name: name, Sensitive: o.Sensitive}
		if !o.Sensitive {
			var s string
			if err := json.Unmarshal(o.Value, &s); err == nil {
				row.Value = s
			} else {
				row.Value = string(o.Value)
			}
		}
		out = append(out, row)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// stateOutputs are the outputs a workspace's newest state holds; a sensitive one
// without its value.
func stateOutputs(outputs []state.Output) []views.OutputRow {
	out := make([]views.OutputRow, 0, len(outputs))
	for _, o := range outputs {
		row := views.OutputRow{Name: o.Name, Sensitive: o.Sensitive}
		if !o.Sensitive {
			row.Value = o.Value
		}
		out = append(out, row)
	}
	return out
}
