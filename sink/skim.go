package sink

import (
	"errors"
	"fmt"
	"io"
)

// NextRaw reads the next message without decoding it: it returns the
// message's type and its exact bytes (valid until the next call). It is the
// fast path for copying stored streams (shard replay); errors are as for
// Next.
func (d *Decoder) NextRaw() (typ string, raw []byte, err error) {
	d.raw = d.raw[:0]
	if _, err := d.br.Peek(1); err != nil {
		if errors.Is(err, io.EOF) {
			return "", nil, io.EOF
		}
		return "", nil, fmt.Errorf("sink: read: %w", err)
	}
	n, err := d.mapLen()
	if err != nil {
		return "", nil, err
	}
	for i := 0; i < n; i++ {
		isType := false
		if k, ok, err := d.skimStr(); err != nil {
			return "", nil, err
		} else if ok && k == "type" {
			isType = true
		}
		if isType {
			v, ok, err := d.skimStr()
			if err != nil {
				return "", nil, err
			}
			if ok {
				typ = v
			}
			continue
		}
		if err := d.skip(0); err != nil {
			return "", nil, err
		}
	}
	if err := checkMessageType(typ); err != nil {
		return "", nil, err
	}
	return typ, d.raw, nil
}

// checkMessageType reports a "type" that is none of the four message
// types.
func checkMessageType(typ string) error {
	switch typ {
	case TypeHeader, TypeBatch, TypeEnd, TypeError:
		return nil
	}
	return fmt.Errorf("sink: unknown message type %q", typ)
}

// mapLen reads a map header.
func (d *Decoder) mapLen() (int, error) {
	p, err := d.read(1)
	if err != nil {
		return 0, err
	}
	h := mpHeads[p[0]]
	if h.per != 2 {
		return 0, errNotAMap(p[0])
	}
	n, err := d.count(h)
	return int(n), err
}

// count reads the count of a value whose type byte says h.
func (d *Decoder) count(h mpHead) (uint64, error) {
	if h.lenBytes == 0 {
		return uint64(h.n), nil
	}
	return d.uint(int(h.lenBytes))
}

// skimStr reads one value; if it is a str it returns it (ok), otherwise
// the value is skipped.
func (d *Decoder) skimStr() (string, bool, error) {
	p, err := d.read(1)
	if err != nil {
		return "", false, err
	}
	h := mpHeads[p[0]]
	if !h.str {
		return "", false, d.skipAfter(p[0], 0)
	}
	n, err := d.count(h)
	if err != nil {
		return "", false, err
	}
	s, err := d.str(int(n))
	return s, err == nil, err
}

// skip skips one value.
func (d *Decoder) skip(depth int) error {
	p, err := d.read(1)
	if err != nil {
		return err
	}
	return d.skipAfter(p[0], depth)
}

// skipAfter skips the rest of a value whose type byte c was read.
func (d *Decoder) skipAfter(c byte, depth int) error {
	if depth > maxDecodeDepth {
		return errors.New("sink: msgpack nested too deeply")
	}
	h := mpHeads[c]
	if h.bad {
		return errUnsupportedType(c)
	}
	n, err := d.count(h)
	if err != nil || n == 0 {
		return err
	}
	if h.per == 0 {
		_, err = d.read(int(n))
		return err
	}
	return d.skipN(int(h.per)*int(n), depth)
}

