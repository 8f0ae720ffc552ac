package collate

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/schema"
)

func f32bytes(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func testBatcher(t testing.TB, bs int, dropLast bool) *Batcher {
	b, err := NewBatcher(Config{BatchSize: bs, DropLast: dropLast, Features: []Feature{
		{Name: "observation.state", DType: "<f4", Shape: []int{2}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func frame(i int64, s *schema.Sample) *Frame {
	return &Frame{Index: i, EpisodeIndex: i / 10, FrameIndex: i % 10, Timestamp: float32(i%10) / 10, Task: "t", Sample: s,
		Features: [][]byte{f32bytes(float32(i), float32(-i))}}
}

func TestBatcherSizes(t *testing.T) {
	for _, tc := range []struct {
		n, bs    int
		dropLast bool
		sizes    []int
	}{
		{5, 2, false, []int{2, 2, 1}},
		{5, 2, true, []int{2, 2}},
		{4, 2, true, []int{2, 2}},
		{0, 3, false, nil},
	} {
		b := testBatcher(t, tc.bs, tc.dropLast)
		var sizes []int
		var next int64
		check := func(batch *Batch) {
			sizes = append(sizes, batch.N)
			for i := 0; i < batch.N; i++ {
				if got := batch.Index(i); got != next {
					t.Fatalf("index %d, want %d", got, next)
				}
				c := batch.Columns[NumStandard]
				if c.Float32At(2*i) != float32(next) || c.Float32At(2*i+1) != float32(-next) {
					t.Fatalf("feature mismatch at %d", next)
				}
				if batch.Timestamp(i) != float32(next%10)/10 || batch.EpisodeIndex(i) != next/10 {
					t.Fatal("scalar mismatch")
				}
				next++
			}
			if got := batch.Columns[NumStandard].Shape; len(got) != 2 || got[0] != batch.N || got[1] != 2 {
				t.Fatalf("shape %v", got)
			}
			if batch.Samples == nil || len(batch.Samples) != batch.N {
				t.Fatalf("samples %v", batch.Samples)
			}
			b.Recycle(batch)
		}
		s := &schema.Sample{}
		for i := 0; i < tc.n; i++ {
			b.AddNone()
			batch, err := b.Add(frame(int64(i), s))
			if err != nil {
				t.Fatal(err)
			}
			if batch != nil {
				check(batch)
			}
		}
		batch, err := b.Flush()
		if err != nil {
			t.Fatal(err)
		}
		if batch != nil {
			check(batch)
		}
		if len(sizes) != len(tc.sizes) {
			t.Fatalf("%+v: sizes %v", tc, sizes)
		}
		for i := range sizes {
			if sizes[i] != tc.sizes[i] {
				t.Fatalf("%+v: sizes %v", tc, sizes)
			}
		}
		if c := b.Counts(); c.None != int64(tc.n) || c.Kept != int64(tc.n) || c.Batches != int64(len(tc.sizes)) {
			t.Fatalf("counts %+v", c)
		}
	}
}

func TestBatcherPassthroughBatch(t *testing.T) {
	b := testBatcher(t, 2, false)
	b.Add(frame(0, nil))
	batch, err := b.Add(frame(1, nil))
	if err != nil || batch == nil {
		t.Fatal(err)
	}
	if batch.Samples != nil {
		t.Fatal("passthrough batch should have nil Samples")
	}
}

func TestBatcherInconsistent(t *testing.T) {
	b := testBatcher(t, 3, false)
	s := &schema.Sample{}
	b.Add(frame(20, s))
	b.Add(frame(31, nil))
	_, err := b.Add(frame(42, s))
	var ie *InconsistentError
	if !errors.As(err, &ie) {
		t.Fatalf("want InconsistentError, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"Inconsistent batch: 2/3 samples carry 'messages'; every sample in a batch must agree.", "index 31 (episode 3)", "--mode fallback"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}

func TestBatcherFeatureSize(t *testing.T) {
	b := testBatcher(t, 3, false)
	f := frame(7, nil)
	f.Features[0] = f.Features[0][:4]
	_, err := b.Add(f)
	var me *MismatchError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "observation.state") {
		t.Fatalf("got %v", err)
	}
}

func TestNewBatcherErrors(t *testing.T) {
	for _, cfg := range []Config{
		{BatchSize: 0},
		{BatchSize: 1, Features: []Feature{{Name: "index", DType: "<i8"}}},
		{BatchSize: 1, Features: []Feature{{Name: "a", DType: ">f4"}}},
		{BatchSize: 1, Features: []Feature{{Name: "a", DType: "<f4"}, {Name: "a", DType: "<f4"}}},
	} {
		if _, err := NewBatcher(cfg); err == nil {
			t.Errorf("%+v: want error", cfg)
		}
	}
}

func BenchmarkBatcherAdd(b *testing.B) {
	bt, err := NewBatcher(Config{BatchSize: 256, Features: []Feature{
		{Name: "observation.state", DType: "<f4", Shape: []int{14}},
		{Name: "action", DType: "<f4", Shape: []int{14}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	// One row group's worth of column buffers; frames slice into them.
	const rows = 1024
	state := make([]byte, rows*14*4)
	action := make([]byte, rows*14*4)
	s := &schema.Sample{}
	f := &Frame{Task: "pick", Sample: s, Features: make([][]byte, 2)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := i % rows
		f.Index, f.FrameIndex = int64(i), int64(r)
		f.Features[0] = state[r*56 : r*56+56]
		f.Features[1] = action[r*56 : r*56+56]
		batch, err := bt.Add(f)
		if err != nil {
			b.Fatal(err)
		}
		if batch != nil {
			bt.Recycle(batch)
		}
	}
}
