package collate

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/schema"
)

// countingOwner counts Retain and Release.
type countingOwner struct{ retained, released int }

func (o *countingOwner) Retain()  { o.retained++ }
func (o *countingOwner) Release() { o.released++ }

// TestBatcherBorrow adds camera-sized samples borrowed from owners and
// copied, in the orders a stream produces them, and checks that the batch
// bytes equal a batch of copies, that contiguous borrowed samples become
// one part, and that every Retain is matched by a Release once the batch
// is recycled (or dropped, or refused).
func TestBatcherBorrow(t *testing.T) {
	const fb = BorrowMin // one camera frame
	feat := Feature{Name: "observation.images.a", DType: "|u1", Shape: []int{fb}}
	// Two owners' buffers of 4 frames each; frame k of buffer o has
	// bytes o*16+k.
	bufs := make([][]byte, 2)
	for o := range bufs {
		bufs[o] = make([]byte, 4*fb)
		for k := range 4 {
			for i := range fb {
				bufs[o][k*fb+i] = byte(o*16 + k + i%7)
			}
		}
	}
	type sample struct {
		owner, k int
		borrow   bool
	}
	tests := []struct {
		name    string
		samples []sample
		parts   int // parts of the column (0: no parts, all copied)
	}{
		{"one owner, contiguous", []sample{{0, 0, true}, {0, 1, true}, {0, 2, true}, {0, 3, true}}, 1},
		{"two owners", []sample{{0, 2, true}, {0, 3, true}, {1, 0, true}, {1, 1, true}}, 2},
		{"not contiguous", []sample{{0, 3, true}, {0, 1, true}, {1, 2, true}, {0, 0, true}}, 4},
		{"copied", []sample{{0, 0, false}, {0, 1, false}, {1, 2, false}, {1, 3, false}}, 0},
		{"copied then borrowed", []sample{{0, 0, false}, {0, 1, true}, {0, 2, false}, {1, 3, true}}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBatcher(Config{BatchSize: len(tc.samples), Features: []Feature{feat}})
			if err != nil {
				t.Fatal(err)
			}
			owners := []*countingOwner{{}, {}}
			var want []byte
			var out *Batch
			for i, s := range tc.samples {
				v := bufs[s.owner][s.k*fb : (s.k+1)*fb]
				want = append(want, v...)
				f := &Frame{Index: int64(i), Task: "t", Features: [][]byte{v}, Borrow: []bool{s.borrow}, Owner: owners[s.owner]}
				if out, err = b.Add(f); err != nil {
					t.Fatal(err)
				}
			}
			if out == nil {
				t.Fatal("no batch")
			}
			col := &out.Columns[NumStandard]
			if !bytes.Equal(col.Bytes(), want) || col.Len() != len(want) {
				t.Fatalf("column bytes differ from the samples'")
			}
			if len(col.Parts) != tc.parts {
				t.Fatalf("%d parts, want %d", len(col.Parts), tc.parts)
			}
			b.Recycle(out)
			for o, ow := range owners {
				if ow.retained != ow.released {
					t.Fatalf("owner %d retained %d times, released %d", o, ow.retained, ow.released)
				}
			}
		})
	}
}

// TestBatcherBorrowReleased checks the release of borrowed samples on
// every way a batch ends: recycled, dropped by DropLast, refused by the
// invariants.
func TestBatcherBorrowReleased(t *testing.T) {
	feat := Feature{Name: "cam", DType: "|u1", Shape: []int{BorrowMin}}
	buf := make([]byte, 2*BorrowMin)
	add := func(b *Batcher, o Owner, k int, withSample bool) (*Batch, error) {
		f := &Frame{Index: int64(k), Task: "t", Features: [][]byte{buf[k*BorrowMin : (k+1)*BorrowMin]}, Borrow: []bool{true}, Owner: o}
		if withSample {
			f.Sample = &schema.Sample{}
		}
		return b.Add(f)
	}
	for _, tc := range []string{"dropped", "refused", "flushed"} {
		t.Run(tc, func(t *testing.T) {
			b, err := NewBatcher(Config{BatchSize: 2, DropLast: tc == "dropped", Features: []Feature{feat}})
			if err != nil {
				t.Fatal(err)
			}
			o := &countingOwner{}
			if _, err := add(b, o, 0, false); err != nil {
				t.Fatal(err)
			}
			switch tc {
			case "dropped":
				if bt, err := b.Flush(); bt != nil || err != nil {
					t.Fatalf("flush: %v %v", bt, err)
				}
			case "refused":
				// A batch mixing samples with and without messages.
				if _, err := add(b, o, 1, true); err == nil {
					t.Fatal("mixed batch accepted")
				}
			case "flushed":
				bt, err := b.Flush()
				if bt == nil || err != nil {
					t.Fatalf("flush: %v %v", bt, err)
				}
				if o.released != 0 {
					t.Fatal("released before the batch was recycled")
				}
				b.Recycle(bt)
			}
			if o.retained == 0 || o.retained != o.released {
				t.Fatalf("retained %d, released %d", o.retained, o.released)
			}
		})
	}
}