func (d *Decoder) skipN(n, depth int) error {
	for i := 0; i < n; i++ {
		if err := d.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// SplitMessage finds the first message in buf, an in-memory stream (for
// example a decompressed shard): it returns the message's type and length
// in bytes. A buf that ends inside the message gives an error wrapping
// io.ErrUnexpectedEOF; an empty buf gives io.EOF.
func SplitMessage(buf []byte) (typ string, n int, err error) {
	if len(buf) == 0 {
		return "", 0, io.EOF
	}
	s := skimmer{b: buf}
	typ, err = s.message()
	if err != nil {
		return "", 0, err
	}
	return typ, s.pos, nil
}

// skimmer walks msgpack values in memory.
type skimmer struct {
	b   []byte
	pos int
}

func (s *skimmer) need(n uint64) error {
	if uint64(len(s.b)-s.pos) < n {
		return errTruncated
	}
	return nil
}

func (s *skimmer) byte() (byte, error) {
	if err := s.need(1); err != nil {
		return 0, err
	}
	c := s.b[s.pos]
	s.pos++
	return c, nil
}

func (s *skimmer) uint(n int) (uint64, error) {
	if err := s.need(uint64(n)); err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range s.b[s.pos : s.pos+n] {
		v = v<<8 | uint64(c)
	}
	s.pos += n
	return v, nil
}

// mapLen reads a message's map header.
func (s *skimmer) mapLen() (uint64, error) {
	c, err := s.byte()
	if err != nil {
		return 0, err
	}
	h := mpHeads[c]
	if h.per != 2 {
		return 0, errNotAMap(c)
	}
	return s.count(h)
}

// count reads the count of a value whose type byte says h.
func (s *skimmer) count(h mpHead) (uint64, error) {
	if h.lenBytes == 0 {
		return uint64(h.n), nil
	}
	return s.uint(int(h.lenBytes))
}

// message skims a top-level map and returns its "type" value.
func (s *skimmer) message() (string, error) {
	n, err := s.mapLen()
	if err != nil {
		return "", err
	}
	typ := ""
	for i := uint64(0); i < n; i++ {
		k, kok, err := s.str()
		if err != nil {
			return "", err
		}
		if kok && k == "type" {
			v, vok, err := s.str()
			if err != nil {
				return "", err
			}
			if vok {
				typ = v
			}
			continue
		}
		if err := s.skip(0); err != nil {
			return "", err
		}
	}
	if err := checkMessageType(typ); err != nil {
		return "", err
	}
	return typ, nil
}

// str reads a str value (ok) or skips any other value.
func (s *skimmer) str() (string, bool, error) {
	start := s.pos
	c, err := s.byte()
	if err != nil {
		return "", false, err
	}
	h := mpHeads[c]
	if !h.str {
		s.pos = start
		return "", false, s.skip(0)
	}
	n, err := s.count(h)
	if err != nil {
		return "", false, err
	}
	if err := s.need(n); err != nil {
		return "", false, err
	}
	v := string(s.b[s.pos : s.pos+int(n)])
	s.pos += int(n)
	return v, true, nil
}

// skip skips one value.
func (s *skimmer) skip(depth int) error {
	if depth > maxDecodeDepth {
		return errors.New("sink: msgpack nested too deeply")
	}
	c, err := s.byte()
	if err != nil {
		return err
	}
	h := mpHeads[c]
	if h.bad {
		return errUnsupportedType(c)
	}
	n := uint64(h.n)
	if h.lenBytes != 0 {
		if n, err = s.uint(int(h.lenBytes)); err != nil {
			return err
		}
	}
	if h.per == 0 {
		if err := s.need(n); err != nil {
			return err
		}
		s.pos += int(n)
		return nil
	}
	for i := uint64(0); i < uint64(h.per)*n; i++ {
		if err := s.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// ErrMalformed is wrapped by the errors of FieldSpan and ParseInt for bytes
// that are not msgpack of the form they want. When the bytes end inside a
// value the error also wraps io.ErrUnexpectedEOF.
var ErrMalformed = errors.New("sink: malformed msgpack")

// malformedError marks an error of the skimmer as ErrMalformed, keeping
// its text.
type malformedError struct{ err error }

func (e *malformedError) Error() string   { return e.err.Error() }
func (e *malformedError) Unwrap() []error { return []error{ErrMalformed, e.err} }

// FieldSpan finds the value of key in msg, an encoded message (a msgpack
// map with str keys, as NextRaw and SplitMessage return): msg[start:end]
// is the value's encoding, for example to read it with ParseInt or to
// replace it with another value. It returns -1, -1 and no error when msg
// has no such key. Only the map up to the value is examined. An error
// wraps ErrMalformed.
func FieldSpan(msg []byte, key string) (start, end int, err error) {
	s := skimmer{b: msg}
	n, err := s.mapLen()
	if err != nil {
		return -1, -1, &malformedError{err}
	}
	for i := uint64(0); i < n; i++ {
		k, ok, err := s.str()
		if err != nil {
			return -1, -1, &malformedError{err}
		}
		start := s.pos
		if err := s.skip(0); err != nil {
			return -1, -1, &malformedError{err}
		}
		if ok && k == key {
			return start, s.pos, nil
		}
	}
	return -1, -1, nil
}

// ParseInt decodes b, which must be exactly one msgpack integer (any of
// its encodings, as a FieldSpan of an integer field gives). An error wraps
// ErrMalformed.
func ParseInt(b []byte) (int64, error) {
	s := skimmer{b: b}
	c, err := s.byte()
	if err != nil {
		return 0, &malformedError{err}
	}
	var v int64
	switch {
	case c <= 0x7f:
		v = int64(c)
	case c >= 0xe0:
		v = int64(int8(c))
	case c >= 0xcc && c <= 0xd3:
		u, err := s.uint(intSize(c))
		if err != nil {
			return 0, &malformedError{err}
		}
		var ok bool
		if v, ok = intValue(c, u); !ok {
			return 0, fmt.Errorf("%w: integer %d overflows int64", ErrMalformed, u)
		}
	default:
		return 0, fmt.Errorf("%w: want an integer, type byte 0x%02x", ErrMalformed, c)
	}
	if s.pos != len(b) {
		return 0, fmt.Errorf("%w: %d bytes after the integer", ErrMalformed, len(b)-s.pos)
	}
	return v, nil
}
