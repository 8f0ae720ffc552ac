package sink

import (
	"errors"
	"fmt"
	"io"

	"github.com/lrstream/lrstream/collate"
)

// state tracks where a sink is in the header, batch*, end|error grammar.
type state uint8

const (
	stateStart state = iota
	stateOpen
	stateDone
)

// errOrder reports a call out of the stream grammar.
var errOrder = errors.New("sink: call out of order (want Header, Batch*, End or Fail)")

// Msgpack writes the binary wire format to an io.Writer, one Write call per
// message, except batches carrying large columns (camera frames; see
// LargeArray): their payloads are written straight from the batch, each
// with its own Write call, instead of being copied into the message (a
// part stored in another form, collate.Conv, is converted into a reused
// buffer and written from there; with an Arena, straight into it). It
// reuses its encode buffers, so a batch costs no allocation once they have
// grown.
type Msgpack struct {
	// Arena, when set, takes batches' large payloads out of band (serve's
	// shared memory with its client); set it before the first batch, and
	// the header's SHM with it.
	Arena Arena
	w     io.Writer
	buf   []byte
	enc   Encoded
	// scratch holds a converted part while it is written (collate.Conv).
	scratch []byte
	n       int64
	state   state
}

// NewMsgpack returns a Sink writing msgpack messages to w.
func NewMsgpack(w io.Writer) *Msgpack { return &Msgpack{w: w} }

// BytesWritten returns the number of bytes written so far.
func (s *Msgpack) BytesWritten() int64 { return s.n }

func (s *Msgpack) write(p []byte) error {
	n, err := s.w.Write(p)
	s.n += int64(n)
	if err != nil {
		return fmt.Errorf("sink: write: %w", err)
	}
	return nil
}

// Header writes the header message.
func (s *Msgpack) Header(h Header) error {
	if s.state != stateStart {
		return errOrder
	}
	b, err := AppendHeader(s.buf[:0], h)
	if err != nil {
		return err
	}
	s.buf = b
	s.state = stateOpen
	return s.write(b)
}

// Batch encodes and writes one batch message.
func (s *Msgpack) Batch(bt *collate.Batch, meta BatchMeta) error {
	if s.state != stateOpen {
		return errOrder
	}
	if err := EncodeBatch(&s.enc, bt, meta); err != nil {
		return err
	}
	return s.writeParts(&s.enc)
}

func (s *Msgpack) writeParts(e *Encoded) error {
	var n int64
	var err error
	if s.Arena != nil {
		var placed bool
		n, placed, err = e.writeArena(s.w, s.Arena, &s.scratch)
		if err == nil {
			err = s.Arena.Sent(placed)
		}
	} else {
		n, err = e.writeTo(s.w, &s.scratch)
	}
	s.n += n
	clear(e.parts) // drop the references to the batch's columns
	e.parts, e.cols = e.parts[:0], e.cols[:0]
	if err != nil {
		return fmt.Errorf("sink: write: %w", err)
	}
	return nil
}

// WriteEncodedParts writes a batch message encoded by EncodeBatch (for
// example by parallel encoders), its large payloads straight from the
// batch. It must come after Header and before End or Fail.
func (s *Msgpack) WriteEncodedParts(e *Encoded) error {
	if s.state != stateOpen {
		return errOrder
	}
	return s.writeParts(e)
}

// WriteEncoded writes messages already encoded by AppendBatch (for
// example by parallel encoders, or read back from shard files by a
// Decoder). It must come after Header and before End or Fail.
func (s *Msgpack) WriteEncoded(p []byte) error {
	if s.state != stateOpen {
		return errOrder
	}
	if err := s.write(p); err != nil || s.Arena == nil {
		return err
	}
	return s.Arena.Sent(false)
}

// End writes the end message.
func (s *Msgpack) End(e End) error {
	if s.state != stateOpen {
		return errOrder
	}
	s.state = stateDone
	s.buf = AppendEnd(s.buf[:0], e)
	return s.write(s.buf)
}

// Fail writes an error message carrying err's text. It is valid before the
// header too (a stream may consist of a single error message), but not
// after End or a previous Fail.
func (s *Msgpack) Fail(err error) error {
	if s.state == stateDone {
		return errOrder
	}
	s.state = stateDone
	msg := "unknown error"
	if err != nil {
		msg = err.Error()
	}
	s.buf = AppendError(s.buf[:0], msg)
	return s.write(s.buf)
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// Discard returns a msgpack Sink that encodes every message (so it costs
// what a real sink costs) and discards the bytes; BytesWritten reports how
// many were produced. For benchmarks.
func Discard() *Msgpack { return &Msgpack{w: discardWriter{}} }
