package prerender

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Minimal msgpack handling for replay: finding message boundaries in a
// stream and patching single integers (batch seq) or a value (header
// share) inside an encoded message, without decoding the rest.

// errCorrupt reports bytes that are not valid msgpack of the expected form.
var errCorrupt = errors.New("corrupt msgpack")

// msgReader reads whole top-level msgpack values from a stream, without
// decoding them.
type msgReader struct {
	br *bufio.Reader
	// left is how many more bytes the stream may hold; a value claiming
	// more is corrupt (this bounds allocations on corrupt input).
	left int64
	buf  []byte
}

func newMsgReader(r io.Reader, limit int64) *msgReader {
	return &msgReader{br: bufio.NewReaderSize(r, 256<<10), left: limit}
}

// read appends n bytes of the stream to m.buf.
func (m *msgReader) read(n int64) error {
	if n > m.left {
		return fmt.Errorf("%w: a value claims %d bytes, only %d left", errCorrupt, n, m.left)
	}
	start := len(m.buf)
	if int64(cap(m.buf)-start) < n {
		nb := make([]byte, start, int64(2*cap(m.buf))+n)
		copy(nb, m.buf)
		m.buf = nb
	}
	m.buf = m.buf[:start+int(n)]
	if _, err := io.ReadFull(m.br, m.buf[start:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("stream truncated inside a message: %w", io.ErrUnexpectedEOF)
		}
		return err
	}
	m.left -= n
	return nil
}

// next returns the next top-level value's bytes, valid until the next
// call. It returns io.EOF when the stream ends cleanly between values.
func (m *msgReader) next() ([]byte, error) {
	m.buf = m.buf[:0]
	if _, err := m.br.Peek(1); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, err
	}
	for pending := int64(1); pending > 0; pending-- {
		at := len(m.buf)
		if err := m.read(1); err != nil {
			return nil, err
		}
		c := m.buf[at]
		hdr, payload, children, err := typeInfo(c)
		if err != nil {
			return nil, err
		}
		if hdr > 0 {
			if err := m.read(int64(hdr)); err != nil {
				return nil, err
			}
			payload, children = lengths(c, m.buf[at+1:at+1+hdr], payload, children)
		}
		if payload > 0 {
			if err := m.read(payload); err != nil {
				return nil, err
			}
		}
		pending += children
	}
	return m.buf, nil
}

// typeInfo classifies msgpack type byte c: the size of the length field
// that follows it (hdr), and, when known from c alone, the payload size
// and the number of child values.
func typeInfo(c byte) (hdr int, payload, children int64, err error) {
	switch {
	case c <= 0x7f || c >= 0xe0:
		return 0, 0, 0, nil
	case c&0xf0 == 0x80:
		return 0, 0, 2 * int64(c&0x0f), nil
	case c&0xf0 == 0x90:
		return 0, 0, int64(c & 0x0f), nil
	case c&0xe0 == 0xa0:
		return 0, int64(c & 0x1f), 0, nil
	}
	switch c {
	case 0xc0, 0xc2, 0xc3:
		return 0, 0, 0, nil
	case 0xc4, 0xd9:
		return 1, 0, 0, nil
	case 0xc5, 0xda:
		return 2, 0, 0, nil
	case 0xc6, 0xdb:
		return 4, 0, 0, nil
	case 0xc7: // ext 8: length, type
		return 2, 0, 0, nil
	case 0xc8:
		return 3, 0, 0, nil
	case 0xc9:
		return 5, 0, 0, nil
	case 0xca:
		return 0, 4, 0, nil
	case 0xcb:
		return 0, 8, 0, nil
	case 0xcc, 0xd0:
		return 0, 1, 0, nil
	case 0xcd, 0xd1:
		return 0, 2, 0, nil
	case 0xce, 0xd2:
		return 0, 4, 0, nil
	case 0xcf, 0xd3:
		return 0, 8, 0, nil
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1..16 plus the type byte
		return 0, 1 + int64(1)<<(c-0xd4), 0, nil
	case 0xdc, 0xde:
		return 2, 0, 0, nil
	case 0xdd, 0xdf:
		return 4, 0, 0, nil
	}
	return 0, 0, 0, fmt.Errorf("%w: type byte 0x%02x", errCorrupt, c)
}

