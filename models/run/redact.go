package run

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// SensitiveValue is what a sensitive value of a stored plan becomes (RedactPlan).
const SensitiveValue = "(sensitive)"

// RedactPlan returns a plan (`tofu show -json`) with every sensitive value replaced by
// SensitiveValue, as it is stored and shown: OpenTofu writes the values of sensitive
// root variables in clear into its plan JSON, and the values derived from them beside
// the markers saying they are sensitive. Where OpenTofu marks values:
//   - variables.<name>.value, and configuration.root_module.variables.<name>.default,
//     when configuration.root_module.variables.<name>.sensitive is true;
//   - resource_changes[].change and resource_drift[].change: before by
//     before_sensitive, after by after_sensitive; output_changes.<name> the same;
//   - planned_values and prior_state.values: each resource's values (in root_module and
//     its child_modules, at any depth) by its sensitive_values, and outputs.<name>.value
//     when outputs.<name>.sensitive is true.
//
// A marker is true (the whole value) or mirrors the value (an object for an object, an
// array for a list or set); a marker whose shape does not match the value masks the
// whole value if it marks anything. A null stays null: it says only that the value is
// unset. The markers themselves are kept, so a reader still knows what is masked. A
// plan with nothing sensitive comes back unchanged, byte for byte; one that is not a
// JSON object is an error.
func RedactPlan(plan []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(plan))
	dec.UseNumber() // numbers are copied as written, never through a float64
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("reading the plan JSON: %w", err)
	}
	if doc == nil {
		return nil, errors.New("reading the plan JSON: it is not an object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("reading the plan JSON: something follows the object")
	}
	r := &redactor{}
	r.variables(doc)
	for _, key := range []string{"resource_changes", "resource_drift"} {
		changes, _ := doc[key].([]any)
		for _, c := range changes {
			if rc, ok := c.(map[string]any); ok {
				r.change(rc["change"])
			}
		}
	}
	if outs, ok := doc["output_changes"].(map[string]any); ok {
		for _, c := range outs {
			r.change(c)
		}
	}
	r.values(doc["planned_values"])
	if prior, ok := doc["prior_state"].(map[string]any); ok {
		r.values(prior["values"])
	}
	if !r.changed {
		return plan, nil
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // "<" stays "<", as tofu writes it
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("writing the redacted plan JSON: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// redactor masks values in place and remembers whether it masked any.
type redactor struct{ changed bool }

// variables masks the values (and defaults) of the sensitive root variables, which only
// the configuration says are.
func (r *redactor) variables(doc map[string]any) {
	decls := object(object(object(doc["configuration"])["root_module"])["variables"])
	vals := object(doc["variables"])
	for name, d := range decls {
		decl := object(d)
		if decl["sensitive"] != true {
			continue
		}
		r.field(decl, "default", true)
		r.field(object(vals[name]), "value", true)
	}
}

// change masks before and after of a resource or output change by its markers.
func (r *redactor) change(c any) {
	ch := object(c)
	r.field(ch, "before", ch["before_sensitive"])
	r.field(ch, "after", ch["after_sensitive"])
}

// values masks a state's values: every module's resources by their sensitive_values
// and the sensitive outputs.
func (r *redactor) values(v any) {
	sv := object(v)
	for _, o := range object(sv["outputs"]) {
		out := object(o)
		r.field(out, "value", out["sensitive"])
	}
	r.module(sv["root_module"])
}

func (r *redactor) module(v any) {
	m := object(v)
	resources, _ := m["resources"].([]any)
	for _, res := range resources {
		rs := object(res)
		r.field(rs, "values", rs["sensitive_values"])
	}
	children, _ := m["child_modules"].([]any)
	for _, c := range children {
		r.module(c)
	}
}

// field masks the value of key in obj (nil: nothing) by marker.
func (r *redactor) field(obj map[string]any, key string, marker any) {
	if v, ok := obj[key]; ok {
		obj[key] = r.mask(v, marker)
	}
}

// mask returns v with what marker marks replaced by SensitiveValue.
func (r *redactor) mask(v, marker any) any {
	switch mk := marker.(type) {
	case bool:
		if mk {
			return r.whole(v)
		}
		return v
	case map[string]any:
		obj, ok := v.(map[string]any)
		if !ok {
			return r.mismatch(v, marker)
		}
		for k, sub := range mk {
			if old, ok := obj[k]; ok {
				obj[k] = r.mask(old, sub)
			}
		}
		return obj
	case []any:
		arr, ok := v.([]any)
		if !ok {
			return r.mismatch(v, marker)
		}
		for i := range min(len(mk), len(arr)) {
			arr[i] = r.mask(arr[i], mk[i])
		}
		return arr
	}
	return v
}

// mismatch handles a marker whose shape is not the value's: which part it meant cannot
// be told, so the whole value is masked if it marks anything.
func (r *redactor) mismatch(v, marker any) any {
	if marksAny(marker) {
		return r.whole(v)
	}
	return v
}

// whole masks all of v; a null stays null.
func (r *redactor) whole(v any) any {
	if v == nil || v == SensitiveValue {
		return v
	}
	r.changed = true
	return SensitiveValue
}

// marksAny reports whether a marker marks anything as sensitive.
func marksAny(marker any) bool {
	switch mk := marker.(type) {
	case bool:
		return mk
	case map[string]any:
		for _, sub := range mk {
			if marksAny(sub) {
				return true
			}
		}
	case []any:
		for _, sub := range mk {
			if marksAny(sub) {
				return true
			}
		}
	}
	return false
}

// object is v as a JSON object, or nil (reading a nil map finds nothing).
func object(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
