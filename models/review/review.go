// Package review holds the pure pieces of the plan review page (DESIGN §7):
// attribute-level diffs with sensitive values masked, a server-drawn SVG of the
// blast radius of replaces and destroys, a cost estimate from a template's price
// table, and paging over the classified changes.
//
// Like models/classify it reads only the bytes and values it is given: no I/O.
package review

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"gantry/models/classify"
)

// Doc is a plan's resource changes with their raw values, read once for the review page.
type Doc struct {
	changes []rawChange
}

// rawChange is one resource_changes entry. The values stay raw JSON: a page
// shows the attributes of a few dozen changes at a time, so each is decoded
// when asked for, never all 10,000 up front.
type rawChange struct {
	Address string `json:"address"`
	Change  struct {
		Before          json.RawMessage `json:"before"`
		After           json.RawMessage `json:"after"`
		AfterUnknown    json.RawMessage `json:"after_unknown"`
		BeforeSensitive json.RawMessage `json:"before_sensitive"`
		AfterSensitive  json.RawMessage `json:"after_sensitive"`
		ReplacePaths    json.RawMessage `json:"replace_paths"`
	} `json:"change"`
}

// Load decodes the resource changes of a `tofu show -json` plan. Index i of the
// Doc is index i of classify.Result.Changes for the same bytes (both keep the
// plan's order). A document that is not a plan is a classify.ErrFormat error.
func Load(planJSON []byte) (*Doc, error) {
	var doc struct {
		FormatVersion   string      `json:"format_version"`
		ResourceChanges []rawChange `json:"resource_changes"`
	}
	if err := json.Unmarshal(planJSON, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", classify.ErrFormat, err)
	}
	if major, _, _ := strings.Cut(doc.FormatVersion, "."); major != "1" {
		return nil, fmt.Errorf("%w: format_version %q, want 1.x", classify.ErrFormat, doc.FormatVersion)
	}
	return &Doc{changes: doc.ResourceChanges}, nil
}

// Len is the number of resource changes.
func (d *Doc) Len() int { return len(d.changes) }

// AttrChange is one attribute (a leaf of the resource's value tree) before and
// after the change, rendered for display.
type AttrChange struct {
	Path   string // e.g. "labels.team", "rules[0]", "settings[0].tier"
	Before string // rendered value; "" when absent
	After  string
	// BeforeSensitive, AfterSensitive: the value is masked, rendered as "(sensitive value)".
	BeforeSensitive, AfterSensitive bool
	// Unknown: after is unknown until apply: After renders as "(known after apply)".
	Unknown           bool
	Changed           bool
	ForcesReplacement bool // the path is in the change's replace_paths
}

// Renderings of what is not shown.
const (
	SensitiveText = "(sensitive value)"
	UnknownText   = "(known after apply)"
)

// Attributes returns the attribute-level before/after of change i: for updates
// and replaces only the changed, unknown or replacement-forcing leaves; for
// creates the after values; for destroys the before values.
//
// Nested objects and lists are flattened into leaf paths ("tags.team",
// "rules[0]", `labels["k8s.io/name"]` for keys that are not identifiers),
// sorted segment by segment (list indexes numerically). A subtree that
// before_sensitive or after_sensitive marks `true`, or that after_unknown marks
// `true`, is one leaf. Sensitive values are never rendered, on either side: the
// result holds "(sensitive value)" instead, and no part of the secret.
//
// Absent and null count as equal, so a create omits its null attributes. A
// replace path that names no value on either side is still listed, with empty
// Before and After, so the reviewer sees what forces the replacement.
func (d *Doc) Attributes(i int) ([]AttrChange, error) {
	if i < 0 || i >= len(d.changes) {
		return nil, fmt.Errorf("review: change %d out of range (%d changes)", i, len(d.changes))
	}
	rc := &d.changes[i]
	var w walker
	var vals [5]any
	for k, raw := range [...]json.RawMessage{rc.Change.Before, rc.Change.After, rc.Change.AfterUnknown,
		rc.Change.BeforeSensitive, rc.Change.AfterSensitive} {
		v, err := decode(raw)
		if err != nil {
			return nil, fmt.Errorf("review: %s: %w", rc.Address, err)
		}
		vals[k] = v
	}
	rps, err := replacePaths(rc.Change.ReplacePaths)
	if err != nil {
		return nil, fmt.Errorf("review: %s: replace_paths: %w", rc.Address, err)
	}
	w.replace, w.matched = rps, make([]bool, len(rps))
	// A null before (create) or after (destroy) is an absent value tree.
	before := val{v: vals[0], ok: vals[0] != nil}
	after := val{v: vals[1], ok: vals[1] != nil}
	w.walk(before, after, vals[3], vals[4], vals[2])

	// Replace paths that matched no leaf.
	for k, rp := range rps {
		if !w.matched[k] {
			w.out = append(w.out, leaf{steps: rp, ac: AttrChange{Path: formatPath(rp), ForcesReplacement: true}})
		}
	}
	sortLeaves(w.out)
	out := make([]AttrChange, len(w.out))
	for k := range w.out {
		out[k] = w.out[k].ac
	}
	return out, nil
}

// decode reads a raw value keeping numbers as written; an empty raw message
// (the key is missing) is nil.
func decode(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// replacePaths reads replace_paths: lists of steps, strings (attribute names,
// map keys) and numbers (list indexes), returned as string and int steps.
func replacePaths(raw json.RawMessage) ([][]any, error) {
	v, err := decode(raw)
	if err != nil || v == nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("not a list")
	}
	out := make([][]any, 0, len(list))
	for _, p := range list {
		steps, ok := p.([]any)
		if !ok {
			return nil, fmt.Errorf("path %v is not a list", p)
		}
		path := make([]any, len(steps))
		for k, s := range steps {
			switch s := s.(type) {
			case string:
				path[k] = s
			case json.Number:
				n, err := s.Int64()
				if err != nil {
					return nil, fmt.Errorf("step %s: %w", s, err)
				}
				path[k] = int(n)
			default:
				return nil, fmt.Errorf("step %v is neither a name nor an index", s)
			}
		}
		out = append(out, path)
	}
	return out, nil
}