// lengths completes typeInfo for a type with a length field h.
func lengths(c byte, h []byte, payload, children int64) (int64, int64) {
	var n int64
	switch len(h) {
	case 1:
		n = int64(h[0])
	case 2:
		n = int64(binary.BigEndian.Uint16(h))
	case 3: // ext 16: 2 length bytes, then the type byte
		n = int64(binary.BigEndian.Uint16(h))
	case 4:
		n = int64(binary.BigEndian.Uint32(h))
	case 5: // ext 32
		n = int64(binary.BigEndian.Uint32(h))
	}
	switch c {
	case 0xc7:
		return int64(h[0]), 0
	case 0xc8, 0xc9:
		return n, 0
	case 0xdc, 0xdd:
		return 0, n
	case 0xde, 0xdf:
		return 0, 2 * n
	}
	return n + payload, children
}

// skip returns the offset just past the value starting at b[off].
func skip(b []byte, off int) (int, error) {
	for pending := int64(1); pending > 0; pending-- {
		if off >= len(b) {
			return 0, fmt.Errorf("%w: value cut short", errCorrupt)
		}
		c := b[off]
		off++
		hdr, payload, children, err := typeInfo(c)
		if err != nil {
			return 0, err
		}
		if hdr > 0 {
			if off+hdr > len(b) {
				return 0, fmt.Errorf("%w: value cut short", errCorrupt)
			}
			payload, children = lengths(c, b[off:off+hdr], payload, children)
			off += hdr
		}
		if payload > int64(len(b)-off) {
			return 0, fmt.Errorf("%w: value cut short", errCorrupt)
		}
		off += int(payload)
		pending += children
	}
	return off, nil
}

// mapHeader reads a map header at b[off] and returns its entry count.
func mapHeader(b []byte, off int) (n, next int, err error) {
	if off >= len(b) {
		return 0, 0, fmt.Errorf("%w: want a map", errCorrupt)
	}
	switch c := b[off]; {
	case c&0xf0 == 0x80:
		return int(c & 0x0f), off + 1, nil
	case c == 0xde && off+3 <= len(b):
		return int(binary.BigEndian.Uint16(b[off+1:])), off + 3, nil
	case c == 0xdf && off+5 <= len(b):
		return int(binary.BigEndian.Uint32(b[off+1:])), off + 5, nil
	}
	return 0, 0, fmt.Errorf("%w: want a map", errCorrupt)
}

// str reads a str at b[off].
func str(b []byte, off int) (s string, next int, err error) {
	if off >= len(b) {
		return "", 0, fmt.Errorf("%w: want a str", errCorrupt)
	}
	var n, h int
	switch c := b[off]; {
	case c&0xe0 == 0xa0:
		n, h = int(c&0x1f), 1
	case c == 0xd9 && off+2 <= len(b):
		n, h = int(b[off+1]), 2
	case c == 0xda && off+3 <= len(b):
		n, h = int(binary.BigEndian.Uint16(b[off+1:])), 3
	case c == 0xdb && off+5 <= len(b):
		n, h = int(binary.BigEndian.Uint32(b[off+1:])), 5
	default:
		return "", 0, fmt.Errorf("%w: want a str", errCorrupt)
	}
	if off+h+n > len(b) {
		return "", 0, fmt.Errorf("%w: str cut short", errCorrupt)
	}
	return string(b[off+h : off+h+n]), off + h + n, nil
}

