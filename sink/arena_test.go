package sink

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/collate"
)

// TestRingPlace walks a Ring through placements, releases and the inline
// rule: a region never overlaps one the client has not released, never
// wraps, starts aligned, and a full ring goes inline only once the client
// has read every batch sent.
func TestRingPlace(t *testing.T) {
	const size = 1000 * ringAlign
	type step struct {
		op        string // "place", "sent", "update"
		n         int    // place: bytes
		a, b      uint64 // update: batches, released
		pos       uint64 // place: want position
		ok        bool   // place: want placed
		wantError string // update: error substring
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"consecutive, aligned", []step{
			{op: "place", n: 100, pos: 0, ok: true},
			{op: "place", n: 100, pos: 128, ok: true},
			{op: "place", n: 64, pos: 256, ok: true},
		}},
		{"too large for the ring", []step{
			{op: "place", n: size + 1, ok: false},
			{op: "place", n: size, pos: 0, ok: true},
		}},
		{"full, client read everything: inline", []step{
			{op: "place", n: 600 * ringAlign, pos: 0, ok: true},
			{op: "sent"},
			{op: "update", a: 1, b: 0},
			{op: "place", n: 600 * ringAlign, ok: false},
		}},
		{"lowest free offset first", []step{
			{op: "place", n: 600 * ringAlign, pos: 0, ok: true},
			{op: "place", n: 300 * ringAlign, pos: 600 * ringAlign, ok: true},
			{op: "sent"},
			{op: "update", a: 1, b: 600 * ringAlign},
			// Offset 0 is free again: the next lap's position for it.
			{op: "place", n: 200 * ringAlign, pos: size, ok: true},
			// The gap between the two live regions.
			{op: "place", n: 400 * ringAlign, pos: size + 200*ringAlign, ok: true},
			// 100 slots left at the end: too few.
			{op: "place", n: 200 * ringAlign, ok: false},
			{op: "sent"},
			{op: "update", a: 2, b: size + 200*ringAlign},
			// Only [200, 600) is live; 600 slots fit nowhere.
			{op: "place", n: 600 * ringAlign, ok: false},
			{op: "update", a: 2, b: size + 600*ringAlign},
			{op: "place", n: 600 * ringAlign, pos: 2 * size, ok: true},
		}},
		{"released past the last region", []step{
			{op: "place", n: 100, pos: 0, ok: true},
			{op: "update", a: 0, b: 101, wantError: "past the last region"},
		}},
		{"released goes back", []step{
			{op: "place", n: 100, pos: 0, ok: true},
			{op: "update", a: 0, b: 100},
			{op: "update", a: 0, b: 50, wantError: "went back"},
		}},
		{"batches go back", []step{
			{op: "sent"}, {op: "sent"},
			{op: "update", a: 2, b: 0},
			{op: "update", a: 1, b: 0, wantError: "went back"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := make([]byte, size)
			r := NewRing(mem, nil, time.Second)
			for i, s := range tc.steps {
				switch s.op {
				case "place":
					data := bytes.Repeat([]byte{byte(i + 1)}, s.n)
					pos, ok, err := r.Place(s.n, copyParts(data[:s.n/2], data[s.n/2:]))
					if err != nil || ok != s.ok || (ok && pos != s.pos) {
						t.Fatalf("step %d: Place(%d) = %d, %v, %v; want %d, %v", i, s.n, pos, ok, err, s.pos, s.ok)
					}
					if ok {
						off := pos % size
						if pos%ringAlign != 0 || off+uint64(s.n) > size || !bytes.Equal(mem[off:off+uint64(s.n)], data) {
							t.Fatalf("step %d: region at %d (offset %d) misplaced", i, pos, off)
						}
					}
				case "sent":
					if err := r.Sent(false); err != nil {
						t.Fatal(err)
					}
				case "update":
					err := r.Update(s.a, s.b)
					if s.wantError == "" && err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if s.wantError != "" {
						if err == nil || !strings.Contains(err.Error(), s.wantError) {
							t.Fatalf("step %d: Update error %v, want %q", i, err, s.wantError)
						}
						if _, _, err := r.Place(1, copyParts([]byte{1})); err == nil {
							t.Fatalf("step %d: Place after a bad update succeeded", i)
						}
						return
					}
				}
			}
		})
	}
}

