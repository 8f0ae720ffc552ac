package framecache

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Inline writes. A record queued for the background writer costs a copy into its
// chunk on the decoding thread and, on the writer's, a checksum of that copy and the
// kernel's copy of it into the page cache: passes over memory no longer in the CPU's
// cache, which also slow down the decoder sharing that memory, and a wake-up of the
// writer's thread. Written where it is added instead, a record is checksummed and
// copied into the page cache while the decoder has just read it. On the 2-core VM of
// docs/performance.md the first epoch of a shuffled bench480 stream, which stores
// 2.28 GB, costs ~0.6 CPU-s more than without the cache, against ~1.1 with every
// record queued.
//
// But a buffered write blocks when the kernel throttles the writers of dirty pages
// (the disk is behind) or has to reclaim memory, and a decoder waiting for the disk
// is what the background writer is there to prevent. So the inline writes are timed:
// the cache switches to queueing, for every Writer at its next record and for the
// rest of the Cache's life, once a window of writes — inlineWindow bytes, or fewer
// whose waits came to inlineSpan — waited longer than writing them at inlineRate
// would take. A write waited if its thread slept during it (threadSleeps: a
// voluntary context switch); then its whole time counts. Writes that never sleep do
// not count however long they run (preempted by the decoders they share the cores
// with, or stalled while the host brings back memory it reclaimed): timed by the clock
// alone, one run of ten on the VM of docs/performance.md switched in that state, with
// the dirty pages nowhere near the kernel's throttling, where windows of writes into
// the page cache ran at 1.2–7.5 GB/s otherwise. A slow disk (10 MB/s, a network file
// system) holds the decoders about inlineSpan before the switch.

const (
	inlineWindow = 64 << 20
	inlineSpan   = 500 * time.Millisecond
	inlineRate   = 200e6 // bytes per second
)

// inlineWrites decides whether records are written where they are added.
type inlineWrites struct {
	off  bool        // Options.Background, Options.Direct: always queued
	slow atomic.Bool // the inline writes were slow: queued from now on

	// The thresholds: inlineWindow, inlineSpan, inlineRate, and the count of the
	// thread's sleeps, threadSleeps (set by Open; tests change them).
	window int64
	span   time.Duration
	rate   float64
	sleeps func() (int64, bool)

	mu    sync.Mutex
	bytes int64         // written inline in the current window
	took  time.Duration // and the time those writes waited (write)
}

// queueing tells whether a Writer's records go to the background writer.
func (b *bgWriter) queueing() bool {
	return b.max >= 0 && (b.inline.off || b.inline.slow.Load())
}

// write writes b and then rest to the entry's file on the caller's goroutine, timing
// the writes unless the cache has no background writer to hand them to. Only writes
// during which the thread slept count: one that ran all along (copying into memory
// the host had to bring back, or preempted by the decoders it shares the cores with)
// did not wait for the disk. The goroutine stays on its thread meanwhile, so that
// the thread's count of sleeps is its own.
func (w *Writer) write(b, rest []byte) error {
	if !w.sync {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	sleeps := w.c.bg.inline.sleeps
	slept, known := sleeps()
	start := time.Now()
	err := w.e.writeChunk(b, 0)
	if err == nil && len(rest) > 0 {
		err = w.e.writeChunk(rest, 0)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", w.e.f.Name(), err)
	}
	if w.sync {
		return nil
	}
	waited := time.Since(start)
	if now, ok := sleeps(); known && ok && now == slept {
		waited = 0
	}
	w.c.bg.inline.timed(w.c, int64(len(b)+len(rest)), waited)
	return nil
}

// timed counts an inline write of n bytes that waited d for the disk, and switches the
// cache to queueing when the writes are slow.
func (in *inlineWrites) timed(c *Cache, n int64, d time.Duration) {
	if in.slow.Load() {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.bytes += n
	in.took += d
	if in.bytes < in.window && in.took < in.span {
		return
	}
	if in.took.Seconds() > float64(in.bytes)/in.rate {
		in.slow.Store(true)
		c.st.slowWrites.Add(1)
		c.log.Info("frame cache: writes to the disk are slow; entries are written in the background from now on, and not kept while it is behind",
			"dir", c.dir, "bytes", in.bytes, "seconds", in.took.Seconds())
	}
	in.bytes, in.took = 0, 0
}
