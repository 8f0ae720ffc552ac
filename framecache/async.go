package framecache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/lrstream/lrstream/internal/fsalloc"
)

// Entries are published by one goroutine of the Cache, the background writer, and
// their records are written where Writer.Add is called as long as those writes are
// fast (inline.go). Once they are slow, or from the start with Options.Background or
// Direct, Writer.Add copies each record and queues it for the background writer,
// which writes the records to the entry's temporary file in order: the decoder that
// feeds a Writer then never waits for the disk (a slow or busy disk, page-cache
// write-back throttling), and pays one copy per record. The bytes queued and not yet
// written are bounded (Options.MaxPending); a Writer whose record would pass the
// bound is dropped — its temporary file removed, its frames decoded again next time
// (Stats.Dropped) — rather than slowing the decoding down. Flush and Close wait for
// what is queued.

// errDropped is put's error when the background writer is too far behind.
var errDropped = errors.New("framecache: background writer behind, entry dropped")

// bgWriter is a Cache's background writer.
type bgWriter struct {
	max     int64 // bound on queued bytes; negative: synchronous writers
	pending atomic.Int64
	inline  inlineWrites // whether records are written where they are added (inline.go)
	free    chan []byte  // chunk buffers to reuse (aligned, direct.go): kept across
	// garbage collections, unlike a sync.Pool's, so the pages stay mapped

	mu     sync.Mutex
	jobs   chan bgJob
	done   chan struct{}
	closed bool
}

// bgEntry is an entry's temporary file being written; its fields belong to the
// Writer's goroutine while it writes records there (inline.go), then to the goroutine
// running the entry's jobs (the first job hands it over).
type bgEntry struct {
	dir     string
	f       *os.File // the temporary file, created with the first chunk
	failed  bool
	direct  bool             // f is in O_DIRECT mode (direct.go)
	written int64            // direct: bytes written, a multiple of dioAlign
	tail    []byte           // direct: the bytes after written, less than a block
	size    int64            // buffered: bytes written
	res     fsalloc.Reserver // buffered: the blocks reserved ahead (writeChunk)
}

// chunkBytes is about the size of the chunks a Writer hands over: records are
// gathered into chunks of at least this many bytes (or one record, if larger), so
// that the background writer wakes once for several 480×640 frames, not for each
// (a wake-up of its thread cost more than the write it did).
const chunkBytes = 2 << 20

// pendingChunk is a Writer's chunk being filled.
type pendingChunk struct {
	buf  []byte // aligned; buf[:lead] is room for a direct entry's tail, records follow
	lead int
	crcs [][2]int // the raw records whose checksum the background writer sets: offset, length
}

// queue appends the record b+rest to w's chunk (reserving its bytes), handing the chunk
// over when full: errDropped when the background writer is too far behind.
func (w *Writer) queue(b, rest []byte, crc bool) error {
	n := len(b) + len(rest)
	if !w.c.bg.reserve(int64(n)) {
		return errDropped
	}
	ch := &w.ch
	if ch.buf != nil && cap(ch.buf)-len(ch.buf) < n {
		w.handOver()
	}
	if ch.buf == nil {
		ch.lead = int(w.off % dioAlign) // w.off: this record's offset in the entry
		ch.buf = w.c.bg.buffer(max(ch.lead+n, chunkCap))[:ch.lead]
	}
	at := len(ch.buf)
	ch.buf = append(append(ch.buf, b...), rest...)
	if crc {
		ch.crcs = append(ch.crcs, [2]int{at, n})
	}
	if len(ch.buf)-ch.lead >= chunkBytes {
		w.handOver()
	}
	return nil
}

// handOver submits w's chunk, if any, to the background writer.
func (w *Writer) handOver() {
	ch := &w.ch
	if ch.buf == nil {
		return
	}
	w.c.bg.submit(w.c, bgJob{e: w.e, chunk: ch.buf, lead: ch.lead, crcs: ch.crcs})
	*ch = pendingChunk{}
}