// TestRingWaits: a full ring whose client has batches to read flushes,
// waits for a release and then places; a client that releases nothing
// within the timeout, or fails, ends the wait with an error.
func TestRingWaits(t *testing.T) {
	const size = 64 * ringAlign
	t.Run("release wakes", func(t *testing.T) {
		flushes := 0
		r := NewRing(make([]byte, size), func() error { flushes++; return nil }, 10*time.Second)
		if _, ok, _ := r.Place(size, copyParts(make([]byte, size))); !ok {
			t.Fatal("first region not placed")
		}
		if err := r.Sent(true); err != nil || flushes != 1 {
			t.Fatalf("Sent(true): %v, %d flushes", err, flushes)
		}
		go func() {
			time.Sleep(20 * time.Millisecond)
			r.Update(1, size)
		}()
		pos, ok, err := r.Place(10, copyParts(make([]byte, 10)))
		if err != nil || !ok || pos != size {
			t.Fatalf("Place after the release: %d, %v, %v", pos, ok, err)
		}
		if flushes != 2 {
			t.Fatalf("%d flushes, want 2 (Place flushes before waiting)", flushes)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		r := NewRing(make([]byte, size), nil, 30*time.Millisecond)
		r.Place(size, copyParts(make([]byte, size)))
		r.Sent(true)
		if _, _, err := r.Place(1, copyParts([]byte{1})); err == nil || !strings.Contains(err.Error(), "released nothing") {
			t.Fatalf("Place on a silent client: %v", err)
		}
	})
	t.Run("fail", func(t *testing.T) {
		r := NewRing(make([]byte, size), nil, 0)
		r.Place(size, copyParts(make([]byte, size)))
		r.Sent(true)
		gone := errors.New("client went away")
		go func() {
			time.Sleep(20 * time.Millisecond)
			r.Fail(gone)
		}()
		if _, _, err := r.Place(1, copyParts([]byte{1})); !errors.Is(err, gone) {
			t.Fatalf("Place after Fail: %v", err)
		}
	})
}

// TestReadRelease reads client messages and refuses anything else.
func TestReadRelease(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        []byte
		batches   uint64
		released  uint64
		wantError string
		wantEOF   bool
	}{
		{"small", AppendRelease(nil, 3, 4096), 3, 4096, "", false},
		{"large", AppendRelease(nil, 1<<40, 1<<63+5), 1 << 40, 1<<63 + 5, "", false},
		{"end", nil, 0, 0, "", true},
		{"a map", mpMapHeader(nil, 0), 0, 0, "want [batches, released]", false},
		{"three", mpInt(mpInt(mpInt(mpArrayHeader(nil, 3), 1), 2), 3), 0, 0, "want [batches, released]", false},
		{"negative", mpInt(mpInt(mpArrayHeader(nil, 2), -1), 2), 0, 0, "want uints", false},
		{"a string", mpStr(mpInt(mpArrayHeader(nil, 2), 1), "x"), 0, 0, "want uints", false},
		{"truncated", AppendRelease(nil, 3, 1<<40)[:5], 0, 0, "truncated", false},
		{"a huge bin", mpBinHeader(nil, 1<<30), 0, 0, "shm client message", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, r, err := ReadRelease(bytes.NewReader(tc.in))
			switch {
			case tc.wantEOF:
				if err != io.EOF {
					t.Fatalf("err %v, want io.EOF", err)
				}
			case tc.wantError != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("got %d, %d, %v; want an error containing %q", b, r, err, tc.wantError)
				}
			case err != nil || b != tc.batches || r != tc.released:
				t.Fatalf("got %d, %d, %v; want %d, %d", b, r, err, tc.batches, tc.released)
			}
		})
	}
	// Messages follow each other on one reader.
	in := bytes.NewReader(append(AppendRelease(nil, 1, 64), AppendRelease(nil, 2, 128)...))
	for want := uint64(1); want <= 2; want++ {
		if b, _, err := ReadRelease(in); err != nil || b != want {
			t.Fatalf("message %d: %d, %v", want, b, err)
		}
	}
	if _, _, err := ReadRelease(in); err != io.EOF {
		t.Fatalf("after the messages: %v, want io.EOF", err)
	}
}

