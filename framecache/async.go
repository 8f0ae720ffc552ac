package framecache

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Entries are written in the background by default: Add copies each record into
// memory and Commit hands the entry to one goroutine of the Cache, which writes it
// to a temporary file and publishes it. The decoder that feeds a Writer never waits
// for the disk (a slow or busy disk, page-cache write-back throttling): it pays one
// copy per record. The bytes waiting are bounded (Options.MaxPending); a Writer that
// would pass the bound is dropped — its frames are decoded again next time
// (Stats.Dropped) — rather than slowing the decoding down. Close waits for what is
// queued.

// errDropped is put's error when the background writer is too far behind.
var errDropped = errors.New("framecache: background writer behind, entry dropped")

// bgWriter is a Cache's background publisher.
type bgWriter struct {
	max     int64 // bound on pending bytes; negative: synchronous writers
	pending atomic.Int64
	bufs    sync.Pool // *[]byte: chunk buffers

	mu     sync.Mutex
	jobs   chan bgJob
	done   chan struct{}
	closed bool
}

type bgJob struct {
	w       *Writer
	covered float64
	size    int64
	flushed chan struct{} // a Flush marker (w nil): closed when reached
}

// reserve adds n pending bytes (n may be negative to release them); false, adding
// nothing, when that would pass the bound.
func (b *bgWriter) reserve(n int64) bool {
	if n > 0 && b.pending.Add(n) > b.max {
		b.pending.Add(-n)
		return false
	}
	if n < 0 {
		b.pending.Add(n)
	}
	return true
}

// buffer returns an empty chunk buffer of capacity at least n.
func (b *bgWriter) buffer(n int) []byte {
	if p, ok := b.bufs.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

func (b *bgWriter) recycle(ch []byte) {
	ch = ch[:0]
	b.bufs.Put(&ch)
}

// enqueue queues w's publication; false when the Cache is closing (the caller
// publishes it itself).
func (b *bgWriter) enqueue(w *Writer, covered float64, size int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	if b.jobs == nil {
		b.jobs = make(chan bgJob, 64)
		b.done = make(chan struct{})
		go func() {
			defer close(b.done)
			for j := range b.jobs {
				if j.w == nil {
					close(j.flushed)
					continue
				}
				j.w.publish(j.covered, j.size)
			}
		}()
	}
	b.jobs <- bgJob{w: w, covered: covered, size: size}
	return true
}

// flush waits until the entries queued so far are published.
func (b *bgWriter) flush() {
	b.mu.Lock()
	if b.closed || b.jobs == nil {
		b.mu.Unlock()
		return
	}
	done := make(chan struct{})
	b.jobs <- bgJob{flushed: done}
	b.mu.Unlock()
	<-done
}

// drain stops taking entries and waits until the queued ones are published.
func (b *bgWriter) drain() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	jobs, done := b.jobs, b.done
	b.mu.Unlock()
	if jobs != nil {
		close(jobs)
		<-done
	}
}
