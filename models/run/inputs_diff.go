package run

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// InputStatus is what became of one input between the workspace's last applied run and
// the run asked for now.
type InputStatus string

// What an input can have become. Sensitive is said whenever either side is stored
// masked: the stored inputs cannot tell whether it changed, and the page never claims
// it did not.
const (
	InputUnchanged InputStatus = "unchanged"
	InputChanged   InputStatus = "changed"
	InputAdded     InputStatus = "added"   // set now, unset in the last applied run
	InputRemoved   InputStatus = "removed" // set in the last applied run, unset now
	InputSensitive InputStatus = "sensitive"
	InputNew       InputStatus = "new" // nothing was applied before: no "was"
)

// InputDiff is one input's "was → now": its values as stored and what became of it. A
// sensitive value is never in it: Sensitive says the input is one, and its Was and Now
// stay empty.
type InputDiff struct {
	Name      string
	Was, Now  string
	Status    InputStatus
	Sensitive bool
}

// Changed reports whether the input is known to differ from what was applied.
func (d InputDiff) Changed() bool {
	return d.Status == InputChanged || d.Status == InputAdded || d.Status == InputRemoved
}

// DiffInputs compares a run's stored inputs (now) with those of the workspace's last
// applied run (was; nil when nothing was applied: every input is then new), by name.
// Stored inputs hold SensitiveValue for a sensitive input, so the comparison can only
// say "sensitive" for it, never "unchanged". Values compare by their JSON (3 and 3.0
// are the same number; a map's key order does not matter).
func DiffInputs(was, now json.RawMessage) ([]InputDiff, error) {
	nowVals, err := inputValues(now)
	if err != nil {
		return nil, err
	}
	if was == nil {
		out := make([]InputDiff, 0, len(nowVals))
		for _, name := range sortedKeys(nowVals) {
			d := InputDiff{Name: name, Status: InputNew}
			d.Now, d.Sensitive = shown(nowVals[name])
			out = append(out, d)
		}
		return out, nil
	}
	wasVals, err := inputValues(was)
	if err != nil {
		return nil, err
	}
	names := sortedKeys(nowVals)
	for name := range wasVals {
		if _, ok := nowVals[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]InputDiff, 0, len(names))
	for _, name := range names {
		out = append(out, diffInput(name, wasVals, nowVals))
	}
	return out, nil
}

// diffInput is input name's diff between the two sets of values.
func diffInput(name string, was, now map[string]any) InputDiff {
	w, hadW := was[name]
	n, hasN := now[name]
	d := InputDiff{Name: name}
	var wasMasked, nowMasked bool
	if hadW {
		d.Was, wasMasked = shown(w)
	}
	if hasN {
		d.Now, nowMasked = shown(n)
	}
	if d.Sensitive = wasMasked || nowMasked; d.Sensitive {
		// The other side may be the same secret, stored before it was marked sensitive.
		d.Was, d.Now = "", ""
	}
	switch {
	case !hadW:
		d.Status = InputAdded
	case !hasN:
		d.Status = InputRemoved
	case d.Sensitive:
		// Both are set and one is masked: whether it changed cannot be known.
		d.Status = InputSensitive
	case canonical(w) == canonical(n):
		d.Status = InputUnchanged
	default:
		d.Status = InputChanged
	}
	return d
}

// inputValues reads stored inputs (a JSON object; empty or null is no input).
func inputValues(raw json.RawMessage) (map[string]any, error) {
	vals := map[string]any{}
	if len(strings.TrimSpace(string(raw))) == 0 {
		return vals, nil
	}
	if err := json.Unmarshal(raw, &vals); err != nil {
		return nil, fmt.Errorf("reading stored inputs: %w", err)
	}
	if vals == nil {
		vals = map[string]any{}
	}
	return vals, nil
}

// shown is v as a person reads it ("" and true for a masked value): a string without
// its quotes, anything else as JSON (a list as ["a","b"], null as null).
func shown(v any) (string, bool) {
	if s, ok := v.(string); ok {
		if s == SensitiveValue {
			return "", true
		}
		return s, false
	}
	return canonical(v), false
}

// canonical is v's JSON with sorted keys, what two values compare by.
func canonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
