package scim

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Op is one PATCH operation (RFC 7644 §3.5.2) as the service applies it to a resource's
// document: the op in lower case (Entra sends "Replace"), the attribute path, and the
// value. No Attr is a PATCH without path: Value is then an object of attributes.
type Op struct {
	Op     string // add, replace or remove
	URI    string // a schema extension's URI ("": the core schema)
	Attr   string
	Sub    string
	Filter *Match // members[value eq "x"], emails[type eq "work"]
	Value  any
}

// Match is a value filter of the form `attribute eq "value"`, the only one Entra and
// Okta send in PATCH paths.
type Match struct {
	Attr  string
	Value string
}

// ErrNoTarget is a remove without path, or a filter on what is no list (§3.5.2: noTarget).
var ErrNoTarget = errors.New("the operation has no target")

// ErrInvalidValue is a value the attribute cannot take (§3.12: invalidValue).
var ErrInvalidValue = errors.New("invalid value")

// Apply applies ops to doc in order. On error doc may be half changed: callers apply to
// a copy and store nothing (persist nothing on a bad request).
func Apply(doc map[string]any, ops []Op) error {
	for _, op := range ops {
		if err := apply(doc, op); err != nil {
			return err
		}
	}
	return nil
}

func apply(doc map[string]any, op Op) error {
	switch op.Op {
	case "add", "replace", "remove":
	default:
		return fmt.Errorf("op %q: %w", op.Op, ErrInvalidValue)
	}
	if op.Attr == "" {
		values, ok := op.Value.(map[string]any)
		if !ok || op.Op == "remove" {
			return ErrNoTarget
		}
		for k, v := range values {
			attr, sub, _ := strings.Cut(k, ".")
			if err := apply(doc, Op{Op: op.Op, Attr: attr, Sub: sub, Value: v}); err != nil {
				return err
			}
		}
		return nil
	}
	target := doc
	if op.URI != "" {
		ext, _ := lookup(doc, op.URI).(map[string]any)
		if ext == nil {
			ext = map[string]any{}
			set(doc, op.URI, ext)
		}
		target = ext
	}
	if op.Filter != nil {
		return applyFiltered(target, op)
	}
	if op.Sub != "" {
		inner, _ := lookup(target, op.Attr).(map[string]any)
		if inner == nil {
			inner = map[string]any{}
			set(target, op.Attr, inner)
		}
		return setOrRemove(inner, op.Sub, op)
	}
	return setOrRemove(target, op.Attr, op)
}

// setOrRemove adds, replaces or removes attribute name of m. Adding to a list appends
// the values not already in it (§3.5.2.1).
func setOrRemove(m map[string]any, name string, op Op) error {
	switch {
	case op.Op == "remove":
		if list, ok := lookup(m, name).([]any); ok && op.Value != nil {
			set(m, name, without(list, asList(op.Value)))
			return nil
		}
		del(m, name)
	case op.Op == "add":
		if list, ok := lookup(m, name).([]any); ok {
			for _, v := range asList(op.Value) {
				if !slices.ContainsFunc(list, func(e any) bool { return same(e, v) }) {
					list = append(list, v)
				}
			}
			set(m, name, list)
			return nil
		}
		set(m, name, op.Value)
	default:
		set(m, name, op.Value)
	}
	return nil
}

// applyFiltered applies op to the elements of a list attribute that match its filter:
// replace or add sets the sub-attribute (or merges the value) on each match, adding an
// element when none matches; remove drops the matches (or their sub-attribute).
func applyFiltered(m map[string]any, op Op) error {
	raw := lookup(m, op.Attr)
	list, ok := raw.([]any)
	if raw != nil && !ok {
		return ErrNoTarget
	}
	matched := false
	out := make([]any, 0, len(list))
	for _, e := range list {
		el, _ := e.(map[string]any)
		if el == nil || !matches(el, *op.Filter) {
			out = append(out, e)
			continue
		}
		matched = true
		if op.Op == "remove" && op.Sub == "" {
			continue
		}
		if err := setElement(el, op); err != nil {
			return err
		}
		out = append(out, el)
	}
	if !matched && op.Op != "remove" {
		el := map[string]any{op.Filter.Attr: op.Filter.Value}
		if err := setElement(el, op); err != nil {
			return err
		}
		out = append(out, el)
	}
	set(m, op.Attr, out)
	return nil
}

func setElement(el map[string]any, op Op) error {
	if op.Sub != "" {
		return setOrRemove(el, op.Sub, Op{Op: op.Op, Value: op.Value})
	}
	values, ok := op.Value.(map[string]any)
	if !ok {
		return fmt.Errorf("%s[...] takes an object: %w", op.Attr, ErrInvalidValue)
	}
	for k, v := range values {
		set(el, k, v)
	}
	return nil
}

func matches(el map[string]any, f Match) bool {
	v := lookup(el, f.Attr)
	return v != nil && strings.EqualFold(fmt.Sprint(v), f.Value)
}

// without returns list less the elements equal to one of drop (by their "value" when
// they are objects: a group's members).
func without(list, drop []any) []any {
	return slices.DeleteFunc(slices.Clone(list), func(e any) bool {
		return slices.ContainsFunc(drop, func(d any) bool { return same(e, d) })
	})
}

func same(a, b any) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		return fmt.Sprint(lookup(am, "value")) == fmt.Sprint(lookup(bm, "value"))
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func asList(v any) []any {
	if list, ok := v.([]any); ok {
		return list
	}
	return []any{v}
}

// lookup, set and del read and write attribute names case-insensitively (RFC 7643 §2.1),
// keeping the spelling already stored.
func lookup(m map[string]any, name string) any {
	if k, ok := key(m, name); ok {
		return m[k]
	}
	return nil
}

func set(m map[string]any, name string, v any) {
	if k, ok := key(m, name); ok {
		name = k
	}
	m[name] = v
}

func del(m map[string]any, name string) {
	if k, ok := key(m, name); ok {
		delete(m, k)
	}
}

func key(m map[string]any, name string) (string, bool) {
	if _, ok := m[name]; ok {
		return name, true
	}
	for k := range m {
		if strings.EqualFold(k, name) {
			return k, true
		}
	}
	return "", false
}

// Bool reads a boolean the way directories send it: true, or the string "True" (Entra).
func Bool(v any) (bool, error) {
	switch b := v.(type) {
	case bool:
		return b, nil
	case string:
		parsed, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(b)))
		if err != nil {
			return false, fmt.Errorf("%q is not a boolean: %w", b, ErrInvalidValue)
		}
		return parsed, nil
	}
	return false, fmt.Errorf("%v is not a boolean: %w", v, ErrInvalidValue)
}
