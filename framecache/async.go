package framecache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// Entries are written in the background by default: Writer.Add copies each record
// and queues it for one goroutine of the Cache, which writes the records to the
// entry's temporary file in order, and publishes the file when the Writer commits.
// The decoder that feeds a Writer never waits for the disk (a slow or busy disk,
// page-cache write-back throttling): it pays one copy per record. The bytes queued
// and not yet written are bounded (Options.MaxPending); a Writer whose record would
// pass the bound is dropped — its temporary file removed, its frames decoded again
// next time (Stats.Dropped) — rather than slowing the decoding down. Flush and Close
// wait for what is queued.

// errDropped is put's error when the background writer is too far behind.
var errDropped = errors.New("framecache: background writer behind, entry dropped")

// bgWriter is a Cache's background writer.
type bgWriter struct {
	max     int64 // bound on queued bytes; negative: synchronous writers
	pending atomic.Int64
	bufs    sync.Pool // *[]byte: chunk buffers

	mu     sync.Mutex
	jobs   chan bgJob
	done   chan struct{}
	closed bool
}

// bgEntry is an entry being written in the background; its fields belong to the
// goroutine running its jobs.
type bgEntry struct {
	dir    string
	f      *os.File // the temporary file, created with the first chunk
	failed bool
}

// bgJob is one step of an entry: write a chunk, publish, or abort; or a Flush marker.
type bgJob struct {
	e       *bgEntry
	chunk   []byte
	crc     bool // the chunk is a raw record whose checksum is still to be set
	abort   bool
	publish *Writer
	covered float64
	size    int64
	flushed chan struct{} // a Flush marker: closed when reached
}

// reserve adds n pending bytes; false, adding nothing, when that would pass the bound.
func (b *bgWriter) reserve(n int64) bool {
	if b.pending.Add(n) > b.max {
		b.pending.Add(-n)
		return false
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

// submit queues j; once the Cache is closed (no background goroutine any more) it
// runs j on the caller's goroutine.
func (b *bgWriter) submit(c *Cache, j bgJob) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.run(c, j)
		return
	}
	if b.jobs == nil {
		b.jobs = make(chan bgJob, 256)
		b.done = make(chan struct{})
		go func() {
			defer close(b.done)
			// The writer's own thread, at the lowest CPU priority where the OS
			// allows it: it works with what decoding leaves idle (the bound above
			// drops what it cannot keep up with). The thread ends with the
			// goroutine (locked, never unlocked), so no other goroutine inherits
			// the priority.
			runtime.LockOSThread()
			lowerThreadPriority()
			for j := range b.jobs {
				b.run(c, j)
			}
		}()
	}
	b.jobs <- j // the goroutine never takes mu: it drains the queue
	b.mu.Unlock()
}

// run carries out one job.
func (b *bgWriter) run(c *Cache, j bgJob) {
	e := j.e
	switch {
	case j.flushed != nil:
		close(j.flushed)
	case j.chunk != nil:
		n := int64(len(j.chunk))
		defer func() {
			ch := j.chunk[:0]
			b.bufs.Put(&ch)
			b.pending.Add(-n)
		}()
		if e.failed {
			return
		}
		if j.crc {
			binary.LittleEndian.PutUint32(j.chunk[20:], recordCRC(j.chunk, j.chunk[recHeader:]))
		}
		if e.f == nil {
			f, err := createTemp(e.dir)
			if err != nil {
				e.failed = true
				c.degrade(err)
				return
			}
			e.f = f
		}
		if _, err := e.f.Write(j.chunk); err != nil {
			e.failed = true
			e.discard()
			c.degrade(fmt.Errorf("writing %s: %w", e.dir, err))
		}
	case j.abort:
		e.discard()
	case j.publish != nil:
		if e.failed || e.f == nil {
			e.discard()
			return
		}
		f := e.f
		e.f = nil
		c.publish(j.publish, f, j.covered, j.size)
	}
}

// discard removes the entry's temporary file.
func (e *bgEntry) discard() {
	if e.f != nil {
		name := e.f.Name()
		e.f.Close()
		os.Remove(name)
		e.f = nil
	}
}

// flush waits until the jobs queued so far are done.
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

// drain stops queueing (later jobs run on their callers' goroutines) and waits until
// the queued ones are done.
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
