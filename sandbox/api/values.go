package api

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
)

// FieldError is a problem with one attribute ("" for the object as a whole).
type FieldError struct {
	Attr    string `json:"attr,omitempty"`
	Message string `json:"message"`
}

func (e FieldError) String() string {
	if e.Attr == "" {
		return e.Message
	}
	return e.Attr + ": " + e.Message
}

// ValidationError lists every problem found in a set of attributes.
type ValidationError struct {
	Kind   string
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.String()
	}
	return e.Kind + ": " + strings.Join(parts, "; ")
}

// Normalize converts attribute values as decoded from JSON (with or without UseNumber) into the
// Go types of their attribute types (see Type) and fills every missing attribute with nil (null).
// It rejects unknown attributes, wrongly typed values and, unless allowComputed, values for
// computed attributes. It does not check required attributes or rules; see Validate.
func (k Kind) Normalize(in map[string]any, allowComputed bool) (map[string]any, error) {
	out := make(map[string]any, len(k.Attrs))
	var errs []FieldError
	for _, name := range sortedAnyKeys(in) {
		a, ok := k.Attr(name)
		if !ok {
			errs = append(errs, FieldError{Attr: name, Message: fmt.Sprintf("%s has no attribute %q", k.TypeName(), name)})
			continue
		}
		if a.Computed && !allowComputed {
			if in[name] != nil {
				errs = append(errs, FieldError{Attr: name, Message: "is set by the cloud and cannot be configured"})
			}
			continue
		}
		v, err := normalizeValue(a.Type, in[name])
		if err != nil {
			errs = append(errs, FieldError{Attr: name, Message: err.Error()})
			continue
		}
		out[name] = v
	}
	for _, a := range k.Attrs {
		if _, ok := out[a.Name]; !ok && (allowComputed || !a.Computed) {
			out[a.Name] = nil
		}
	}
	if len(errs) > 0 {
		return nil, &ValidationError{Kind: k.TypeName(), Fields: errs}
	}
	return out, nil
}

func normalizeValue(t Type, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch t {
	case String:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case Bool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case Int:
		return toInt(v)
	case StringMap:
		switch m := v.(type) {
		case map[string]string:
			out := make(map[string]string, len(m))
			for k, s := range m {
				out[k] = s
			}
			return out, nil
		case map[string]any:
			out := make(map[string]string, len(m))
			for k, e := range m {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("value of key %q must be a string", k)
				}
				out[k] = s
			}
			return out, nil
		}
	case StringList:
		switch l := v.(type) {
		case []string:
			return append([]string{}, l...), nil
		case []any:
			out := make([]string, len(l))
			for i, e := range l {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("element %d must be a string", i)
				}
				out[i] = s
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("must be a %s", t)
}

func toInt(v any) (any, error) {
	switch n := v.(type) {
	case int64:
		return n, nil
	case int:
		return int64(n), nil
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, nil
		}
		if f, err := n.Float64(); err == nil {
			return toInt(f) // 20.0 is 20
		}
		return nil, fmt.Errorf("%s is not a whole number", n)
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), nil
		}
		return nil, fmt.Errorf("%v is not a whole number", n)
	}
	return nil, fmt.Errorf("must be a number")
}

// Validate checks normalized configurable attributes: required ones are set and every set value
// follows its attribute's rule and the kind's combination rules.
func (k Kind) Validate(attrs map[string]any) error {
	var errs []FieldError
	known := map[string]any{}
	for _, a := range k.Attrs {
		if a.Computed {
			continue
		}
		v := attrs[a.Name]
		if v == nil {
			if a.Required {
				errs = append(errs, FieldError{Attr: a.Name, Message: "is required"})
			}
			continue
		}
		if a.Check.Fn != nil {
			if err := a.Check.Fn(v); err != nil {
				errs = append(errs, FieldError{Attr: a.Name, Message: err.Error()})
				continue
			}
		}
		known[a.Name] = v
	}
	if k.CheckObject != nil {
		errs = append(errs, k.CheckObject(known)...)
	}
	if len(errs) > 0 {
		return &ValidationError{Kind: k.TypeName(), Fields: errs}
	}
	return nil
}

// ReplaceAttrs lists the attributes that force replacement whose values differ between two sets
// of normalized attributes.
func (k Kind) ReplaceAttrs(prior, next map[string]any) []string {
	var out []string
	for _, a := range k.Attrs {
		if a.ForceNew && !Equal(prior[a.Name], next[a.Name]) {
			out = append(out, a.Name)
		}
	}
	return out
}

// Equal compares two normalized values; null differs from an empty map or list.
func Equal(a, b any) bool { return reflect.DeepEqual(a, b) }

func sortedAnyKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
