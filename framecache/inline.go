package framecache

import (
	"fmt"
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
// 2.28 GB, costs ~0.7 CPU-s more than without the cache, against ~1.15 with every
// record queued.
//
// But a buffered write blocks when the kernel throttles the writers of dirty pages
// (the disk is behind) or has to reclaim memory, and a decoder waiting for the disk
// is what the background writer is there to prevent. So the inline writes are timed:
// the cache switches to queueing, for every Writer at its next record and for the
// rest of the Cache's life, once a window of inlineWindow bytes took longer than
// writing them at inlineRate, or one write took longer than inlineMaxWrite. Writes
// into the page cache ran at 0.5–6 GB/s on that VM (the lower rate into memory its
// host had reclaimed), so only a throttled or starved write is that slow; a decoder
// descheduled during a write adds a few ms to a window of hundreds.

const (
	inlineWindow   = 64 << 20
	inlineRate     = 200e6 // bytes per second
	inlineMaxWrite = 100 * time.Millisecond
)

// inlineWrites decides whether records are written where they are added.
type inlineWrites struct {
	off  bool        // Options.Background, Options.Direct: always queued
	slow atomic.Bool // the inline writes were slow: queued from now on

	// The thresholds: inlineWindow, inlineRate, inlineMaxWrite (set by Open; tests
	// change them).
	window   int64
	rate     float64
	maxWrite time.Duration

	mu    sync.Mutex
	bytes int64         // written inline in the current window
	took  time.Duration // and the time that took
}

// queueing tells whether a Writer's records go to the background writer.
func (b *bgWriter) queueing() bool {
	return b.max >= 0 && (b.inline.off || b.inline.slow.Load())
}

// write writes b and then rest to the entry's file on the caller's goroutine, timing
// the writes unless the cache has no background writer to hand them to.
func (w *Writer) write(b, rest []byte) error {
	start := time.Now()
	err := w.e.writeChunk(b, 0)
	if err == nil && len(rest) > 0 {
		err = w.e.writeChunk(rest, 0)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", w.e.f.Name(), err)
	}
	if !w.sync {
		w.c.bg.inline.timed(w.c, int64(len(b)+len(rest)), time.Since(start))
	}
	return nil
}

// timed counts an inline write of n bytes that took d, and switches the cache to
// queueing when the writes are slow.
func (in *inlineWrites) timed(c *Cache, n int64, d time.Duration) {
	if in.slow.Load() {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.bytes += n
	in.took += d
	if d <= in.maxWrite && in.bytes < in.window {
		return
	}
	if d > in.maxWrite || in.took.Seconds() > float64(in.bytes)/in.rate {
		in.slow.Store(true)
		c.st.slowWrites.Add(1)
		c.log.Info("frame cache: writes to the disk are slow; entries are written in the background from now on, and not kept while it is behind",
			"dir", c.dir, "bytes", in.bytes, "seconds", in.took.Seconds(), "last_write_seconds", d.Seconds())
	}
	in.bytes, in.took = 0, 0
}
