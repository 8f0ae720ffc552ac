package sink

import "fmt"

// mpHead is what a msgpack type byte says about the rest of its value, as
// the skimming walks (Decoder.NextRaw, SplitMessage, FieldSpan) need it:
// where the value's count comes from and what it counts.
type mpHead struct {
	// lenBytes is the size of the big-endian count that follows the type
	// byte (1, 2 or 4); 0 when the count is n.
	lenBytes uint8
	// n is the count of a type without a length field: the length in the
	// low bits of a fix type, or the payload size of a fixed-width number.
	n uint8
	// per is the number of child values for each unit of the count: 0 when
	// the count is payload bytes, 1 for an array, 2 for a map (key and
	// value).
	per uint8
	// str marks the str types (fixstr, str 8, 16 and 32).
	str bool
	// bad marks the type bytes the walks reject: 0xc1 (never used) and the
	// ext types.
	bad bool
}

// mpHeadOf classifies the msgpack type byte c.
func mpHeadOf(c byte) mpHead {
	switch {
	case c <= 0x7f, c >= 0xe0: // positive and negative fixint
		return mpHead{}
	case c <= 0x8f:
		return mpHead{n: c & 0x0f, per: 2}
	case c <= 0x9f:
		return mpHead{n: c & 0x0f, per: 1}
	case c <= 0xbf:
		return mpHead{n: c & 0x1f, str: true}
	}
	switch c {
	case 0xc0, 0xc2, 0xc3: // nil, false, true
		return mpHead{}
	case 0xc4, 0xc5, 0xc6: // bin 8, 16, 32
		return mpHead{lenBytes: 1 << (c - 0xc4)}
	case 0xcc, 0xd0: // uint 8, int 8
		return mpHead{n: 1}
	case 0xcd, 0xd1:
		return mpHead{n: 2}
	case 0xca, 0xce, 0xd2: // float 32, uint 32, int 32
		return mpHead{n: 4}
	case 0xcb, 0xcf, 0xd3:
		return mpHead{n: 8}
	case 0xd9, 0xda, 0xdb: // str 8, 16, 32
		return mpHead{lenBytes: 1 << (c - 0xd9), str: true}
	case 0xdc, 0xdd: // array 16, 32
		return mpHead{lenBytes: 2 << (c - 0xdc), per: 1}
	case 0xde, 0xdf: // map 16, 32
		return mpHead{lenBytes: 2 << (c - 0xde), per: 2}
	}
	return mpHead{bad: true}
}

// errUnsupportedType reports a type byte a decoder does not handle.
func errUnsupportedType(c byte) error {
	return fmt.Errorf("sink: unsupported msgpack type byte 0x%02x", c)
}

// errNotAMap reports a message whose type byte c is not a map's.
func errNotAMap(c byte) error {
	return fmt.Errorf("sink: message is not a map (type byte 0x%02x)", c)
}

// mpHeads is mpHeadOf as a table, for the walks' inner loops.
var mpHeads = func() (t [256]mpHead) {
	for c := range t {
		t[c] = mpHeadOf(byte(c))
	}
	return t
}()
