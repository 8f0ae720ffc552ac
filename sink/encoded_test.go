package sink

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/collate"
)

// cameraBatches builds batches with a uint8 camera column of side×side
// RGB frames next to the fixture's features (frame i's pixels derive from
// i, so batches differ).
func cameraBatches(t testing.TB, side, bs, n int) (*collate.Batcher, []*collate.Batch) {
	t.Helper()
	feats := append(append([]collate.Feature(nil), fixtureFeatures...),
		collate.Feature{Name: "observation.images.front", DType: "|u1", Shape: []int{3, side, side}})
	b, err := collate.NewBatcher(collate.Config{BatchSize: bs, Features: feats, Strings: []string{"dataset"}})
	if err != nil {
		t.Fatal(err)
	}
	var out []*collate.Batch
	for i := range n {
		f := fixtureFrame(i)
		pix := make([]byte, 3*side*side)
		for k := range pix {
			pix[k] = byte(i*31 + k)
		}
		f.Features = append(f.Features, pix)
		bt, err := b.Add(f)
		if err != nil {
			t.Fatal(err)
		}
		if bt != nil {
			out = append(out, bt)
		}
	}
	if bt, err := b.Flush(); err != nil {
		t.Fatal(err)
	} else if bt != nil {
		out = append(out, bt)
	}
	return b, out
}

// TestEncodeBatchMatchesAppendBatch: EncodeBatch's message (flattened, or
// written piece by piece) is byte-identical to AppendBatch's, whether the
// camera column is below, at or above LargeArray per batch, and a reused
// Encoded leaves nothing of the previous message behind.
func TestEncodeBatchMatchesAppendBatch(t *testing.T) {
	var e Encoded // reused across cases on purpose
	for _, tc := range []struct{ side, bs int }{
		{2, 4},     // tiny column: copied
		{16, 4},    // 3 KiB per batch: copied
		{128, 1},   // 48 KiB: copied
		{128, 2},   // 96 KiB: referenced
		{148, 1},   // 65,712 bytes, just above LargeArray
		{96, 3},    // 82,944 bytes
		{256, 5},   // 960 KiB, like a few camera frames
		{2, 1000},  // many samples, small column
		{128, 100}, // 4.7 MiB
	} {
		t.Run(fmt.Sprintf("%dx%d_bs%d", tc.side, tc.side, tc.bs), func(t *testing.T) {
			_, batches := cameraBatches(t, tc.side, tc.bs, 2*tc.bs+1)
			for k, bt := range batches {
				meta := BatchMeta{Seq: int64(k), Epoch: 1, Resume: fmt.Sprint("tok", k)}
				want, err := AppendBatch(nil, bt, meta)
				if err != nil {
					t.Fatal(err)
				}
				if err := EncodeBatch(&e, bt, meta); err != nil {
					t.Fatal(err)
				}
				if e.Len() != len(want) {
					t.Fatalf("batch %d: Len %d, want %d", k, e.Len(), len(want))
				}
				if got := e.AppendTo([]byte("x")); !bytes.Equal(got[1:], want) || got[0] != 'x' {
					t.Fatalf("batch %d: AppendTo differs from AppendBatch", k)
				}
				var w bytes.Buffer
				n, err := e.WriteTo(&w)
				if err != nil || n != int64(len(want)) || !bytes.Equal(w.Bytes(), want) {
					t.Fatalf("batch %d: WriteTo wrote %d bytes (err %v), differs from AppendBatch", k, n, err)
				}
				referenced := len(bt.Columns[len(bt.Columns)-1].Data) >= LargeArray
				if got := len(e.parts) > 0; got != referenced {
					t.Fatalf("batch %d: payload referenced %v, want %v", k, got, referenced)
				}
			}
		})
	}
}

