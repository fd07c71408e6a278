package mock

import (
	"encoding/json"
	"fmt"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// These helpers reproduce how `tofu show -json` turns values holding unknowns
// into JSON: unknown leaves are left out of "after" and marked true in
// "after_unknown"; "*_sensitive" mirrors the value's structure with true for its
// sensitive (marked) parts: those derived from sensitive variables (sensitive.go;
// the sandbox schema itself marks nothing sensitive).

// marshalValue encodes a wholly known value as JSON.
func marshalValue(v cty.Value) json.RawMessage {
	if v == cty.NilVal {
		return json.RawMessage("null")
	}
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		// Only unknown values fail to encode; callers strip them first.
		panic(fmt.Sprintf("mock: encoding a value: %v", err))
	}
	return b
}

// marshalType encodes a value's type as state files and output JSON do.
func marshalType(t cty.Type) json.RawMessage {
	b, err := ctyjson.MarshalType(t)
	if err != nil {
		panic(fmt.Sprintf("mock: encoding a type: %v", err))
	}
	return b
}

// omitUnknowns drops unknown attributes (and nulls unknown sequence elements, to
// keep element positions), as tofu does for "after".
func omitUnknowns(v cty.Value) cty.Value {
	ty := v.Type()
	switch {
	case v.IsNull():
		return v
	case !v.IsKnown():
		return cty.NilVal
	case ty.IsPrimitiveType():
		return v
	case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
		var vals []cty.Value
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if kept := omitUnknowns(e); kept != cty.NilVal {
				vals = append(vals, kept)
			} else {
				vals = append(vals, cty.NullVal(e.Type()))
			}
		}
		return cty.TupleVal(vals)
	default: // map or object
		vals := map[string]cty.Value{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if kept := omitUnknowns(e); kept != cty.NilVal {
				vals[k.AsString()] = kept
			}
		}
		return cty.ObjectVal(vals)
	}
}

// unknownAsBool mirrors v with true for unknown leaves; known leaves are left
// out of objects (so a known map becomes {}), as tofu's after_unknown.
func unknownAsBool(v cty.Value) cty.Value {
	return markAsBool(v, func(v cty.Value) bool { return !v.IsKnown() })
}

// sensitiveAsBool mirrors v's structure: a marked (sensitive) part is true,
// other primitives and nulls are false, collections keep their shape.
func sensitiveAsBool(v cty.Value) cty.Value {
	return markAsBool(v, cty.Value.IsMarked)
}

// markAsBool mirrors v's structure as tofu's after_unknown and *_sensitive do: a part
// that is(part) is true and is not looked into; any other null, unknown or primitive
// is false; a sequence keeps its elements' places; an object or a map keeps only the
// attributes that are not false (so an object with nothing marked becomes {}).
func markAsBool(v cty.Value, is func(cty.Value) bool) cty.Value {
	if is(v) {
		return cty.True
	}
	ty := v.Type()
	switch {
	case v.IsNull() || !v.IsKnown() || ty.IsPrimitiveType():
		return cty.False
	case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
		if v.LengthInt() == 0 {
			return cty.EmptyTupleVal
		}
		var vals []cty.Value
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			vals = append(vals, markAsBool(e, is))
		}
		return cty.TupleVal(vals)
	default:
		vals := map[string]cty.Value{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if b := markAsBool(e, is); !b.RawEquals(cty.False) {
				vals[k.AsString()] = b
			}
		}
		return cty.ObjectVal(vals)
	}
}

// afterJSON encodes a planned value: the known part and its after_unknown.
func afterJSON(v cty.Value) (after, unknown json.RawMessage) {
	if v.IsWhollyKnown() {
		return marshalValue(v), json.RawMessage("{}")
	}
	return marshalValue(omitUnknowns(v)), marshalValue(unknownAsBool(v))
}

// sameValue reports whether two values are known and equal. Anything unknown
// counts as a change, as in tofu's plan.
func sameValue(a, b cty.Value) bool {
	if !a.IsWhollyKnown() || !b.IsWhollyKnown() {
		return false
	}
	return a.Equals(b).True()
}