func TestAppendPart(t *testing.T) {
	a := make([]byte, 10)
	conv := halfConv{n: 1}
	parts := appendPart(nil, Part{Data: a[0:3]})
	parts = appendPart(parts, Part{Data: a[3:5]})
	parts = appendPart(parts, Part{Data: a[6:8]})
	parts = appendPart(parts, Part{Data: a[8:9:9]})
	parts = appendPart(parts, Part{Data: make([]byte, 2)})
	parts = appendPart(parts, Part{Data: a[9:10], Conv: conv}) // a conversion: never merged
	parts = appendPart(parts, Part{Data: a[0:1]})
	got := fmt.Sprint(len(parts), len(parts[0].Data), len(parts[1].Data), len(parts[2].Data), len(parts[3].Data), parts[4].Len())
	if got != "5 5 3 2 1 1" {
		t.Fatalf("parts %s, want 5 5 3 2 1 1", got)
	}
}

// halfConv is a test Conv: n stored bytes per half of the column bytes,
// each written twice, the second time plus one (so a copy of the stored
// bytes is never right).
type halfConv struct{ n int }

func (c halfConv) Sizes() (int, int) { return c.n, 2 * c.n }

func (c halfConv) Convert(dst, src []byte) {
	for i, v := range src[:c.n] {
		dst[2*i], dst[2*i+1] = v, v+1
	}
}

// converted is what halfConv makes of src.
func converted(src []byte) []byte {
	out := make([]byte, 2*len(src))
	halfConv{len(src)}.Convert(out, src)
	return out
}

// TestBatcherConv adds samples stored in another form (Frame.Conv),
// borrowed and copied, mixed with plain ones, and checks the column's
// bytes (converted: Bytes, AppendTo, Fill), its parts (one per converted
// borrowed sample) and the size checks.
func TestBatcherConv(t *testing.T) {
	const fb = BorrowMin // column bytes of a sample
	feat := Feature{Name: "cam", DType: "|u1", Shape: []int{fb}}
	stored := make([]byte, 4*fb/2)
	for i := range stored {
		stored[i] = byte(i % 251)
	}
	plain := make([]byte, 4*fb)
	for i := range plain {
		plain[i] = byte(i % 13)
	}
	type sample struct {
		k            int
		conv, borrow bool
	}
	tests := []struct {
		name    string
		samples []sample
		parts   int
	}{
		{"borrowed, converted", []sample{{0, true, true}, {1, true, true}, {2, true, true}}, 3},
		{"copied, converted", []sample{{0, true, false}, {3, true, false}}, 0},
		{"mixed", []sample{{0, false, true}, {1, false, true}, {1, true, true}, {2, true, false}, {3, false, false}}, 3}, // the two copies are one part of Data
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBatcher(Config{BatchSize: len(tc.samples), Features: []Feature{feat}})
			if err != nil {
				t.Fatal(err)
			}
			o := &countingOwner{}
			var want []byte
			var out *Batch
			for i, s := range tc.samples {
				f := &Frame{Index: int64(i), Task: "t", Borrow: []bool{s.borrow}, Owner: o}
				if s.conv {
					v := stored[s.k*fb/2 : (s.k+1)*fb/2]
					f.Features, f.Conv = [][]byte{v}, []Conv{halfConv{fb / 2}}
					want = append(want, converted(v)...)
				} else {
					v := plain[s.k*fb : (s.k+1)*fb]
					f.Features = [][]byte{v}
					want = append(want, v...)
				}
				if out, err = b.Add(f); err != nil {
					t.Fatal(err)
				}
			}
			col := &out.Columns[NumStandard]
			if !bytes.Equal(col.Bytes(), want) || col.Len() != len(want) {
				t.Fatal("column bytes differ from the converted samples'")
			}
			var filled []byte
			for i := range col.Parts {
				p := &col.Parts[i]
				dst := make([]byte, p.Len())
				p.Fill(dst)
				filled = append(filled, dst...)
			}
			if len(col.Parts) > 0 && !bytes.Equal(filled, want) {
				t.Fatal("Part.Fill differs from the converted samples")
			}
			if len(col.Parts) != tc.parts {
				t.Fatalf("%d parts, want %d", len(col.Parts), tc.parts)
			}
			b.Recycle(out)
			if o.retained != o.released {
				t.Fatalf("retained %d, released %d", o.retained, o.released)
			}
		})
	}
	for _, bad := range []struct {
		name   string
		stored int
		conv   Conv
		want   string
	}{
		{"stored bytes", fb/2 - 1, halfConv{fb / 2}, "its conversion reads"},
		{"converted size", fb / 4, halfConv{fb / 4}, "bytes converted"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			b, _ := NewBatcher(Config{BatchSize: 2, Features: []Feature{feat}})
			_, err := b.Add(&Frame{Task: "t", Features: [][]byte{make([]byte, bad.stored)}, Conv: []Conv{bad.conv}})
			if err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("error %v, want %q", err, bad.want)
			}
		})
	}
}

