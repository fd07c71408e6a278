package mock

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"

	"github.com/zclconf/go-cty/cty"
)

// Sensitive values, as OpenTofu tracks them: the value of a root or module variable
// declared sensitive, of a module output declared sensitive, and every value derived
// from one is marked (cty marks, which HCL's operators and functions carry over). The
// mock evaluates marked values, but keeps what it compares, stores and encodes
// unmarked, with the paths of its sensitive parts beside it (as tofu's state keeps
// sensitive_attributes); it marks a resource's value again where other expressions
// refer to it, and where a log renders it ("(sensitive value)"). The plan JSON says
// which parts are sensitive in before_sensitive, after_sensitive and
// sensitive_values, and writes the values themselves in clear, as tofu does: Gantry
// redacts them before storing the plan (run.RedactPlan).

// sensitiveMark is the mark of a sensitive value (tofu's marks.Sensitive).
const sensitiveMark = "sensitive"

// unmarkSensitive returns v unmarked and the paths of its sensitive parts.
func unmarkSensitive(v cty.Value) (cty.Value, []cty.Path) {
	v, pvm := v.UnmarkDeepWithPaths()
	var paths []cty.Path
	for _, p := range pvm {
		if _, ok := p.Marks[sensitiveMark]; ok {
			paths = append(paths, p.Path)
		}
	}
	sort.Slice(paths, func(i, j int) bool { return pathString(paths[i]) < pathString(paths[j]) })
	return v, paths
}

// markSensitive marks the parts of v at paths sensitive (paths v does not have are
// ignored).
func markSensitive(v cty.Value, paths []cty.Path) cty.Value {
	if len(paths) == 0 || v == cty.NilVal {
		return v
	}
	pvm := make([]cty.PathValueMarks, len(paths))
	for i, p := range paths {
		pvm[i] = cty.PathValueMarks{Path: p, Marks: cty.NewValueMarks(sensitiveMark)}
	}
	return v.MarkWithPaths(pvm)
}

// pathString orders paths (and names them in errors).
func pathString(p cty.Path) string {
	s := ""
	for _, step := range p {
		switch st := step.(type) {
		case cty.GetAttrStep:
			s += "." + st.Name
		case cty.IndexStep:
			s += "[" + st.Key.GoString() + "]"
		}
	}
	return s
}

// stateStep is one step of a path in a state file's sensitive_attributes, as tofu
// writes it: {"type":"get_attr","value":"labels"} or
// {"type":"index","value":{"value":"key_digest","type":"string"}}.
type stateStep struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

type stateIndexKey struct {
	Value json.RawMessage `json:"value"`
	Type  string          `json:"type"`
}

// encodeSensitivePaths writes paths as a state's sensitive_attributes ("[]" for none).
func encodeSensitivePaths(paths []cty.Path) json.RawMessage {
	out := make([][]stateStep, 0, len(paths))
	for _, p := range paths {
		steps := make([]stateStep, 0, len(p))
		for _, step := range p {
			switch st := step.(type) {
			case cty.GetAttrStep:
				steps = append(steps, stateStep{Type: "get_attr", Value: marshalValue(cty.StringVal(st.Name))})
			case cty.IndexStep:
				key := stateIndexKey{Value: marshalValue(st.Key), Type: "string"}
				if st.Key.Type() == cty.Number {
					key.Type = "number"
				}
				b, _ := json.Marshal(key) // a string or a number: always encodes
				steps = append(steps, stateStep{Type: "index", Value: b})
			}
		}
		out = append(out, steps)
	}
	b, _ := json.Marshal(out) // plain structs: always encodes
	return b
}

// decodeSensitivePaths reads a state's sensitive_attributes.
func decodeSensitivePaths(raw json.RawMessage) ([]cty.Path, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var in [][]stateStep
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("sensitive_attributes: %w", err)
	}
	var paths []cty.Path
	for _, steps := range in {
		var p cty.Path
		for _, st := range steps {
			switch st.Type {
			case "get_attr":
				var name string
				if err := json.Unmarshal(st.Value, &name); err != nil {
					return nil, fmt.Errorf("sensitive_attributes: %w", err)
				}
				p = p.GetAttr(name)
			case "index":
				var key stateIndexKey
				if err := json.Unmarshal(st.Value, &key); err != nil {
					return nil, fmt.Errorf("sensitive_attributes: %w", err)
				}
				switch key.Type {
				case "string":
					var s string
					if err := json.Unmarshal(key.Value, &s); err != nil {
						return nil, fmt.Errorf("sensitive_attributes: %w", err)
					}
					p = p.Index(cty.StringVal(s))
				case "number":
					var n json.Number
					if err := json.Unmarshal(key.Value, &n); err != nil {
						return nil, fmt.Errorf("sensitive_attributes: %w", err)
					}
					f, _, err := big.ParseFloat(n.String(), 10, 512, big.ToNearestEven)
					if err != nil {
						return nil, fmt.Errorf("sensitive_attributes: %w", err)
					}
					p = p.Index(cty.NumberVal(f))
				default:
					return nil, fmt.Errorf("sensitive_attributes: an index of type %q", key.Type)
				}
			default:
				return nil, fmt.Errorf("sensitive_attributes: a step of type %q", st.Type)
			}
		}
		paths = append(paths, p)
	}
	return paths, nil
}
