package sink

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/schema"
)

// Array is a decoded msgpack-numpy array: numpy dtype string, shape and raw
// C-order bytes.
type Array struct {
	DType string
	Shape []int
	Data  []byte
	// SHMPos and SHMBytes locate an array that came through a
	// shared-memory arena ("shm": [pos, bytes]; SHMBytes 0 otherwise).
	// Its Data is a copy of the arena's bytes when the Decoder has an
	// Arena.
	SHMPos, SHMBytes uint64
}

// Field is one named column of a decoded batch.
type Field struct {
	Name string
	// Value is an *Array for numeric columns, otherwise the decoded
	// msgpack value (see Decoder.Next for the value types).
	Value any
}

// DecodedBatch is a decoded batch message.
type DecodedBatch struct {
	Meta    BatchMeta
	Size    int
	Columns []Field
}

// Column returns the named column's value, or nil.
func (b *DecodedBatch) Column(name string) any {
	for _, f := range b.Columns {
		if f.Name == name {
			return f.Value
		}
	}
	return nil
}

// Message is one decoded wire message.
type Message struct {
	// Type is "header", "batch", "end" or "error".
	Type string
	// Raw is the message's exact encoded bytes (owned by the Message).
	Raw []byte
	// Value is the whole message as a generic value (a schema.Map).
	Value schema.Map
	// Exactly one of the following is set, according to Type.
	Header *Header
	Batch  *DecodedBatch
	End    *End
	Error  string
}

// Decoder reads wire messages from a msgpack stream.
type Decoder struct {
	// Arena, when set, is the shared-memory arena of the connection:
	// arrays that come as "shm": [pos, bytes] get a copy of their bytes
	// from it (docs/wire-format.md "Shared memory"). Without it such an
	// array is an error.
	Arena []byte
	br    *bufio.Reader // for Next; nil for a one-value decoder
	r     io.Reader     // what values are read from (br, or an unbuffered reader)
	raw   []byte
}

// NewDecoder returns a Decoder reading from r (buffered: it may read ahead
// of the message it returns).
func NewDecoder(r io.Reader) *Decoder {
	br := bufio.NewReaderSize(r, 64<<10)
	return &Decoder{br: br, r: br}
}

// errTruncated reports input ending inside a message.
var errTruncated = fmt.Errorf("sink: stream truncated inside a message: %w", io.ErrUnexpectedEOF)

// Next decodes the next message. It returns io.EOF when the input ends
// cleanly between messages and an error wrapping io.ErrUnexpectedEOF when
// it ends inside one. Generic values decode as nil, bool, int64, uint64
// (above MaxInt64), float64, string, []byte, []any, schema.Map (keys
// converted to strings) and *Array (msgpack-numpy maps).
func (d *Decoder) Next() (*Message, error) {
	d.raw = d.raw[:0]
	if _, err := d.br.Peek(1); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("sink: read: %w", err)
	}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	m, ok := v.(schema.Map)
	if !ok {
		return nil, fmt.Errorf("sink: message is a %T, want a map", v)
	}
	msg := &Message{Raw: append([]byte(nil), d.raw...), Value: m}
	t, _ := m.Get("type")
	msg.Type, _ = t.(string)
	switch msg.Type {
	case TypeHeader:
		msg.Header, err = headerFromMap(m)
	case TypeBatch:
		msg.Batch, err = batchFromMap(m)
	case TypeEnd:
		msg.End, err = endFromMap(m)
	case TypeError:
		s, _ := m.Get("message")
		msg.Error, _ = s.(string)
	default:
		err = fmt.Errorf("sink: unknown message type %q", msg.Type)
	}
	if err != nil {
		return nil, err
	}
	return msg, nil
}

// readChunk bounds how much read allocates ahead of the data actually
// received: a corrupt length prefix must not make the decoder reserve
// gigabytes before finding out the stream is short.
const readChunk = 1 << 20

func (d *Decoder) read(n int) ([]byte, error) {
	if n > readChunk && cap(d.raw)-len(d.raw) < n {
		start := len(d.raw)
		for got := 0; got < n; {
			k := min(readChunk, n-got)
			if got > 0 {
				k = min(got, n-got) // grow geometrically with the data received
			}
			if _, err := d.read(k); err != nil {
				d.raw = d.raw[:start]
				return nil, err
			}
			got += k
		}
		return d.raw[start : start+n], nil
	}
	start := len(d.raw)
	if cap(d.raw)-start < n {
		nb := make([]byte, start, 2*cap(d.raw)+n)
		copy(nb, d.raw)
		d.raw = nb
	}
	d.raw = d.raw[:start+n]
	if d.br != nil && d.br.Buffered() >= n {
		// Fast path: the bytes are buffered.
		p, _ := d.br.Peek(n)
		copy(d.raw[start:], p)
		d.br.Discard(n)
		return d.raw[start : start+n], nil
	}
	if _, err := io.ReadFull(d.r, d.raw[start:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errTruncated
		}
		return nil, fmt.Errorf("sink: read: %w", err)
	}
	return d.raw[start : start+n], nil
}