// dropChunk releases w's chunk, not handed over, and its reserved bytes.
func (w *Writer) dropChunk() {
	ch := &w.ch
	if ch.buf == nil {
		return
	}
	w.c.bg.pending.Add(-int64(len(ch.buf) - ch.lead))
	w.c.bg.release(ch.buf)
	*ch = pendingChunk{}
}

// bgJob is one step of an entry: write a chunk, publish, or abort; or a Flush marker.
type bgJob struct {
	e       *bgEntry
	chunk   []byte // the bytes to write are chunk[lead:]; chunk[:lead] is room for a direct entry's tail
	lead    int
	crcs    [][2]int // raw records in chunk whose checksum is still to be set: offset, length
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

// freeChunks is how many chunk buffers are kept for reuse: as many as can be in
// flight within max pending bytes (at most 64), so the buffers kept are those that
// were in use at once, never more.
func freeChunks(pending int64) int {
	return int(min(64, max(4, pending/chunkCap+1)))
}

// chunkCap is the capacity of the chunk buffers kept for reuse: a chunk's bytes and
// the room for a direct entry's tail in front of them.
const chunkCap = chunkBytes + dioAlign

// buffer returns a chunk buffer of length n, aligned for direct writes (direct.go):
// one kept for reuse when n fits chunkCap (fresh memory costs the kernel a page fault
// and a zeroed page per 4 KiB, more than the copy into it), else one of its own.
func (b *bgWriter) buffer(n int) []byte {
	if n > chunkCap {
		return alignedBuffer(n)
	}
	select {
	case buf := <-b.free:
		return buf[:n]
	default:
	}
	return alignedBuffer(chunkCap)[:n]
}

// release keeps buf for reuse if it is a standard chunk buffer and enough are not
// kept already.
func (b *bgWriter) release(buf []byte) {
	if cap(buf) != chunkCap {
		return
	}
	select {
	case b.free <- buf[:0]:
	default:
	}
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
			// At the decoder's priority: at nice 19 it stored 50-80% of a first
			// epoch's segments (the rest dropped, decoded again in the next
			// epoch) once decoding kept both cores busy (docs/video.md).
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
		n := int64(len(j.chunk) - j.lead)
		defer func() {
			b.release(j.chunk)
			b.pending.Add(-n)
		}()
		if e.failed {
			return
		}
		for _, r := range j.crcs {
			rec := j.chunk[r[0] : r[0]+r[1]]
			binary.LittleEndian.PutUint32(rec[20:], recordCRC(rec, rec[recHeader:]))
		}
		if e.f == nil {
			if err := e.open(c, c.direct); err != nil {
				e.failed = true
				c.degrade(err)
				return
			}
		}
		if err := e.writeChunk(j.chunk, j.lead); err != nil {
			e.failed = true
			e.discard()
			c.degrade(fmt.Errorf("writing %s: %w", e.dir, err))
		}
	case j.abort:
		e.discard()
	case j.publish != nil:
		e.publish(c, j.publish, j.covered, j.size)
	}
}

// open creates the entry's temporary file, in O_DIRECT mode if direct and the file
// system allows it.
func (e *bgEntry) open(c *Cache, direct bool) error {
	f, err := createTemp(e.dir)
	if err != nil {
		return err
	}
	e.f = f
	if e.direct = direct && setDirect(f); e.direct {
		c.st.direct.Add(1)
	}
	return nil
}

// publish finishes the entry's complete temporary file (size bytes) and publishes it
// as w's entry with coverage [w.start, covered]; an entry that failed is removed.
func (e *bgEntry) publish(c *Cache, w *Writer, covered float64, size int64) {
	if e.failed || e.f == nil {
		e.discard()
		return
	}
	if err := e.finish(size); err != nil {
		e.discard()
		c.degrade(fmt.Errorf("writing %s: %w", e.dir, err))
		return
	}
	f := e.f
	e.f = nil
	c.publish(w, f, covered, size)
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
