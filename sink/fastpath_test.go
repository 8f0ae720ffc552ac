package sink

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/schema"
)

// referenceSamples is the straightforward encoding of a batch's message
// columns (every sample encoded in full), against which AppendBatch's
// shared-sample fast path is checked.
func referenceSamples(b []byte, bt *collate.Batch) []byte {
	b = mpStr(b, collate.KeyMessages)
	b = mpArrayHeader(b, len(bt.Samples))
	for _, s := range bt.Samples {
		b = mpArrayHeader(b, len(s.Messages))
		for j := range s.Messages {
			var err error
			if b, err = appendMessage(b, &s.Messages[j]); err != nil {
				panic(err)
			}
		}
	}
	b = mpStr(b, collate.KeyMessageStreams)
	b = mpArrayHeader(b, len(bt.Samples))
	for _, s := range bt.Samples {
		b = mpArrayHeader(b, len(s.Streams))
		for _, st := range s.Streams {
			b = mpStr(b, st)
		}
	}
	b = mpStr(b, collate.KeyTargetMessages)
	b = mpArrayHeader(b, len(bt.Samples))
	for _, s := range bt.Samples {
		b = mpArrayHeader(b, len(s.Targets))
		for _, t := range s.Targets {
			b = mpInt(b, int64(t))
		}
	}
	return b
}

// sharedBatches builds batches whose samples are drawn from `distinct`
// shared pointers (as render.Episode returns), in a pattern that revisits
// old ones after the ring of remembered spans has moved on.
func sharedBatches(t testing.TB, distinct, bs, n int) (*collate.Batcher, []*collate.Batch) {
	b, err := collate.NewBatcher(collate.Config{BatchSize: bs, Features: fixtureFeatures})
	if err != nil {
		t.Fatal(err)
	}
	pool := make([]*schema.Sample, distinct)
	for i := range pool {
		pool[i] = fixtureSample(i)
	}
	var out []*collate.Batch
	for i := 0; i < n; i++ {
		f := fixtureFrame(i)
		f.Strings = nil
		f.Sample = pool[(i*7+i/13)%distinct]
		bt, err := b.Add(f)
		if err != nil {
			t.Fatal(err)
		}
		if bt != nil {
			out = append(out, bt)
		}
	}
	if bt, _ := b.Flush(); bt != nil {
		out = append(out, bt)
	}
	return b, out
}

func TestSharedSamplesEncodeLikeReference(t *testing.T) {
	for _, distinct := range []int{1, 3, 16, 17, 40} {
		_, batches := sharedBatches(t, distinct, 64, 300)
		for k, bt := range batches {
			got, err := AppendBatch(nil, bt, BatchMeta{Seq: int64(k)})
			if err != nil {
				t.Fatal(err)
			}
			// The message columns come last (no language kept): compare
			// the tail with the reference encoding.
			ref := referenceSamples(nil, bt)
			if !bytes.HasSuffix(got, ref) {
				t.Fatalf("distinct %d batch %d: fast path differs from the reference encoding", distinct, k)
			}
			// And the whole message decodes.
			if _, _, err := SplitMessage(got); err != nil {
				t.Fatalf("distinct %d batch %d: %v", distinct, k, err)
			}
		}
	}
}

func TestEncoderMatchesSequential(t *testing.T) {
	for _, workers := range []int{1, 2, 5} {
		b, batches := sharedBatches(t, 9, 16, 500)
		var want, got bytes.Buffer
		seq, par := NewMsgpack(&want), NewMsgpack(&got)
		h := fixtureHeader(b)
		h.Strings = nil
		if err := seq.Header(h); err != nil {
			t.Fatal(err)
		}
		if err := par.Header(h); err != nil {
			t.Fatal(err)
		}
		released := 0
		enc := NewEncoder(par, workers, func(*collate.Batch) { released++ })
		for k, bt := range batches {
			meta := BatchMeta{Seq: int64(k), Epoch: 2, Resume: fmt.Sprint(k)}
			if err := seq.Batch(bt, meta); err != nil {
				t.Fatal(err)
			}
			if err := enc.Batch(bt, meta); err != nil {
				t.Fatal(err)
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		if released != len(batches) {
			t.Errorf("released %d of %d batches", released, len(batches))
		}
		seq.End(End{})
		par.End(End{})
		if !bytes.Equal(want.Bytes(), got.Bytes()) {
			t.Fatalf("workers %d: parallel encoding differs from sequential", workers)
		}
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("boom")
	}
	w.n--
	return len(p), nil
}

func TestEncoderReportsWriteError(t *testing.T) {
	b, batches := sharedBatches(t, 3, 8, 400)
	s := NewMsgpack(&failWriter{n: 4}) // header + 3 batches
	if err := s.Header(fixtureHeader(b)); err != nil {
		t.Fatal(err)
	}
	var released atomic.Int64
	enc := NewEncoder(s, 3, func(*collate.Batch) { released.Add(1) })
	var first error
	for k, bt := range batches {
		if err := enc.Batch(bt, BatchMeta{Seq: int64(k)}); err != nil && first == nil {
			first = err
		}
	}
	err := enc.Close()
	if err == nil || first != nil && !errors.Is(first, err) && first.Error() != err.Error() {
		t.Fatalf("Close: %v (first %v)", err, first)
	}
	if released.Load() != int64(len(batches)) {
		t.Errorf("released %d of %d batches", released.Load(), len(batches))
	}
	// The sink is usable again after Close: Fail is in order.
	if err := s.Fail(err); errors.Is(err, errOrder) {
		t.Error(err)
	}
}

// BenchmarkEncodeBatchShared encodes batches of 256 samples drawn from 6
// shared samples, as a blend recipe's renders of one episode are; ns/op is
// per frame.
func BenchmarkEncodeBatchShared(b *testing.B) {
	bb, batches := sharedBatches(b, 6, 256, 256)
	bt := batches[0]
	s := Discard()
	if err := s.Header(fixtureHeader(bb)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	frames := 0
	for frames < b.N {
		if err := s.Batch(bt, BatchMeta{Seq: int64(frames)}); err != nil {
			b.Fatal(err)
		}
		frames += 256
	}
	b.ReportMetric(float64(s.BytesWritten())/float64(frames), "B/frame")
}