func FuzzReadRelease(f *testing.F) {
	f.Add(AppendRelease(nil, 3, 4096))
	f.Add(AppendRelease(nil, 1<<40, 1<<63))
	f.Add([]byte{0x92, 0xcf})
	f.Add(mpBinHeader(nil, 1<<30))
	f.Fuzz(func(t *testing.T, in []byte) {
		b, r, err := ReadRelease(bytes.NewReader(in))
		if err != nil {
			return
		}
		if got := AppendRelease(nil, b, r); !bytes.HasPrefix(in, got) {
			// Accepted input re-encodes to a message the reader accepts
			// with the same values (encodings may differ in width).
			b2, r2, err := ReadRelease(bytes.NewReader(got))
			if err != nil || b2 != b || r2 != r {
				t.Fatalf("round trip of %x: %d, %d, %v", in, b2, r2, err)
			}
		}
	})
}

// TestEncodeArena: a batch written through an Arena decodes (with the
// arena) to the same columns as the plain message, its camera columns as
// shm references; with no room the message is byte-identical to the plain
// one.
func TestEncodeArena(t *testing.T) {
	const side = 148 // 65,712 bytes a frame: borrowed (collate.BorrowMin)
	fb := 3 * side * side
	feats := append(append([]collate.Feature(nil), fixtureFeatures...),
		collate.Feature{Name: "observation.images.front", DType: "|u1", Shape: []int{3, side, side}},
		collate.Feature{Name: "observation.images.wrist", DType: "|u1", Shape: []int{3, side, side}})
	bt := func() *collate.Batch {
		b, err := collate.NewBatcher(collate.Config{BatchSize: 3, Features: feats, Strings: []string{"dataset"}})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 3*fb)
		for k := range buf {
			buf[k] = byte(k * 13 / 7)
		}
		own := &nopOwner{}
		var out *collate.Batch
		for i := 0; i < 3; i++ {
			f := fixtureFrame(i)
			f.Features = append(f.Features, buf[i*fb:(i+1)*fb], buf[(2-i)*fb:(3-i)*fb])
			f.Owner = own
			f.Borrow = make([]bool, len(f.Features))
			f.Borrow[len(f.Borrow)-2] = true // front borrowed, wrist copied
			if o, err := b.Add(f); err != nil {
				t.Fatal(err)
			} else if o != nil {
				out = o
			}
		}
		return out
	}()
	meta := BatchMeta{Seq: 7, Epoch: 2}
	plain, err := AppendBatch(nil, bt, meta)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(msg, arena []byte) *DecodedBatch {
		t.Helper()
		d := NewDecoder(bytes.NewReader(msg))
		d.Arena = arena
		m, err := d.Next()
		if err != nil || m.Batch == nil {
			t.Fatalf("decode: %v", err)
		}
		return m.Batch
	}
	want := decode(plain, nil)
	for _, tc := range []struct {
		name   string
		size   int
		placed int
	}{
		{"room for both", 1 << 20, 2},
		{"room for one", 3*fb + 4096, 1},
		{"no room", 4096, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := make([]byte, tc.size)
			ring := NewRing(mem, nil, time.Second)
			var out bytes.Buffer
			s := NewMsgpack(&out)
			s.Arena = ring
			if err := s.Header(Header{SHM: true}); err != nil {
				t.Fatal(err)
			}
			hdr := out.Len()
			if err := s.Batch(bt, meta); err != nil {
				t.Fatal(err)
			}
			msg := out.Bytes()[hdr:]
			if tc.placed == 0 && !bytes.Equal(msg, plain) {
				t.Fatal("nothing placed, but the message differs from the plain one")
			}
			if s.BytesWritten() != int64(out.Len()) {
				t.Fatalf("BytesWritten %d, wrote %d", s.BytesWritten(), out.Len())
			}
			got := decode(msg, mem)
			placed := 0
			for i, f := range got.Columns {
				a, ok := f.Value.(*Array)
				if !ok {
					continue
				}
				w := want.Columns[i].Value.(*Array)
				if f.Name != want.Columns[i].Name || !bytes.Equal(a.Data, w.Data) || a.DType != w.DType || len(a.Shape) != len(w.Shape) {
					t.Fatalf("column %s differs", f.Name)
				}
				if a.SHMBytes > 0 {
					placed++
				}
			}
			if placed != tc.placed {
				t.Fatalf("%d columns through the arena, want %d", placed, tc.placed)
			}
			h, err := NewDecoder(bytes.NewReader(out.Bytes()[:hdr])).Next()
			if err != nil || h.Header == nil || !h.Header.SHM {
				t.Fatalf("header: %+v, %v; want shm", h, err)
			}
			if _, err := NewDecoder(bytes.NewReader(msg)).Next(); tc.placed > 0 && (err == nil || !strings.Contains(err.Error(), "no arena")) {
				t.Fatalf("decoding without the arena: %v, want an error", err)
			}
		})
	}
	t.Run("an arena error cuts no message", func(t *testing.T) {
		var out bytes.Buffer
		s := NewMsgpack(&out)
		s.Arena = &failingArena{after: 1}
		if err := s.Header(Header{SHM: true}); err != nil {
			t.Fatal(err)
		}
		hdr := out.Len()
		if err := s.Batch(bt, meta); err == nil || !strings.Contains(err.Error(), "client went away") {
			t.Fatalf("Batch: %v, want the arena's error", err)
		}
		if out.Len() != hdr {
			t.Fatalf("%d bytes of the failed batch written", out.Len()-hdr)
		}
		if err := s.Fail(errors.New("boom")); err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(bytes.NewReader(out.Bytes())); err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("the stream after the failed batch: %v, want the in-band error", err)
		}
	})
}