// TestEncoderCameraColumns: batches with camera columns give the same
// stream through Msgpack.Batch and through the parallel Encoder (which
// writes referenced payloads with WriteEncodedParts) as AppendBatch +
// WriteEncoded, and write errors in the middle of a payload surface.
func TestEncoderCameraColumns(t *testing.T) {
	b, batches := cameraBatches(t, 160, 8, 50)
	h := fixtureHeader(b)
	var want bytes.Buffer
	ref := NewMsgpack(&want)
	if err := ref.Header(h); err != nil {
		t.Fatal(err)
	}
	for k, bt := range batches {
		p, err := AppendBatch(nil, bt, BatchMeta{Seq: int64(k)})
		if err != nil {
			t.Fatal(err)
		}
		if err := ref.WriteEncoded(p); err != nil {
			t.Fatal(err)
		}
	}
	ref.End(End{})
	for _, workers := range []int{0, 1, 3, -2} { // -2: 2 workers, a sink without WriteEncodedParts
		var got bytes.Buffer
		s := NewMsgpack(&got)
		if err := s.Header(h); err != nil {
			t.Fatal(err)
		}
		var enc *Encoder
		if workers > 0 {
			enc = NewEncoder(s, workers, nil)
		} else if workers < 0 {
			enc = NewEncoder(flatOnly{s}, -workers, nil)
		}
		for k, bt := range batches {
			meta := BatchMeta{Seq: int64(k)}
			var err error
			if enc != nil {
				err = enc.Batch(bt, meta)
			} else {
				err = s.Batch(bt, meta)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if enc != nil {
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
		}
		s.End(End{})
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("workers %d: stream differs from AppendBatch + WriteEncoded", workers)
		}
		if s.BytesWritten() != int64(want.Len()) {
			t.Fatalf("workers %d: BytesWritten %d, want %d", workers, s.BytesWritten(), want.Len())
		}
	}
	// A writer failing inside the first camera payload.
	s := NewMsgpack(&failWriter{n: 3})
	if err := s.Header(h); err != nil {
		t.Fatal(err)
	}
	if err := s.Batch(batches[0], BatchMeta{}); err == nil {
		t.Fatal("a failing writer: Batch returned no error")
	}
}

// flatOnly hides Msgpack's WriteEncodedParts: the Encoder then flattens
// each message for WriteEncoded.
type flatOnly struct{ m *Msgpack }

func (f flatOnly) Header(h Header) error                         { return f.m.Header(h) }
func (f flatOnly) Batch(bt *collate.Batch, meta BatchMeta) error { return f.m.Batch(bt, meta) }
func (f flatOnly) End(e End) error                               { return f.m.End(e) }
func (f flatOnly) Fail(err error) error                          { return f.m.Fail(err) }
func (f flatOnly) WriteEncoded(p []byte) error                   { return f.m.WriteEncoded(p) }

// BenchmarkCameraBatch writes batches of 8 samples with a 480×640 camera
// column (7.4 MB per batch) to a discarding writer: "append" copies the
// frames into the message (AppendBatch + WriteEncoded), "parts" writes
// them from the batch (EncodeBatch, what Msgpack.Batch and the Encoder
// do). ns/op is per batch.
func BenchmarkCameraBatch(b *testing.B) {
	const bs = 8
	feats := []collate.Feature{{Name: "observation.images.front", DType: "|u1", Shape: []int{3, 480, 640}}}
	bt, err := collate.NewBatcher(collate.Config{BatchSize: bs, Features: feats})
	if err != nil {
		b.Fatal(err)
	}
	var batch *collate.Batch
	pix := make([]byte, 3*480*640)
	for i := 0; batch == nil; i++ {
		if batch, err = bt.Add(&collate.Frame{Index: int64(i), Features: [][]byte{pix}}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("append", func(b *testing.B) {
		var buf []byte
		b.SetBytes(int64(bs * len(pix)))
		for b.Loop() {
			if buf, err = AppendBatch(buf[:0], batch, BatchMeta{}); err != nil {
				b.Fatal(err)
			}
			if _, err := (discardWriter{}).Write(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parts", func(b *testing.B) {
		var e Encoded
		b.SetBytes(int64(bs * len(pix)))
		for b.Loop() {
			if err := EncodeBatch(&e, batch, BatchMeta{}); err != nil {
				b.Fatal(err)
			}
			if _, err := e.WriteTo(discardWriter{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// nopOwner is a collate.Owner that does nothing.
type nopOwner struct{}

func (*nopOwner) Retain()  {}
func (*nopOwner) Release() {}

// TestEncodeBorrowedColumns: a batch whose camera column borrows its
// samples (collate.Column.Parts, in one or several parts, some copied,
// some stored in another form and converted: collate.Conv) encodes to the
// same bytes as the same batch with copied samples, through AppendBatch,
// EncodeBatch + AppendTo, EncodeBatch + WriteTo, and writeArena (the
// column's bytes placed in the arena). Pattern letters: b borrowed, c
// copied, v borrowed and converted, w copied and converted.
func TestEncodeBorrowedColumns(t *testing.T) {
	const side = 148 // 65,712 bytes a frame: borrowed (collate.BorrowMin)
	fb := 3 * side * side
	// The long ones convert columns past parallelFill: fillParts splits them
	// among goroutines.
	for _, pattern := range []string{"bbbb", "bcbb", "cccb", "b", "vvvv", "vbvc", "wwvb", "cw",
		strings.Repeat("v", 20), strings.Repeat("vvvbvvvw", 3)} {
		t.Run(pattern, func(t *testing.T) {
			feats := append(append([]collate.Feature(nil), fixtureFeatures...),
				collate.Feature{Name: "observation.images.front", DType: "|u1", Shape: []int{3, side, side}})
			mk := func() *collate.Batcher {
				b, err := collate.NewBatcher(collate.Config{BatchSize: len(pattern), Features: feats, Strings: []string{"dataset"}})
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			copied, borrowed := mk(), mk()
			buf := make([]byte, len(pattern)*fb) // one owner's frames, contiguous
			for k := range buf {
				buf[k] = byte(k * 13 / 7)
			}
			own := &nopOwner{}
			var a, b *collate.Batch
			for i, p := range pattern {
				pix := buf[i*fb : (i+1)*fb]
				f := fixtureFrame(i)
				f.Features = append(f.Features, pix)
				bt, err := copied.Add(f)
				if err != nil {
					t.Fatal(err)
				}
				a = bt
				g := fixtureFrame(i)
				g.Features = append(g.Features, pix)
				g.Owner = own
				g.Borrow = make([]bool, len(g.Features))
				g.Borrow[len(g.Borrow)-1] = p == 'b' || p == 'v'
				if p == 'v' || p == 'w' {
					g.Features[len(g.Features)-1] = xorConv{}.stored(pix)
					g.Conv = make([]collate.Conv, len(g.Features))
					g.Conv[len(g.Conv)-1] = xorConv{fb}
				}
				if bt, err = borrowed.Add(g); err != nil {
					t.Fatal(err)
				}
				b = bt
			}
			if a == nil || b == nil {
				t.Fatal("no batch")
			}
			if len(b.Columns[len(b.Columns)-1].Parts) == 0 && strings.ContainsAny(pattern, "bv") {
				t.Fatal("the borrowed column has no parts")
			}
			meta := BatchMeta{Seq: 3, Epoch: 1}
			want, err := AppendBatch(nil, a, meta)
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendBatch(nil, b, meta)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("AppendBatch: borrowed batch differs")
			}
			var e Encoded
			if err := EncodeBatch(&e, b, meta); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(e.AppendTo(nil), want) || e.Len() != len(want) {
				t.Fatal("EncodeBatch + AppendTo: borrowed batch differs")
			}
			var w bytes.Buffer
			if _, err := e.WriteTo(&w); err != nil || !bytes.Equal(w.Bytes(), want) {
				t.Fatalf("EncodeBatch + WriteTo: borrowed batch differs (%v)", err)
			}
			ring := NewRing(make([]byte, len(buf)+SHMAlign), nil, 0)
			var scratch []byte
			w.Reset()
			if _, placed, err := e.writeArena(&w, ring, &scratch); err != nil || !placed {
				t.Fatalf("writeArena: placed %v, %v", placed, err)
			}
			if !bytes.Equal(ring.mem[:len(buf)], buf) {
				t.Fatal("writeArena: the arena's bytes differ from the column's")
			}
		})
	}
}

// xorConv is a test collate.Conv: the stored form is the bytes XOR 0x5a.
type xorConv struct{ n int }

func (c xorConv) Sizes() (int, int) { return c.n, c.n }

func (c xorConv) Convert(dst, src []byte) {
	for i, v := range src[:c.n] {
		dst[i] = v ^ 0x5a
	}
}

// stored returns the stored form of b.
func (xorConv) stored(b []byte) []byte {
	out := make([]byte, len(b))
	for i, v := range b {
		out[i] = v ^ 0x5a
	}
	return out
}
