package sink

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// appendJSONAsMsgpack transcodes one JSON value (the whole of src, with
// surrounding whitespace) to msgpack, preserving object key order. Integers
// that fit int64/uint64 become msgpack integers, other numbers float64.
func appendJSONAsMsgpack(dst, src []byte) ([]byte, error) {
	t := transcoders.Get().(*jsonTranscoder)
	t.src, t.pos, t.out = src, 0, dst
	defer func() {
		t.src, t.out = nil, nil
		transcoders.Put(t)
	}()
	t.ws()
	if err := t.value(0); err != nil {
		return dst, fmt.Errorf("sink: transcoding JSON to msgpack: %w", err)
	}
	t.ws()
	if t.pos != len(t.src) {
		return dst, fmt.Errorf("sink: transcoding JSON to msgpack: trailing data at offset %d", t.pos)
	}
	return t.out, nil
}

// transcoders recycles transcoder state (it would escape to the heap on
// every call otherwise).
var transcoders = sync.Pool{New: func() any { return new(jsonTranscoder) }}

type jsonTranscoder struct {
	src []byte
	pos int
	out []byte
}

const maxJSONDepth = 10000

var errJSONEnd = errors.New("unexpected end of JSON")

func (t *jsonTranscoder) ws() {
	for t.pos < len(t.src) {
		switch t.src[t.pos] {
		case ' ', '\t', '\n', '\r':
			t.pos++
		default:
			return
		}
	}
}

func (t *jsonTranscoder) errAt(what string) error {
	if t.pos >= len(t.src) {
		return errJSONEnd
	}
	return fmt.Errorf("%s at offset %d", what, t.pos)
}

func (t *jsonTranscoder) literal(lit string) bool {
	if len(t.src)-t.pos >= len(lit) && string(t.src[t.pos:t.pos+len(lit)]) == lit {
		t.pos += len(lit)
		return true
	}
	return false
}

func (t *jsonTranscoder) value(depth int) error {
	if depth > maxJSONDepth {
		return errors.New("JSON nested too deeply")
	}
	if t.pos >= len(t.src) {
		return errJSONEnd
	}
	switch c := t.src[t.pos]; {
	case c == '{':
		return t.object(depth)
	case c == '[':
		return t.array(depth)
	case c == '"':
		return t.str()
	case c == 't':
		if !t.literal("true") {
			return t.errAt("invalid literal")
		}
		t.out = mpBool(t.out, true)
	case c == 'f':
		if !t.literal("false") {
			return t.errAt("invalid literal")
		}
		t.out = mpBool(t.out, false)
	case c == 'n':
		if !t.literal("null") {
			return t.errAt("invalid literal")
		}
		t.out = mpNil(t.out)
	case c == '-' || (c >= '0' && c <= '9'):
		return t.number()
	default:
		return t.errAt(fmt.Sprintf("unexpected character %q", c))
	}
	return nil
}

// object transcodes a JSON object (t.pos at its '{') to a msgpack map.
func (t *jsonTranscoder) object(depth int) error {
	t.pos++
	at := len(t.out)
	t.out = append(t.out, 0, 0, 0, 0, 0)
	n := 0
	t.ws()
	if t.pos < len(t.src) && t.src[t.pos] == '}' {
		t.pos++
	} else {
		for {
			t.ws()
			if t.pos >= len(t.src) || t.src[t.pos] != '"' {
				return t.errAt("expected object key")
			}
			if err := t.str(); err != nil {
				return err
			}
			t.ws()
			if t.pos >= len(t.src) || t.src[t.pos] != ':' {
				return t.errAt("expected ':'")
			}
			t.pos++
			t.ws()
			if err := t.value(depth + 1); err != nil {
				return err
			}
			n++
			if more, err := t.separator('}'); err != nil || !more {
				if err != nil {
					return err
				}
				break
			}
		}
	}
	t.out = mpPatchContainer(t.out, at, n, true)
	return nil
}

// array transcodes a JSON array (t.pos at its '[') to a msgpack array.
func (t *jsonTranscoder) array(depth int) error {
	t.pos++
	at := len(t.out)
	t.out = append(t.out, 0, 0, 0, 0, 0)
	n := 0
	t.ws()
	if t.pos < len(t.src) && t.src[t.pos] == ']' {
		t.pos++
	} else {
		for {
			t.ws()
			if err := t.value(depth + 1); err != nil {
				return err
			}
			n++
			if more, err := t.separator(']'); err != nil || !more {
				if err != nil {
					return err
				}
				break
			}
		}
	}
	t.out = mpPatchContainer(t.out, at, n, false)
	return nil
}

// separator consumes what follows a member or element: a ',' (more is true) or
// close, the container's end.
func (t *jsonTranscoder) separator(close byte) (more bool, err error) {
	t.ws()
	if t.pos >= len(t.src) {
		return false, errJSONEnd
	}
	switch t.src[t.pos] {
	case ',':
		t.pos++
		return true, nil
	case close:
		t.pos++
		return false, nil
	}
	return false, t.errAt("expected ',' or '" + string(close) + "'")
}

