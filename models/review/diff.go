package review

import (
	"bytes"
	"cmp"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// val is one side of a change at some path: ok is false when the value is
// absent (the key is missing, or the whole side is null: a create's before, a
// destroy's after).
type val struct {
	v  any
	ok bool
}

// leaf is a flattened attribute with its path steps (string keys, int
// indexes), kept for sorting.
type leaf struct {
	steps []any
	ac    AttrChange
}

// walker flattens the before and after value trees of one change together, so
// that both sides of an attribute end up on the same leaf.
type walker struct {
	path    []any
	replace [][]any
	matched []bool // per replace path: some leaf matched it
	out     []leaf
}

// walk visits the node at w.path. bs and as are the before/after sensitivity
// masks and unk the after_unknown mask at that node: each is `true` for the
// whole subtree, an object or list mirroring the value, or nil/false.
func (w *walker) walk(b, a val, bs, as, unk any) {
	// A subtree marked whole is one leaf: descending into a sensitive map would
	// show its keys, and an unknown subtree has no after to descend into.
	if !isTrue(bs) && !isTrue(as) && !isTrue(unk) && w.descend(b, a, bs, as, unk) {
		return
	}
	w.leaf(b, a, bs, as, unk)
}

// descend walks the children when both sides are objects (or both lists), or
// one side is absent. It reports false when the node is a leaf: a scalar, a
// type change (null to an object is one), or an empty object or list.
func (w *walker) descend(b, a val, bs, as, unk any) bool {
	bm, bIsMap := b.v.(map[string]any)
	am, aIsMap := a.v.(map[string]any)
	um, _ := unk.(map[string]any)
	if (bIsMap || !b.ok) && (aIsMap || !a.ok) && (bIsMap || aIsMap || len(um) > 0) {
		keys := make([]string, 0, len(bm)+len(am)+len(um))
		for k := range bm {
			keys = append(keys, k)
		}
		for k := range am {
			if _, dup := bm[k]; !dup {
				keys = append(keys, k)
			}
		}
		for k := range um {
			_, inB := bm[k]
			_, inA := am[k]
			if !inB && !inA {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			// An empty object is a leaf ("{}"), except the resource itself.
			return len(w.path) == 0
		}
		for _, k := range keys {
			bv, bok := bm[k]
			av, aok := am[k]
			w.path = append(w.path, k)
			w.walk(val{bv, bok}, val{av, aok}, childKey(bs, k), childKey(as, k), childKey(unk, k))
			w.path = w.path[:len(w.path)-1]
		}
		return true
	}
	bl, bIsList := b.v.([]any)
	al, aIsList := a.v.([]any)
	ul, _ := unk.([]any)
	if (bIsList || !b.ok) && (aIsList || !a.ok) && (bIsList || aIsList || len(ul) > 0) {
		n := max(len(bl), len(al), len(ul))
		if n == 0 {
			return len(w.path) == 0
		}
		for k := range n {
			var bv, av any
			bok, aok := k < len(bl), k < len(al)
			if bok {
				bv = bl[k]
			}
			if aok {
				av = al[k]
			}
			w.path = append(w.path, k)
			w.walk(val{bv, bok}, val{av, aok}, childIndex(bs, k), childIndex(as, k), childIndex(unk, k))
			w.path = w.path[:len(w.path)-1]
		}
		return true
	}
	return false
}

// leaf records the node at w.path when it changed, is unknown or forces the
// replacement.
func (w *walker) leaf(b, a val, bs, as, unk any) {
	// A collapsed node (a type change, a whole-sensitive sibling side) may hold
	// a nested mask: any `true` inside masks the whole rendered value.
	bSens := b.ok && anyTrue(bs)
	unknown := anyTrue(unk)
	aSens := (a.ok || unknown) && anyTrue(as)

	ac := AttrChange{BeforeSensitive: bSens, AfterSensitive: aSens, Unknown: unknown}
	switch {
	case !b.ok:
	case bSens:
		ac.Before = SensitiveText
	default:
		ac.Before = render(b.v)
	}
	switch {
	case unknown:
		ac.After = UnknownText
	case !a.ok:
	case aSens:
		ac.After = SensitiveText
	default:
		ac.After = render(a.v)
	}
	// Absent and null compare equal (b.v and a.v are nil for both). A value
	// that becomes (or stops being) sensitive is a change too.
	ac.Changed = unknown || !reflect.DeepEqual(b.v, a.v) || (b.ok && a.ok && bSens != aSens)
	for k, rp := range w.replace {
		if prefixEither(w.path, rp) {
			ac.ForcesReplacement = true
			w.matched[k] = true
		}
	}
	if !ac.Changed && !ac.Unknown && !ac.ForcesReplacement {
		return
	}
	steps := slices.Clone(w.path)
	ac.Path = formatPath(steps)
	w.out = append(w.out, leaf{steps: steps, ac: ac})
}

func isTrue(mask any) bool {
	t, ok := mask.(bool)
	return ok && t
}

// anyTrue reports whether a mask marks the node or anything under it.
func anyTrue(mask any) bool {
	switch m := mask.(type) {
	case bool:
		return m
	case map[string]any:
		for _, x := range m {
			if anyTrue(x) {
				return true
			}
		}
	case []any:
		for _, x := range m {
			if anyTrue(x) {
				return true
			}
		}
	}
	return false
}

func childKey(mask any, k string) any {
	if m, ok := mask.(map[string]any); ok {
		return m[k]
	}
	return nil
}

func childIndex(mask any, i int) any {
	if l, ok := mask.([]any); ok && i < len(l) {
		return l[i]
	}
	return nil
}

// prefixEither reports whether one path is a prefix of the other: a replace
// path forces every leaf under it, and a collapsed leaf holds every replace
// path under it.
func prefixEither(p, q []any) bool {
	n := min(len(p), len(q))
	for i := range n {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}

// render writes a value as JSON: strings quoted, numbers as written, null,
// {} and [], nested values compact with sorted keys. HTML is not escaped here:
// the page's templates escape what they print.
func render(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		return v.String()
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Values decoded from JSON always encode.
		return ""
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// formatPath writes steps as "a.b[0].c"; a key that is not an identifier is
// written as a quoted index: `labels["k8s.io/name"]`.
func formatPath(steps []any) string {
	var b strings.Builder
	for i, s := range steps {
		switch s := s.(type) {
		case int:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s))
			b.WriteByte(']')
		case string:
			if isIdent(s) {
				if i > 0 {
					b.WriteByte('.')
				}
				b.WriteString(s)
			} else {
				b.WriteByte('[')
				b.WriteString(render(s))
				b.WriteByte(']')
			}
		}
	}
	return b.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && (c == '-' || '0' <= c && c <= '9'):
		default:
			return false
		}
	}
	return true
}

// sortLeaves orders by path, step by step: names by string, indexes by number,
// a path before the paths under it.
func sortLeaves(ls []leaf) {
	slices.SortStableFunc(ls, func(x, y leaf) int {
		for i := range min(len(x.steps), len(y.steps)) {
			if c := compareStep(x.steps[i], y.steps[i]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(x.steps), len(y.steps))
	})
}

func compareStep(x, y any) int {
	xi, xInt := x.(int)
	yi, yInt := y.(int)
	switch {
	case xInt && yInt:
		return cmp.Compare(xi, yi)
	case xInt:
		return -1 // indexes before names (a replace path may mix them)
	case yInt:
		return 1
	}
	return strings.Compare(x.(string), y.(string))
}