func (d *Decoder) uint(n int) (uint64, error) {
	p, err := d.read(n)
	if err != nil {
		return 0, err
	}
	switch n {
	case 1:
		return uint64(p[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), nil
	}
	return binary.BigEndian.Uint64(p), nil
}

const maxDecodeDepth = 1000

// value decodes one msgpack value.
func (d *Decoder) value(depth int) (any, error) {
	if depth > maxDecodeDepth {
		return nil, errors.New("sink: msgpack nested too deeply")
	}
	p, err := d.read(1)
	if err != nil {
		return nil, err
	}
	c := p[0]
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c&0xf0 == 0x80:
		return d.mapBody(int(c&0x0f), depth)
	case c&0xf0 == 0x90:
		return d.arrayBody(int(c&0x0f), depth)
	case c&0xe0 == 0xa0:
		return d.str(int(c & 0x1f))
	}
	switch c {
	case 0xc0:
		return nil, nil
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	case 0xc4, 0xc5, 0xc6:
		n, err := d.uint(1 << (c - 0xc4))
		if err != nil {
			return nil, err
		}
		b, err := d.read(int(n))
		if err != nil {
			return nil, err
		}
		return append([]byte{}, b...), nil
	case 0xca:
		u, err := d.uint(4)
		return float64(math.Float32frombits(uint32(u))), err
	case 0xcb:
		u, err := d.uint(8)
		return math.Float64frombits(u), err
	case 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3:
		u, err := d.uint(intSize(c))
		if err != nil {
			return nil, err
		}
		if v, ok := intValue(c, u); ok {
			return v, nil
		}
		return u, nil
	case 0xd9, 0xda, 0xdb:
		n, err := d.uint(1 << (c - 0xd9))
		if err != nil {
			return nil, err
		}
		return d.str(int(n))
	case 0xdc, 0xdd:
		n, err := d.uint(2 << (c - 0xdc))
		if err != nil {
			return nil, err
		}
		return d.arrayBody(int(n), depth)
	case 0xde, 0xdf:
		n, err := d.uint(2 << (c - 0xde))
		if err != nil {
			return nil, err
		}
		return d.mapBody(int(n), depth)
	}
	return nil, errUnsupportedType(c)
}

// intSize returns the payload size of the integer type byte c (0xcc to
// 0xd3): 1, 2, 4 or 8.
func intSize(c byte) int { return 1 << ((c - 0xcc) & 3) }

// intValue converts the big-endian payload u of the integer type byte c
// (0xcc to 0xd3); ok is false for a uint 64 above MaxInt64.
func intValue(c byte, u uint64) (v int64, ok bool) {
	switch c {
	case 0xd0:
		return int64(int8(u)), true
	case 0xd1:
		return int64(int16(u)), true
	case 0xd2:
		return int64(int32(u)), true
	case 0xd3:
		return int64(u), true
	}
	return int64(u), u <= math.MaxInt64
}