// failingArena places its first after payloads, then fails.
type failingArena struct{ after, n int }

func (a *failingArena) Place(n int, fill func([]byte)) (uint64, bool, error) {
	if a.n++; a.n > a.after {
		return 0, false, errors.New("client went away")
	}
	return uint64(a.n) * 1 << 20, true, nil
}

func (a *failingArena) Sent(bool) error { return nil }

// TestRingNeverOverwritesLive places and releases regions at random and
// checks after every step that each region the client has not released
// still holds its bytes, that positions grow and regions never wrap, and
// that the memory touched stays within what is live plus one region.
func TestRingNeverOverwritesLive(t *testing.T) {
	const size = 256 * ringAlign
	rng := rand.New(rand.NewPCG(7, 11))
	mem := make([]byte, size)
	r := NewRing(mem, nil, time.Second)
	type placed struct {
		pos  uint64
		data []byte
	}
	var live []placed
	var last uint64
	for step := 0; step < 20000; step++ {
		if len(live) > 0 && rng.IntN(3) == 0 {
			k := 1 + rng.IntN(len(live)) // release a prefix of k regions
			end := live[k-1].pos + uint64(len(live[k-1].data))
			r.Sent(false)
			if err := r.Update(uint64(step), end); err != nil {
				t.Fatal(err)
			}
			live = live[k:]
		} else {
			n := 1 + rng.IntN(size/3)
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			pos, ok, err := r.Place(n, copyParts(data))
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				off := pos % size
				if pos < last || pos%ringAlign != 0 || off+uint64(n) > size {
					t.Fatalf("step %d: region %d+%d after %d", step, pos, n, last)
				}
				last = pos + uint64(n)
				live = append(live, placed{pos, data})
			}
		}
		for _, p := range live {
			off := p.pos % size
			if !bytes.Equal(mem[off:off+uint64(len(p.data))], p.data) {
				t.Fatalf("step %d: live region at %d overwritten", step, p.pos)
			}
		}
	}
}

