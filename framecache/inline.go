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
// 2.28 GB, costs ~0.6 CPU-s more than without the cache, against ~1.1 with every
// record queued.
//
// But a buffered write blocks when the kernel throttles the writers of dirty pages
// (the disk is behind) or has to reclaim memory, and a decoder waiting for the disk
// is what the background writer is there to prevent. So the inline writes are timed:
// the cache switches to queueing, for every Writer at its next record and for the
// rest of the Cache's life, once a window of writes — inlineWindow bytes, or fewer
// that took inlineSpan — ran slower than inlineRate. Windows of writes into the page
// cache ran at 1.2–7.5 GB/s on that VM, single writes of a frame took 0.1–5 ms and
// once in a while 40–100 ms (a decoder descheduled, the host busy): only a throttled
// or starved writer is that slow over a window, and a slow disk (10 MB/s, a network
// file system) holds the decoders about inlineSpan before the switch.

const (
	inlineWindow = 64 << 20
	inlineSpan   = 500 * time.Millisecond
	inlineRate   = 200e6 // bytes per second
)

// inlineWrites decides whether records are written where they are added.
type inlineWrites struct {
	off  bool        // Options.Background, Options.Direct: always queued
	slow atomic.Bool // the inline writes were slow: queued from now on

	// The thresholds: inlineWindow, inlineSpan, inlineRate (set by Open; tests
	// change them).
	window int64
	span   time.Duration
	rate   float64

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
