package collate

import (
	"bytes"
	"fmt"
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
	parts := appendPart(nil, a[0:3])
	parts = appendPart(parts, a[3:5])
	parts = appendPart(parts, a[6:8])
	parts = appendPart(parts, a[8:9:9])
	parts = appendPart(parts, make([]byte, 2))
	got := fmt.Sprint(len(parts), len(parts[0]), len(parts[1]), len(parts[2]))
	if got != "3 5 3 2" {
		t.Fatalf("parts %s, want 3 5 3 2", got)
	}
}

// FuzzBatcherBorrow adds samples borrowed from two owners' buffers (in
// any order, contiguous or not) and copied ones, per the fuzzer's bytes,
// and checks every batch's column bytes and that each owner is released as
// often as retained once the batches are recycled or dropped.
func FuzzBatcherBorrow(f *testing.F) {
	f.Add(uint8(3), []byte{0, 1, 2, 3, 0x80, 5})
	f.Add(uint8(1), []byte{7, 6, 5})
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
			want = append(want, v...)
			fr := &Frame{Index: int64(i), Task: "t", Features: [][]byte{v}, Borrow: []bool{op&0x80 == 0}, Owner: owners[o]}
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