// TestRingCompact: a client that keeps its last two regions keeps the
// ring within the arena's first three regions' bytes.
func TestRingCompact(t *testing.T) {
	const size, c = 1 << 20, 60000
	r := NewRing(make([]byte, size), nil, time.Second)
	var ends []uint64
	top := uint64(0)
	for i := 0; i < 1000; i++ {
		pos, ok, err := r.Place(c, copyParts(make([]byte, c)))
		if err != nil || !ok {
			t.Fatalf("region %d: %v, %v", i, ok, err)
		}
		top = max(top, pos%size+c)
		ends = append(ends, pos+c)
		r.Sent(true)
		if len(ends) > 2 {
			if err := r.Update(uint64(i+1), ends[len(ends)-3]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := uint64(3 * 60032); top > want {
		t.Fatalf("regions reached offset %d, want at most %d (three regions)", top, want)
	}
}

// FuzzDecoderArena decodes arbitrary streams with an arena: shm arrays
// outside it are errors, never a panic, and resolved ones have the bytes
// the reference names.
func FuzzDecoderArena(f *testing.F) {
	arena := make([]byte, 8192)
	for i := range arena {
		arena[i] = byte(i * 7)
	}
	shm := func(pos, n uint64) []byte {
		b := mpMapHeader(nil, 3)
		b = mpStr(b, "type")
		b = mpStr(b, TypeBatch)
		b = mpStr(b, "size")
		b = mpInt(b, 1)
		b = mpStr(b, "columns")
		b = mpMapHeader(b, 1)
		b = mpStr(b, "observation.images.a")
		b = mpMapHeader(b, 5)
		b = mpBin(b, []byte("nd"))
		b = mpBool(b, true)
		b = mpBin(b, []byte("type"))
		b = mpStr(b, "|u1")
		b = mpBin(b, []byte("kind"))
		b = mpBin(b, nil)
		b = mpBin(b, []byte("shape"))
		b = mpArrayHeader(b, 1)
		b = mpInt(b, int64(n))
		b = mpBin(b, []byte("shm"))
		b = mpArrayHeader(b, 2)
		b = mpUint(b, pos)
		return mpUint(b, n)
	}
	f.Add(shm(0, 100))
	f.Add(shm(8192+64, 128))
	f.Add(shm(8000, 500))
	f.Add(shm(1<<63, 1<<63))
	if m, err := NewDecoder(bytes.NewReader(shm(8000, 100))).Next(); err == nil || m != nil {
		f.Fatalf("a seed decoded without the arena: %v", err)
	}
	d := NewDecoder(bytes.NewReader(shm(8192+64, 128)))
	d.Arena = arena
	if m, err := d.Next(); err != nil || !bytes.Equal(m.Batch.Columns[0].Value.(*Array).Data, arena[64:192]) {
		f.Fatalf("a seed with the arena: %v", err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(bytes.NewReader(b))
		d.Arena = arena
		for i := 0; i < 100; i++ {
			m, err := d.Next()
			if err != nil {
				return
			}
			if m.Batch == nil {
				continue
			}
			for _, c := range m.Batch.Columns {
				a, ok := c.Value.(*Array)
				if !ok || a.SHMBytes == 0 {
					continue
				}
				off := a.SHMPos % uint64(len(arena))
				if !bytes.Equal(a.Data, arena[off:off+a.SHMBytes]) {
					t.Fatalf("shm array [%d, %d]: wrong bytes", a.SHMPos, a.SHMBytes)
				}
			}
		}
	})
}

// copyParts is the fill of Place for a payload of parts: their bytes in
// order.
func copyParts(parts ...[]byte) func([]byte) {
	return func(dst []byte) {
		for _, p := range parts {
			dst = dst[copy(dst, p):]
		}
	}
}
