package policies

import (
	"encoding/json"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

// parseJSON decodes one JSON document straight into an OPA value, without the
// map[string]any in between that ast.ValueFromReader builds: a 10,000-change plan
// is several megabytes, and converting it is most of an evaluation's cost.
//
// It follows encoding/json's semantics: numbers keep their literal text (as
// json.Number does), invalid UTF-8 in strings becomes U+FFFD, a later duplicate
// key wins, nesting is limited to 10,000 levels.
func parseJSON(data []byte) (ast.Value, error) {
	p := &jsonParser{data: data, strs: new([internSlots]*ast.Term)}
	return p.document(ctxNone)
}

// document parses the whole input: one value; ctx is ctxPlan for a plan (see
// parsePlan).
func (p *jsonParser) document(ctx planCtx) (ast.Value, error) {
	p.skipSpace()
	t, err := p.value(0, ctx)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.errorf("invalid character %q after the top-level value", p.data[p.pos])
	}
	return t.Value, nil
}

const (
	maxDepth = 10000
	// Strings up to this length are shared: the same key or short value (a type,
	// an action, a region) appears thousands of times in a large plan.
	maxInterned = 64
	internSlots = 1 << 12 // a power of two
	slabSize    = 512
)

var nullTerm = ast.NullTerm()

type jsonParser struct {
	data  []byte
	pos   int
	strs  *[internSlots]*ast.Term
	slab  []ast.Term
	pairs [][2]*ast.Term // scratch stack for objects being built
	elems []*ast.Term    // scratch stack for arrays being built
	trues int            // the true literals read so far
	mask  *masker        // for a plan: masks its sensitive values
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

// term hands out a Term from a slab: one allocation per slabSize terms.
func (p *jsonParser) term(v ast.Value) *ast.Term {
	if len(p.slab) == 0 {
		p.slab = make([]ast.Term, slabSize)
	}
	t := &p.slab[0]
	p.slab = p.slab[1:]
	t.Value = v
	return t
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses a value; ctx is where it is in a plan document (ctxNone for any
// other document, and for the parts of a plan that masking leaves alone).
func (p *jsonParser) value(depth int, ctx planCtx) (*ast.Term, error) {
	if p.pos >= len(p.data) {
		return nil, p.errorf("unexpected end of JSON input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth+1, ctx)
	case c == '[':
		return p.array(depth+1, ctx)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case p.literal("true"):
		p.trues++
		return ast.InternedTerm(true), nil
	case p.literal("false"):
		return ast.InternedTerm(false), nil
	case p.literal("null"):
		return nullTerm, nil
	default:
		return nil, p.errorf("invalid character %q looking for the beginning of a value", c)
	}
}

func (p *jsonParser) literal(word string) bool {
	if len(p.data)-p.pos >= len(word) && string(p.data[p.pos:p.pos+len(word)]) == word {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *jsonParser) object(depth int, ctx planCtx) (*ast.Term, error) {
	if depth > maxDepth {
		return nil, p.errorf("exceeded max depth")
	}
	p.pos++ // {
	base := len(p.pairs)
	marked := false // a sensitivity marker in this object holds a true
	defer func() { p.pairs = p.pairs[:base] }()
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return p.term(ast.NewObject()), nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("looking for the beginning of an object key string")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf("looking for ':' after an object key")
		}
		p.pos++
		p.skipSpace()
		vctx, trues := ctxNone, p.trues
		if ctx != ctxNone {
			vctx = ctx.child(k.Value.(ast.String))
		}
		v, err := p.value(depth, vctx)
		if err != nil {
			return nil, err
		}
		if p.trues != trues && ctx.masks() && isMarkerKey(k.Value.(ast.String)) {
			marked = true
		}
		p.pairs = append(p.pairs, [2]*ast.Term{k, v})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of JSON input")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			pairs := p.pairs[base:]
			if marked {
				p.mask.object(ctx, pairs) // replaces masked values in pairs
			}
			if hasDuplicateKey(pairs) {
				return p.term(lastWins(pairs)), nil
			}
			return p.term(ast.NewObject(pairs...)), nil
		default:
			return nil, p.errorf("invalid character %q after an object key:value pair", p.data[p.pos])
		}
	}
}

// hasDuplicateKey reports whether two pairs share a key (objects are small; the
// keys are usually interned, so equal keys are mostly the same pointer).
func hasDuplicateKey(pairs [][2]*ast.Term) bool {
	if len(pairs) > 32 {
		seen := make(map[string]struct{}, len(pairs))
		for _, kv := range pairs {
			s := string(kv[0].Value.(ast.String))
			if _, dup := seen[s]; dup {
				return true
			}
			seen[s] = struct{}{}
		}
		return false
	}
	for i := 1; i < len(pairs); i++ {
		ki := pairs[i][0].Value.(ast.String)
		for j := 0; j < i; j++ {
			if pairs[j][0].Value.(ast.String) == ki {
				return true
			}
		}
	}
	return false
}

// lastWins builds an object where a later duplicate key replaces the earlier one,
// as encoding/json does.
func lastWins(pairs [][2]*ast.Term) ast.Object {
	obj := ast.NewObjectWithCapacity(len(pairs))
	for _, kv := range pairs {
		obj.Insert(kv[0], kv[1])
	}
	return obj
}

func (p *jsonParser) array(depth int, ctx planCtx) (*ast.Term, error) {
	if depth > maxDepth {
		return nil, p.errorf("exceeded max depth")
	}
	p.pos++ // [
	base := len(p.elems)
	defer func() { p.elems = p.elems[:base] }()
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return p.term(ast.NewArray()), nil
	}
	ectx := ctx.elem()
	for {
		p.skipSpace()
		v, err := p.value(depth, ectx)
		if err != nil {
			return nil, err
		}
		p.elems = append(p.elems, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of JSON input")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			// NewArray keeps the slice it is given: give it its own.
			elems := make([]*ast.Term, len(p.elems)-base)
			copy(elems, p.elems[base:])
			return p.term(ast.NewArray(elems...)), nil
		default:
			return nil, p.errorf("invalid character %q after an array element", p.data[p.pos])
		}
	}
}

func (p *jsonParser) str() (*ast.Term, error) {
	start := p.pos // the opening quote
	i := start + 1
	simple := true
	for ; i < len(p.data); i++ {
		c := p.data[i]
		if c == '"' {
			break
		}
		if c == '\\' {
			simple = false
			i++ // skip the escaped character (a quote, most importantly)
			continue
		}
		if c < 0x20 {
			return nil, p.errorf("invalid control character in a string")
		}
		if c >= 0x80 {
			simple = false
		}
	}
	if i >= len(p.data) {
		return nil, p.errorf("unexpected end of JSON input in a string")
	}
	p.pos = i + 1
	raw := p.data[start+1 : i]
	if simple {
		return p.intern(raw), nil
	}
	// Escapes or non-ASCII: let encoding/json decode it, with its semantics.
	var s string
	if err := json.Unmarshal(p.data[start:i+1], &s); err != nil {
		return nil, p.errorf("%v", err)
	}
	return p.intern([]byte(s)), nil
}

func (p *jsonParser) intern(b []byte) *ast.Term {
	if len(b) > maxInterned {
		return p.term(ast.String(string(b)))
	}
	// A direct-mapped cache: cheaper than a map, and a miss only costs a new term.
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	slot := &p.strs[h&(internSlots-1)]
	if *slot != nil && string((*slot).Value.(ast.String)) == string(b) {
		return *slot
	}
	t := p.term(ast.String(string(b)))
	*slot = t
	return t
}

func (p *jsonParser) number() (*ast.Term, error) {
	start := p.pos
	d := p.data
	i := p.pos
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return nil, p.errorf("invalid number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return nil, p.errorf("invalid number: no digits after the decimal point")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return nil, p.errorf("invalid number: no digits in the exponent")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	p.pos = i
	text := string(d[start:i])
	if t := ast.InternedIntNumberTermFromString(text); t != nil {
		return t, nil
	}
	n, err := ast.NumberChecked(text)
	if err != nil {
		return nil, p.errorf("%v", err)
	}
	return p.term(n), nil
}