func (t *jsonTranscoder) number() error {
	start := t.pos
	end, isFloat, ok := scanJSONNumber(t.src, start)
	t.pos = end
	if !ok {
		return t.errAt("invalid number")
	}
	if !isFloat {
		if v, ok := parseSmallInt(t.src[start:t.pos]); ok {
			t.out = mpInt(t.out, v)
			return nil
		}
	}
	s := string(t.src[start:t.pos])
	if !isFloat {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			t.out = mpInt(t.out, v)
			return nil
		}
		if v, err := strconv.ParseUint(s, 10, 64); err == nil {
			t.out = mpUint(t.out, v)
			return nil
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("invalid number %q at offset %d", s, start)
	}
	t.out = mpFloat64(t.out, v)
	return nil
}

// scanJSONNumber scans the JSON number at src[pos:] by the grammar
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? and returns where it ends,
// whether it has a fraction or exponent, and whether it is one.
func scanJSONNumber(src []byte, pos int) (end int, isFloat, ok bool) {
	digits := func() int {
		n := 0
		for pos < len(src) && src[pos] >= '0' && src[pos] <= '9' {
			pos++
			n++
		}
		return n
	}
	if pos < len(src) && src[pos] == '-' {
		pos++
	}
	if pos < len(src) && src[pos] == '0' {
		pos++
	} else if digits() == 0 {
		return pos, false, false
	}
	if pos < len(src) && src[pos] == '.' {
		pos++
		isFloat = true
		if digits() == 0 {
			return pos, true, false
		}
	}
	if pos < len(src) && (src[pos] == 'e' || src[pos] == 'E') {
		pos++
		isFloat = true
		if pos < len(src) && (src[pos] == '+' || src[pos] == '-') {
			pos++
		}
		if digits() == 0 {
			return pos, true, false
		}
	}
	return pos, isFloat, true
}

// parseSmallInt parses a JSON integer of at most 18 digits without
// allocating.
func parseSmallInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 18 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// str transcodes a JSON string starting at the opening quote.
func (t *jsonTranscoder) str() error {
	t.pos++ // opening quote
	start := t.pos
	// Fast path: no escapes.
	for t.pos < len(t.src) {
		c := t.src[t.pos]
		if c == '"' {
			t.out = mpStrHeader(t.out, t.pos-start)
			t.out = append(t.out, t.src[start:t.pos]...)
			t.pos++
			return nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return t.errAt("control character in string")
		}
		t.pos++
	}
	// Slow path: unescape into t.out after a reserved 5-byte header, then
	// compact the header.
	at := len(t.out)
	t.out = append(t.out, 0, 0, 0, 0, 0)
	t.out = append(t.out, t.src[start:t.pos]...)
	buf := t.out
	defer func() { t.out = buf }()
	for t.pos < len(t.src) {
		c := t.src[t.pos]
		switch {
		case c == '"':
			t.pos++
			n := len(buf) - at - 5
			var hdr [5]byte
			h := mpStrHeader(hdr[:0], n)
			copy(buf[at:], h)
			if len(h) < 5 {
				copy(buf[at+len(h):], buf[at+5:])
				buf = buf[:len(buf)-(5-len(h))]
			}
			return nil
		case c < 0x20:
			return t.errAt("control character in string")
		case c != '\\':
			buf = append(buf, c)
			t.pos++
			continue
		}
		var err error
		if buf, err = t.escape(buf); err != nil {
			return err
		}
	}
	return errJSONEnd
}

// escape appends to buf the character of the escape sequence at t.pos
// (its backslash), a \u escape with its surrogate pair when there is one.
func (t *jsonTranscoder) escape(buf []byte) ([]byte, error) {
	t.pos++
	if t.pos >= len(t.src) {
		return buf, errJSONEnd
	}
	e := t.src[t.pos]
	t.pos++
	switch e {
	case '"', '\\', '/':
		buf = append(buf, e)
	case 'b':
		buf = append(buf, '\b')
	case 'f':
		buf = append(buf, '\f')
	case 'n':
		buf = append(buf, '\n')
	case 'r':
		buf = append(buf, '\r')
	case 't':
		buf = append(buf, '\t')
	case 'u':
		r, ok := t.hex4()
		if !ok {
			return buf, t.errAt("invalid \\u escape")
		}
		if utf16.IsSurrogate(r) {
			r2 := utf8.RuneError
			save := t.pos
			if t.literal(`\u`) {
				if x, ok := t.hex4(); ok {
					r2 = utf16.DecodeRune(r, x)
				}
			}
			if r2 == utf8.RuneError {
				t.pos = save
				r = utf8.RuneError
			} else {
				r = r2
			}
		}
		buf = utf8.AppendRune(buf, r)
	default:
		return buf, t.errAt("invalid escape")
	}
	return buf, nil
}

func (t *jsonTranscoder) hex4() (rune, bool) {
	if len(t.src)-t.pos < 4 {
		return 0, false
	}
	var v rune
	for _, c := range t.src[t.pos : t.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	t.pos += 4
	return v, true
}
