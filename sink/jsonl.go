package sink

import (
	"bytes"
	"fmt"
	"io"

	"github.com/lrstream/lrstream/collate"
)

// JSONL writes the stream as one JSON object per line, for humans and
// debugging (`--format jsonl`). The objects have the same keys as the
// msgpack messages; numeric columns are nested JSON lists (their dtypes
// are in the header's features), floats always carry a '.' or exponent,
// and NaN/±Inf are the strings "NaN", "Infinity", "-Infinity".
type JSONL struct {
	w     io.Writer
	mp    []byte
	out   []byte
	n     int64
	state state
}

// NewJSONL returns a Sink writing JSON lines to w.
func NewJSONL(w io.Writer) *JSONL { return &JSONL{w: w} }

// BytesWritten returns the number of bytes written so far.
func (s *JSONL) BytesWritten() int64 { return s.n }

// emit converts the msgpack message in s.mp to a JSON line and writes it.
func (s *JSONL) emit() error {
	m, err := NewDecoder(bytes.NewReader(s.mp)).Next()
	if err != nil {
		return fmt.Errorf("sink: jsonl: %w", err)
	}
	b, err := appendJSONValue(s.out[:0], m.Value)
	if err != nil {
		return fmt.Errorf("sink: jsonl: %w", err)
	}
	s.out = append(b, '\n')
	n, err := s.w.Write(s.out)
	s.n += int64(n)
	if err != nil {
		return fmt.Errorf("sink: write: %w", err)
	}
	return nil
}

// Header writes the header line.
func (s *JSONL) Header(h Header) error {
	if s.state != stateStart {
		return errOrder
	}
	b, err := AppendHeader(s.mp[:0], h)
	if err != nil {
		return err
	}
	s.mp, s.state = b, stateOpen
	return s.emit()
}

// Batch writes one batch line.
func (s *JSONL) Batch(bt *collate.Batch, meta BatchMeta) error {
	if s.state != stateOpen {
		return errOrder
	}
	b, err := AppendBatch(s.mp[:0], bt, meta)
	if err != nil {
		return err
	}
	s.mp = b
	return s.emit()
}

// End writes the end line.
func (s *JSONL) End(e End) error {
	if s.state != stateOpen {
		return errOrder
	}
	s.state = stateDone
	s.mp = AppendEnd(s.mp[:0], e)
	return s.emit()
}

// Fail writes an error line.
func (s *JSONL) Fail(err error) error {
	if s.state == stateDone {
		return errOrder
	}
	s.state = stateDone
	msg := "unknown error"
	if err != nil {
		msg = err.Error()
	}
	s.mp = AppendError(s.mp[:0], msg)
	return s.emit()
}

// Interface checks.
var (
	_ Sink = (*Msgpack)(nil)
	_ Sink = (*JSONL)(nil)
)

// AppendMessageJSON appends the JSON line form (as JSONL writes it, without
// the newline) of one encoded wire message raw to dst: for converting
// stored or replayed messages.
func AppendMessageJSON(dst, raw []byte) ([]byte, error) {
	m, err := NewDecoder(bytes.NewReader(raw)).Next()
	if err != nil {
		return dst, fmt.Errorf("sink: jsonl: %w", err)
	}
	b, err := appendJSONValue(dst, m.Value)
	if err != nil {
		return dst, fmt.Errorf("sink: jsonl: %w", err)
	}
	return b, nil
}