// integer reads an int at b[off].
func integer(b []byte, off int) (int64, int, error) {
	if off >= len(b) {
		return 0, 0, fmt.Errorf("%w: want an int", errCorrupt)
	}
	c := b[off]
	switch {
	case c <= 0x7f:
		return int64(c), off + 1, nil
	case c >= 0xe0:
		return int64(int8(c)), off + 1, nil
	}
	var size int
	switch c {
	case 0xcc, 0xd0:
		size = 1
	case 0xcd, 0xd1:
		size = 2
	case 0xce, 0xd2:
		size = 4
	case 0xcf, 0xd3:
		size = 8
	default:
		return 0, 0, fmt.Errorf("%w: want an int", errCorrupt)
	}
	if off+1+size > len(b) {
		return 0, 0, fmt.Errorf("%w: int cut short", errCorrupt)
	}
	p := b[off+1 : off+1+size]
	var u uint64
	switch size {
	case 1:
		u = uint64(p[0])
	case 2:
		u = uint64(binary.BigEndian.Uint16(p))
	case 4:
		u = uint64(binary.BigEndian.Uint32(p))
	case 8:
		u = binary.BigEndian.Uint64(p)
	}
	next := off + 1 + size
	if c >= 0xd0 { // signed
		switch size {
		case 1:
			return int64(int8(u)), next, nil
		case 2:
			return int64(int16(u)), next, nil
		case 4:
			return int64(int32(u)), next, nil
		}
		return int64(u), next, nil
	}
	if u > math.MaxInt64 {
		return 0, 0, fmt.Errorf("%w: int out of range", errCorrupt)
	}
	return int64(u), next, nil
}

// field locates the value of key in the top-level map message b: it
// returns the value's start and end offsets, or -1, -1 when absent.
func field(b []byte, key string) (int, int, error) {
	n, off, err := mapHeader(b, 0)
	if err != nil {
		return 0, 0, err
	}
	for i := 0; i < n; i++ {
		var k string
		if k, off, err = str(b, off); err != nil {
			return 0, 0, err
		}
		end, err := skip(b, off)
		if err != nil {
			return 0, 0, err
		}
		if k == key {
			return off, end, nil
		}
		off = end
	}
	return -1, -1, nil
}

// batchInfo reads the type, seq and size of an encoded batch message and
// the offsets of its seq value.
type batchInfo struct {
	seq, size        int64
	seqStart, seqEnd int
	isBatch          bool
}

// parseBatch reads a batch message's envelope (type, seq, size).
func parseBatch(b []byte) (batchInfo, error) {
	var bi batchInfo
	n, off, err := mapHeader(b, 0)
	if err != nil {
		return bi, err
	}
	found := 0
	for i := 0; i < n && found < 3; i++ {
		var k string
		if k, off, err = str(b, off); err != nil {
			return bi, err
		}
		switch k {
		case "type":
			var t string
			if t, off, err = str(b, off); err != nil {
				return bi, err
			}
			bi.isBatch = t == "batch"
			found++
			continue
		case "seq":
			bi.seqStart = off
			if bi.seq, off, err = integer(b, off); err != nil {
				return bi, err
			}
			bi.seqEnd = off
			found++
			continue
		case "size":
			if bi.size, off, err = integer(b, off); err != nil {
				return bi, err
			}
			found++
			continue
		}
		if off, err = skip(b, off); err != nil {
			return bi, err
		}
	}
	if !bi.isBatch {
		return bi, fmt.Errorf("%w: message is not a batch", errCorrupt)
	}
	if found < 3 {
		return bi, fmt.Errorf("%w: batch message without seq or size", errCorrupt)
	}
	return bi, nil
}

// Appenders with the most compact encodings, as the sink package writes.

func mpInt(b []byte, v int64) []byte {
	switch {
	case v >= 0 && v <= 0x7f:
		return append(b, byte(v))
	case v >= 0 && v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v >= 0 && v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v >= 0 && v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	case v >= 0:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(v))
	case v >= -32:
		return append(b, byte(int8(v)))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(int8(v)))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(int16(v)))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(int32(v)))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

// mpFixStr appends a str of at most 31 bytes.
func mpFixStr(b []byte, s string) []byte { return append(append(b, 0xa0|byte(len(s))), s...) }

// appendShare appends the header's share map.
func appendShare(b []byte, rank, worldSize, worker, numWorkers int) []byte {
	b = append(b, 0x84)
	b = mpFixStr(b, "rank")
	b = mpInt(b, int64(rank))
	b = mpFixStr(b, "world_size")
	b = mpInt(b, int64(worldSize))
	b = mpFixStr(b, "worker")
	b = mpInt(b, int64(worker))
	b = mpFixStr(b, "num_workers")
	return mpInt(b, int64(numWorkers))
}

// splice appends b with b[start:end] replaced by repl.
func splice(dst, b []byte, start, end int, repl []byte) []byte {
	dst = append(dst, b[:start]...)
	dst = append(dst, repl...)
	return append(dst, b[end:]...)
}