// FuzzBatcherBorrow adds samples borrowed from two owners' buffers (in
// any order, contiguous or not), copied ones and converted ones (stored
// in half the bytes: Frame.Conv), per the fuzzer's bytes,
// and checks every batch's column bytes and that each owner is released as
// often as retained once the batches are recycled or dropped.
func FuzzBatcherBorrow(f *testing.F) {
	f.Add(uint8(3), []byte{0, 1, 2, 3, 0x80, 5})
	f.Add(uint8(1), []byte{7, 6, 5})
	f.Add(uint8(4), []byte{0x40, 0x41, 1, 0xc2, 3, 0x44})
	f.Fuzz(func(t *testing.T, bs uint8, ops []byte) {
		const fb = BorrowMin
		b, err := NewBatcher(Config{BatchSize: int(bs%5) + 1, DropLast: bs&0x80 != 0,
			Features: []Feature{{Name: "cam", DType: "|u1", Shape: []int{fb}}}})
		if err != nil {
			t.Fatal(err)
		}
		bufs := [2][]byte{make([]byte, 8*fb), make([]byte, 8*fb)}
		for o := range bufs {
			for i := range bufs[o] {
				bufs[o][i] = byte(o*8 + i/fb)
			}
		}
		owners := []*countingOwner{{}, {}}
		var want []byte
		check := func(bt *Batch) {
			if bt == nil {
				return
			}
			if got := bt.Columns[NumStandard].Bytes(); !bytes.Equal(got, want[:len(got)]) {
				t.Fatal("batch bytes differ from its samples'")
			}
			want = want[bt.Columns[NumStandard].Len():]
			b.Recycle(bt)
		}
		for i, op := range ops {
			o, k := int(op>>3)&1, int(op)&7
			v := bufs[o][k*fb : (k+1)*fb]
			fr := &Frame{Index: int64(i), Task: "t", Features: [][]byte{v}, Borrow: []bool{op&0x80 == 0}, Owner: owners[o]}
			if op&0x40 != 0 { // stored in half the bytes, converted
				v = v[:fb/2]
				fr.Features, fr.Conv = [][]byte{v}, []Conv{halfConv{fb / 2}}
				want = append(want, converted(v)...)
			} else {
				want = append(want, v...)
			}
			bt, err := b.Add(fr)
			if err != nil {
				t.Fatal(err)
			}
			check(bt)
		}
		bt, err := b.Flush()
		if err != nil {
			t.Fatal(err)
		}
		check(bt)
		for o, ow := range owners {
			if ow.retained != ow.released {
				t.Fatalf("owner %d: retained %d, released %d", o, ow.retained, ow.released)
			}
		}
	})
}
