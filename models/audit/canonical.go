package audit

import (
	"bytes"
	"errors"

	"gantry/models/audit/exportfile"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// A fast path for the canonical JSON of an event (canonicalJSON's result, byte for
// byte): exports rebuild a million bodies, and decoding each event's data into maps to
// encode it again cost most of an export's time. appendCanonical parses JSON once and
// writes it canonically (object keys sorted as Go sorts map keys, no insignificant
// space, strings escaped exactly as encoding/json escapes them, numbers as written);
// FuzzCanonical holds it equal to canonicalJSON.

var errNotJSON = errors.New("not JSON")

// appendCanonical appends the canonical form of the one JSON value in src to dst.
func appendCanonical(dst, src []byte) ([]byte, error) {
	var p parser
	return p.canonical(dst, src)
}

// canonical is appendCanonical reusing the parser's working space (an export keeps one
// parser for all its events).
func (p *parser) canonical(dst, src []byte) ([]byte, error) {
	p.src, p.i, p.depth = src, 0, 0
	p.space()
	out, err := p.value(dst)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.src) {
		return nil, errNotJSON
	}
	return out, nil
}

type parser struct {
	src     []byte
	i       int
	scratch []byte
	depth   int
	levels  []level // by object depth (index 0 unused)
}

func (p *parser) space() {
	for p.i < len(p.src) {
		switch p.src[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(dst []byte) ([]byte, error) {
	if p.i >= len(p.src) {
		return nil, errNotJSON
	}
	switch c := p.src[p.i]; {
	case c == '{':
		return p.object(dst)
	case c == '[':
		return p.array(dst)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return exportfile.AppendJSONString(dst, s), nil
	case c == 't':
		return p.literal(dst, "true")
	case c == 'f':
		return p.literal(dst, "false")
	case c == 'n':
		return p.literal(dst, "null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number(dst)
	}
	return nil, errNotJSON
}

func (p *parser) literal(dst []byte, word string) ([]byte, error) {
	if len(p.src)-p.i < len(word) || string(p.src[p.i:p.i+len(word)]) != word {
		return nil, errNotJSON
	}
	p.i += len(word)
	return append(dst, word...), nil
}

// number copies a JSON number as written (encoding/json with UseNumber keeps it so).
func (p *parser) number(dst []byte) ([]byte, error) {
	start := p.i
	if p.src[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.src) && p.src[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, errNotJSON
	}
	if p.i < len(p.src) && p.src[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, errNotJSON
		}
	}
	if p.i < len(p.src) && (p.src[p.i] == 'e' || p.src[p.i] == 'E') {
		p.i++
		if p.i < len(p.src) && (p.src[p.i] == '+' || p.src[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, errNotJSON
		}
	}
	return append(dst, p.src[start:p.i]...), nil
}

func (p *parser) array(dst []byte) ([]byte, error) {
	p.i++ // [
	dst = append(dst, '[')
	p.space()
	if p.i < len(p.src) && p.src[p.i] == ']' {
		p.i++
		return append(dst, ']'), nil
	}
	for n := 0; ; n++ {
		if n > 0 {
			dst = append(dst, ',')
		}
		p.space()
		var err error
		if dst, err = p.value(dst); err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.src) {
			return nil, errNotJSON
		}
		switch p.src[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return append(dst, ']'), nil
		default:
			return nil, errNotJSON
		}
	}
}

// member is one key and value of an object being canonicalised: the decoded key and
// the value's canonical bytes, as offsets into the buffer of the object's depth.
type member struct {
	key, value [2]int
}

// level is the working space of the objects at one depth: their keys and canonical
// values, and their members. Each depth has its own, reused from object to object, so
// an object costs no allocation and a nested object never writes where its parent
// keeps its members.
type level struct {
	buf     []byte
	members []member
}

func (p *parser) object(dst []byte) ([]byte, error) {
	p.i++ // {
	p.space()
	if p.i < len(p.src) && p.src[p.i] == '}' {
		p.i++
		return append(dst, '{', '}'), nil
	}
	p.depth++
	defer func() { p.depth-- }()
	for p.depth >= len(p.levels) {
		p.levels = append(p.levels, level{})
	}
	lv := p.levels[p.depth]
	lv.buf, lv.members = lv.buf[:0], lv.members[:0]
	defer func() { p.levels[p.depth] = lv }() // keep what grew for the next object
	for {
		p.space()
		if p.i >= len(p.src) || p.src[p.i] != '"' {
			return nil, errNotJSON
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		var m member
		m.key[0] = len(lv.buf)
		lv.buf = append(lv.buf, key...)
		m.key[1] = len(lv.buf)
		p.space()
		if p.i >= len(p.src) || p.src[p.i] != ':' {
			return nil, errNotJSON
		}
		p.i++
		p.space()
		m.value[0] = len(lv.buf)
		if lv.buf, err = p.value(lv.buf); err != nil {
			return nil, err
		}
		m.value[1] = len(lv.buf)
		// A repeated key keeps its last value, as decoding into a map does.
		replaced := false
		for j := range lv.members {
			if bytes.Equal(lv.buf[lv.members[j].key[0]:lv.members[j].key[1]], lv.buf[m.key[0]:m.key[1]]) {
				lv.members[j].value, replaced = m.value, true
				break
			}
		}
		if !replaced {
			lv.members = append(lv.members, m)
		}
		p.space()
		if p.i >= len(p.src) {
			return nil, errNotJSON
		}
		if p.src[p.i] == ',' {
			p.i++
			continue
		}
		if p.src[p.i] != '}' {
			return nil, errNotJSON
		}
		p.i++
		break
	}
	buf := lv.buf
	slices.SortFunc(lv.members, func(a, b member) int {
		return bytes.Compare(buf[a.key[0]:a.key[1]], buf[b.key[0]:b.key[1]])
	})
	dst = append(dst, '{')
	for n, m := range lv.members {
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = exportfile.AppendJSONString(dst, buf[m.key[0]:m.key[1]])
		dst = append(dst, ':')
		dst = append(dst, buf[m.value[0]:m.value[1]]...)
	}
	return append(dst, '}'), nil
}

// str reads a JSON string and returns its value, decoded as encoding/json decodes it
// (invalid UTF-8 and lone surrogates become U+FFFD).
func (p *parser) str() ([]byte, error) {
	p.i++ // "
	start := p.i
	// The common case: nothing to unescape, the value is the source's bytes.
	for p.i < len(p.src) {
		c := p.src[p.i]
		if c == '"' {
			s := p.src[start:p.i]
			p.i++
			return s, nil
		}
		if c == '\\' || c < ' ' || c >= utf8.RuneSelf {
			break
		}
		p.i++
	}
	b := append(p.scratch[:0], p.src[start:p.i]...)
	for p.i < len(p.src) {
		c := p.src[p.i]
		switch {
		case c == '"':
			p.i++
			p.scratch = b
			return b, nil
		case c < ' ':
			return nil, errNotJSON
		case c == '\\':
			p.i++
			if p.i >= len(p.src) {
				return nil, errNotJSON
			}
			switch e := p.src[p.i]; e {
			case '"', '\\', '/':
				b = append(b, e)
				p.i++
			case 'b':
				b, p.i = append(b, '\b'), p.i+1
			case 'f':
				b, p.i = append(b, '\f'), p.i+1
			case 'n':
				b, p.i = append(b, '\n'), p.i+1
			case 'r':
				b, p.i = append(b, '\r'), p.i+1
			case 't':
				b, p.i = append(b, '\t'), p.i+1
			case 'u':
				r := p.u4(p.i - 1)
				if r < 0 {
					return nil, errNotJSON
				}
				p.i += 5
				if utf16.IsSurrogate(r) {
					if r2 := p.u4(p.i); r2 >= 0 {
						if dec := utf16.DecodeRune(r, r2); dec != unicode.ReplacementChar {
							p.i += 6
							b = utf8.AppendRune(b, dec)
							continue
						}
					}
					r = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, r)
			default:
				return nil, errNotJSON
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.src[p.i:])
			p.i += size
			b = utf8.AppendRune(b, r) // an invalid byte becomes U+FFFD
		}
	}
	return nil, errNotJSON
}

// u4 reads the \u escape (four hex digits) at i, or returns -1.
func (p *parser) u4(i int) rune {
	if i+6 > len(p.src) || p.src[i] != '\\' || p.src[i+1] != 'u' {
		return -1
	}
	v, err := strconv.ParseUint(string(p.src[i+2:i+6]), 16, 16)
	if err != nil {
		return -1
	}
	return rune(v)
}

// appendJSONString appends s as encoding/json.Marshal writes a string.
func appendJSONString(dst []byte, s string) []byte { return exportfile.AppendJSONString(dst, s) }
