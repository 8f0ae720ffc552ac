package sink

import (
	"sync"

	"github.com/lrstream/lrstream/collate"
)

// EncodedSink is a Sink whose Batch writes exactly the bytes of
// AppendBatch (as *Msgpack's does), so that a producer may encode batches
// itself, for example in parallel with an Encoder, and hand over the
// bytes with WriteEncoded.
type EncodedSink interface {
	Sink
	WriteEncoded(p []byte) error
}

// partsSink is an EncodedSink that also writes EncodeBatch's messages
// without flattening them (*Msgpack).
type partsSink interface {
	WriteEncodedParts(e *Encoded) error
}

// Encoder encodes batches on worker goroutines (EncodeBatch, each into its
// own reused buffer; large payloads such as camera frames are written
// straight from the batch, not copied) and writes them to an EncodedSink strictly in the
// order Batch was called, so the output is byte-identical to calling the
// sink's Batch one batch at a time. At most a few batches per worker are in
// flight. Batch and Close must be called from one goroutine.
type Encoder struct {
	w       EncodedSink
	release func(*collate.Batch)
	jobs    chan *encodeJob
	order   chan *encodeJob
	free    chan *Encoded
	flat    []byte // flattened messages for a sink without WriteEncodedParts
	workers sync.WaitGroup
	written chan struct{}

	mu  sync.Mutex
	err error
}

type encodeJob struct {
	bt    *collate.Batch
	meta  BatchMeta
	enc   *Encoded
	err   error
	ready chan struct{}
}

// NewEncoder starts workers encoding goroutines writing to w. release,
// when set, is called with every batch once it has been written (or
// skipped after an error), from the writing goroutine or Batch's caller,
// so it must be safe for concurrent use; typically the Batcher's Recycle.
func NewEncoder(w EncodedSink, workers int, release func(*collate.Batch)) *Encoder {
	if workers < 1 {
		workers = 1
	}
	window := 2*workers + 2
	e := &Encoder{
		w: w, release: release,
		jobs:    make(chan *encodeJob, window),
		order:   make(chan *encodeJob, window),
		free:    make(chan *Encoded, window+1),
		written: make(chan struct{}),
	}
	for i := 0; i < workers; i++ {
		e.workers.Add(1)
		go func() {
			defer e.workers.Done()
			for j := range e.jobs {
				j.err = EncodeBatch(j.enc, j.bt, j.meta)
				close(j.ready)
			}
		}()
	}
	go e.write()
	return e
}

// write hands the encoded batches to the sink in order.
func (e *Encoder) write() {
	defer close(e.written)
	for j := range e.order {
		<-j.ready
		err := j.err
		if err == nil && e.Err() == nil {
			if pw, ok := e.w.(partsSink); ok {
				err = pw.WriteEncodedParts(j.enc)
			} else {
				e.flat = j.enc.AppendTo(e.flat[:0])
				err = e.w.WriteEncoded(e.flat)
			}
		}
		if err != nil {
			e.setErr(err)
		}
		if e.release != nil {
			e.release(j.bt)
		}
		clear(j.enc.parts) // drop the references to the batch's columns
		j.enc.parts = j.enc.parts[:0]
		select {
		case e.free <- j.enc:
		default:
		}
	}
}

func (e *Encoder) setErr(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

// Err returns the first encoding or write error so far.
func (e *Encoder) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Batch queues bt for encoding and writing; the Encoder owns bt until it
// hands it to release. It returns the first error seen so far (a later
// batch's error surfaces on a later call or on Close).
func (e *Encoder) Batch(bt *collate.Batch, meta BatchMeta) error {
	if err := e.Err(); err != nil {
		if e.release != nil {
			e.release(bt)
		}
		return err
	}
	var enc *Encoded
	select {
	case enc = <-e.free:
	default:
		enc = new(Encoded)
	}
	j := &encodeJob{bt: bt, meta: meta, enc: enc, ready: make(chan struct{})}
	e.order <- j // blocks while the window is full
	e.jobs <- j
	return nil
}

// Close waits until every queued batch is written and returns the first
// error. The sink may be used directly (End, Fail) afterwards.
func (e *Encoder) Close() error {
	close(e.jobs)
	close(e.order)
	<-e.written
	e.workers.Wait()
	return e.Err()
}