func (d *Decoder) str(n int) (string, error) {
	b, err := d.read(n)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func (d *Decoder) arrayBody(n, depth int) (any, error) {
	out := make([]any, 0, min(n, 4096))
	for i := 0; i < n; i++ {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// mapBody decodes a map; a map with bin keys carrying nd = true is a
// msgpack-numpy array and becomes an *Array.
func (d *Decoder) mapBody(n, depth int) (any, error) {
	m := schema.Map{Keys: make([]string, 0, min(n, 4096)), Values: make([]any, 0, min(n, 4096))}
	binKeys := false
	for i := 0; i < n; i++ {
		k, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		var key string
		switch x := k.(type) {
		case string:
			key = x
		case []byte:
			key, binKeys = string(x), true
		default:
			return nil, fmt.Errorf("sink: map key is a %T", k)
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m.Keys = append(m.Keys, key)
		m.Values = append(m.Values, v)
	}
	if binKeys {
		if nd, _ := m.Get("nd"); nd == true {
			return arrayFromMap(m, d.Arena)
		}
	}
	return m, nil
}

func arrayFromMap(m schema.Map, arena []byte) (*Array, error) {
	a := &Array{}
	t, _ := m.Get("type")
	a.DType, _ = t.(string)
	if bt, ok := t.([]byte); ok {
		a.DType = string(bt)
	}
	data, _ := m.Get("data")
	a.Data, _ = data.([]byte)
	if ref, ok := m.Get("shm"); ok {
		if err := a.fromArena(ref, arena); err != nil {
			return nil, err
		}
	}
	shape, _ := m.Get("shape")
	sh, ok := shape.([]any)
	if !ok || a.DType == "" {
		return nil, errors.New("sink: malformed msgpack-numpy array")
	}
	elems := 1
	for _, d := range sh {
		n, ok := d.(int64)
		if !ok || n < 0 {
			return nil, errors.New("sink: malformed msgpack-numpy array shape")
		}
		a.Shape = append(a.Shape, int(n))
		elems *= int(n)
	}
	f := collate.Feature{Name: "array", DType: a.DType}
	if err := f.Validate(); err == nil && elems*f.ItemSize() != len(a.Data) {
		return nil, fmt.Errorf("sink: msgpack-numpy array has %d data bytes, want %d for %s %v", len(a.Data), elems*f.ItemSize(), a.DType, a.Shape)
	}
	return a, nil
}

// fromArena resolves an array's "shm": [pos, bytes] reference.
func (a *Array) fromArena(ref any, arena []byte) error {
	u, pair, ok := uintPair(ref)
	switch {
	case !pair:
		return fmt.Errorf("sink: msgpack-numpy array shm is %v, want [pos, bytes]", ref)
	case !ok:
		return fmt.Errorf("sink: msgpack-numpy array shm is %v, want uints", ref)
	}
	a.SHMPos, a.SHMBytes = u[0], u[1]
	if len(arena) == 0 {
		return errors.New("sink: msgpack-numpy array in shared memory, but the decoder has no arena")
	}
	size := uint64(len(arena))
	off := a.SHMPos % size
	if a.SHMBytes == 0 || a.SHMBytes > size-off {
		return fmt.Errorf("sink: msgpack-numpy array shm [%d, %d] is outside the %d-byte arena", a.SHMPos, a.SHMBytes, size)
	}
	a.Data = append([]byte(nil), arena[off:off+a.SHMBytes]...)
	return nil
}

// Helpers converting generic values to typed fields.

// uintPair reads a decoded array of two uints (an array's shm reference, a
// shm client message): pair is false when v is not an array of two, ok
// false when an element is not a uint.
func uintPair(v any) (u [2]uint64, pair, ok bool) {
	a, isArray := v.([]any)
	if !isArray || len(a) != 2 {
		return u, false, false
	}
	for i, e := range a {
		switch x := e.(type) {
		case int64:
			if x < 0 {
				return u, true, false
			}
			u[i] = uint64(x)
		case uint64:
			u[i] = x
		default:
			return u, true, false
		}
	}
	return u, true, true
}

func getStr(m schema.Map, k string) string {
	v, _ := m.Get(k)
	s, _ := v.(string)
	return s
}

func getInt(m schema.Map, k string) int64 {
	v, _ := m.Get(k)
	i, _ := v.(int64)
	return i
}

func getBool(m schema.Map, k string) bool {
	v, _ := m.Get(k)
	b, _ := v.(bool)
	return b
}

// shapeOf reads a shape (an array of integers; anything else reads as 0)
// as a non-nil slice.
func shapeOf(v any) []int {
	dims, _ := v.([]any)
	shape := []int{}
	for _, d := range dims {
		n, _ := d.(int64)
		shape = append(shape, int(n))
	}
	return shape
}

// stringsOf reads an array of strings (anything else reads as ""); nil
// when it is empty.
func stringsOf(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

func headerFromMap(m schema.Map) (*Header, error) {
	h := &Header{
		Format: getStr(m, "format"), Version: getStr(m, "lrstream_version"),
		Dataset: getStr(m, "dataset"), Revision: getStr(m, "revision"), FPS: int(getInt(m, "fps")),
		Recipe: getStr(m, "recipe"), RecipeSHA256: getStr(m, "recipe_sha256"), Mode: getStr(m, "mode"),
		BatchSize: int(getInt(m, "batch_size")), DropLast: getBool(m, "drop_last"), KeepLanguage: getBool(m, "keep_language"),
	}
	if v, ok := m.Get("pins"); ok {
		pins, err := pinsFromValue(v)
		if err != nil {
			return nil, err
		}
		h.Pins = pins
	}
	if fs, ok := m.Get("features"); ok {
		list, _ := fs.([]any)
		for _, e := range list {
			fm, ok := e.(schema.Map)
			if !ok {
				return nil, errors.New("sink: header feature is not a map")
			}
			sh, _ := fm.Get("shape")
			h.Features = append(h.Features, collate.Feature{Name: getStr(fm, "name"), DType: getStr(fm, "dtype"), Shape: shapeOf(sh)})
		}
	}
	for _, kv := range []struct {
		k   string
		dst *json.RawMessage
	}{{"tools", &h.Tools}, {"options", &h.Options}} {
		if v, ok := m.Get(kv.k); ok && v != nil {
			b, err := appendJSONValue(nil, v)
			if err != nil {
				return nil, fmt.Errorf("sink: header %s: %w", kv.k, err)
			}
			*kv.dst = b
		}
	}
	if ss, ok := m.Get("strings"); ok {
		h.Strings = stringsOf(ss)
	}
	if cs, ok := m.Get("components"); ok {
		h.Components = stringsOf(cs)
	}
	if cs, ok := m.Get("cameras"); ok {
		list, _ := cs.([]any)
		for _, e := range list {
			cm, _ := e.(schema.Map)
			c := Camera{Key: getStr(cm, "key"), Decoded: getBool(cm, "decoded"), Kind: getStr(cm, "kind"),
				DType: getStr(cm, "dtype"), Unit: getStr(cm, "unit")}
			if v, ok := cm.Get("shape"); ok {
				c.Shape = shapeOf(v)
			}
			h.Cameras = append(h.Cameras, c)
		}
	}
	if v, ok := m.Get("share"); ok {
		sm, _ := v.(schema.Map)
		h.Share = Share{Rank: int(getInt(sm, "rank")), WorldSize: int(getInt(sm, "world_size")),
			Worker: int(getInt(sm, "worker")), NumWorkers: int(getInt(sm, "num_workers"))}
	}
	h.SHM = getBool(m, "shm")
	if v, ok := m.Get("training"); ok {
		tm, _ := v.(schema.Map)
		h.Training = &Training{Fingerprint: getStr(tm, "fingerprint"), Epoch: getInt(tm, "epoch"),
			EpochBatches: getInt(tm, "epoch_batches"), Consumers: getInt(tm, "consumers")}
	}
	return h, nil
}

func batchFromMap(m schema.Map) (*DecodedBatch, error) {
	b := &DecodedBatch{Size: int(getInt(m, "size"))}
	b.Meta = BatchMeta{Seq: getInt(m, "seq"), Epoch: getInt(m, "epoch"), Resume: getStr(m, "resume")}
	v, _ := m.Get("columns")
	cols, ok := v.(schema.Map)
	if !ok {
		return nil, errors.New("sink: batch message without a columns map")
	}
	for i, k := range cols.Keys {
		b.Columns = append(b.Columns, Field{Name: k, Value: cols.Values[i]})
	}
	return b, nil
}

func endFromMap(m schema.Map) (*End, error) {
	e := &End{Frames: getInt(m, "frames"), Rendered: getInt(m, "rendered"), Dropped: getInt(m, "dropped"),
		Passthrough: getInt(m, "passthrough"), Skipped: getInt(m, "skipped"), Errors: getInt(m, "errors"),
		Batches: getInt(m, "batches"), Samples: getInt(m, "samples")}
	if v, ok := m.Get("components"); ok {
		cm, _ := v.(schema.Map)
		for i, k := range cm.Keys {
			n, _ := cm.Values[i].(int64)
			e.Components = append(e.Components, ComponentCount{Name: k, Count: n})
		}
	}
	return e, nil
}

// Stream is a whole decoded stream.
type Stream struct {
	Header  *Header
	Batches []*DecodedBatch
	End     *End
}

// StreamError is an in-band error message read from a stream.
type StreamError struct{ Message string }

// Error returns the producer's message.
func (e *StreamError) Error() string { return "lrstream stream failed: " + e.Message }

// ErrNoEnd reports a stream that ended without an end message.
var ErrNoEnd = errors.New("sink: stream ended without an end message (truncated)")

// Decode reads a whole stream and checks its grammar: a header, batches,
// then end. An in-band error message is returned as a *StreamError (with
// what was read so far), a missing end as ErrNoEnd.
func Decode(r io.Reader) (*Stream, error) {
	d := NewDecoder(r)
	s := &Stream{}
	for {
		m, err := d.Next()
		if errors.Is(err, io.EOF) {
			return s, ErrNoEnd
		}
		if err != nil {
			return s, err
		}
		if s.End != nil {
			return s, errors.New("sink: message after end")
		}
		switch m.Type {
		case TypeError:
			return s, &StreamError{Message: m.Error}
		case TypeHeader:
			if s.Header != nil {
				return s, errors.New("sink: second header")
			}
			s.Header = m.Header
		case TypeBatch:
			if s.Header == nil {
				return s, errors.New("sink: batch before header")
			}
			s.Batches = append(s.Batches, m.Batch)
		case TypeEnd:
			if s.Header == nil {
				return s, errors.New("sink: end before header")
			}
			s.End = m.End
			if _, err := d.Next(); !errors.Is(err, io.EOF) {
				if err == nil {
					return s, errors.New("sink: message after end")
				}
				return s, err
			}
			return s, nil
		}
	}
}
