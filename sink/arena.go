package sink

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Arena takes a batch's large payloads (camera frames, see LargeArray) out
// of band: serve copies them into the shared memory its client maps, and
// the batch message carries their position instead of their bytes
// (docs/wire-format.md "Shared memory"). Msgpack calls it in message order.
type Arena interface {
	// Place reserves n bytes in the arena, has fill write them (fill
	// writes every byte of dst, len n: a payload's parts copied or
	// converted straight into the arena) and returns their position; ok
	// is false, and fill not called, when the arena has no room for them
	// now: the payload is written inline instead. An error ends the
	// stream.
	Place(n int, fill func(dst []byte)) (pos uint64, ok bool, err error)
	// Sent is called after each batch message has been written; placed
	// says whether it placed a payload.
	Sent(placed bool) error
}

// ringRegion is a placed region: its position and length.
type ringRegion struct{ pos, n uint64 }

// ringAlign is the alignment of a region's position in a Ring (and so of
// its offset: arena sizes are multiples of SHMAlign).
const ringAlign = 64

// Ring is the Arena of one shared-memory client: regions are placed at
// growing positions (a region's bytes are at offset pos mod len(mem) and
// never wrap), each at the lowest offset that no region in use overlaps,
// and a region's memory is reused only once the client has released it
// (Update). Lowest offset first keeps the regions in use within the
// arena's first bytes, so the memory touched is what the client holds,
// not the whole arena. When a payload does not fit,
// Place waits for the client to release regions as long as the client
// still has batches to read; once it has read every batch sent (the
// caller holds the arrays), the payload goes inline, so a client holding
// every array never deadlocks the stream.
type Ring struct {
	mem     []byte
	flush   func() error
	timeout time.Duration

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced by Update and Fail
	head     uint64        // end of the last placed region
	released uint64        // the client released every region ending at or before it
	live     []ringRegion  // placed and not released, in position order
	gaps     []ringRegion  // scratch for Place: the live regions by offset
	sent     uint64        // batch messages written
	read     uint64        // batch messages the client has read
	err      error
}

// NewRing returns the Ring over mem (the mapped arena, its length a
// multiple of SHMAlign). flush, when set, pushes what was written to the
// client (Place calls it before waiting, Sent after a batch that placed a
// payload); timeout, when positive, bounds a wait for the client.
func NewRing(mem []byte, flush func() error, timeout time.Duration) *Ring {
	return &Ring{mem: mem, flush: flush, timeout: timeout, changed: make(chan struct{})}
}

// Place implements Arena.
func (r *Ring) Place(n int, fill func(dst []byte)) (uint64, bool, error) {
	size := uint64(len(r.mem))
	if n <= 0 || uint64(n) > size {
		return 0, false, nil
	}
	flushed := false
	for {
		r.mu.Lock()
		if r.err != nil {
			err := r.err
			r.mu.Unlock()
			return 0, false, err
		}
		if off, ok := r.fit(uint64(n)); ok {
			pos := r.head - r.head%size + off
			if pos < r.head {
				pos += size
			}
			r.head = pos + uint64(n)
			r.live = append(r.live, ringRegion{pos, uint64(n)})
			r.mu.Unlock()
			fill(r.mem[off:][:n])
			return pos, true, nil
		}
		if r.read >= r.sent {
			r.mu.Unlock()
			return 0, false, nil // the client holds the arrays: inline
		}
		ch := r.changed
		r.mu.Unlock()
		if !flushed && r.flush != nil {
			// The client can only release after reading what is sent.
			if err := r.flush(); err != nil {
				return 0, false, err
			}
			flushed = true
		}
		if err := r.wait(ch); err != nil {
			return 0, false, err
		}
	}
}

// fit returns the lowest aligned offset where n bytes overlap no live
// region (r.mu held).
func (r *Ring) fit(n uint64) (uint64, bool) {
	size := uint64(len(r.mem))
	r.gaps = r.gaps[:0]
	for _, g := range r.live {
		r.gaps = append(r.gaps, ringRegion{g.pos % size, g.n})
	}
	slices.SortFunc(r.gaps, func(a, b ringRegion) int { return cmp.Compare(a.pos, b.pos) })
	off := uint64(0)
	for _, g := range r.gaps {
		if off+n <= g.pos {
			break
		}
		off = max(off, (g.pos+g.n+ringAlign-1)&^(ringAlign-1))
	}
	return off, off+n <= size
}

// wait waits for ch to close (an Update or Fail) within the timeout.
func (r *Ring) wait(ch chan struct{}) error {
	if r.timeout <= 0 {
		<-ch
		return nil
	}
	t := time.NewTimer(r.timeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		err := fmt.Errorf("sink: shm client released nothing for %v", r.timeout)
		r.Fail(err)
		return err
	}
}

// Sent implements Arena.
func (r *Ring) Sent(placed bool) error {
	r.mu.Lock()
	r.sent++
	r.mu.Unlock()
	if placed && r.flush != nil {
		return r.flush() // the client reads it (and releases) at once
	}
	return nil
}

// Update records a client message (ReadRelease): it has read batches
// batch messages and released every region ending at or before released.
// Neither may decrease, and released cannot pass the last placed region.
func (r *Ring) Update(batches, released uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	switch {
	case r.err != nil:
		return r.err
	case released < r.released || batches < r.read:
		err = fmt.Errorf("sink: shm client message went back (batches %d after %d, released %d after %d)", batches, r.read, released, r.released)
	case released > r.head:
		err = fmt.Errorf("sink: shm client released up to %d, past the last region placed (%d)", released, r.head)
	}
	if err != nil {
		r.failLocked(err)
		return err
	}
	r.read, r.released = batches, released
	k := 0
	for k < len(r.live) && r.live[k].pos+r.live[k].n <= released {
		k++
	}
	r.live = append(r.live[:0], r.live[k:]...)
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

// Fail ends the ring: waiting and later Place calls return err (the
// client went away, or sent something else than release messages).
func (r *Ring) Fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.failLocked(err)
	}
}

func (r *Ring) failLocked(err error) {
	r.err = err
	close(r.changed)
	r.changed = make(chan struct{})
}

// maxReleaseBytes bounds one client message: an array of two uint64s
// takes at most 19 bytes.
const maxReleaseBytes = 32

// ReadRelease reads one client message of a shared-memory connection from
// r: the msgpack array [batches, released] of two uints. It returns io.EOF
// when r ends between messages.
func ReadRelease(r io.Reader) (batches, released uint64, err error) {
	var first [1]byte
	if _, err := io.ReadFull(r, first[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, 0, io.EOF
		}
		return 0, 0, fmt.Errorf("sink: reading shm client message: %w", err)
	}
	d := &Decoder{r: io.MultiReader(bytes.NewReader(first[:]), io.LimitReader(r, maxReleaseBytes-1))}
	v, err := d.value(0)
	if err != nil {
		return 0, 0, fmt.Errorf("sink: reading shm client message: %w", err)
	}
	u, pair, ok := uintPair(v)
	switch {
	case !pair:
		return 0, 0, fmt.Errorf("sink: shm client message is %v, want [batches, released]", v)
	case !ok:
		return 0, 0, fmt.Errorf("sink: shm client message is %v, want uints", v)
	}
	return u[0], u[1], nil
}

// AppendRelease appends the client message [batches, released] (what
// ReadRelease reads).
func AppendRelease(dst []byte, batches, released uint64) []byte {
	b := mpArrayHeader(dst, 2)
	b = mpUint(b, batches)
	return mpUint(b, released)
}
