package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

func demoConfig(t *testing.T, mode render.Mode) *Config {
	t.Helper()
	src := fetch.NewFS(lrstream.DemoName, lrstream.Demo())
	ds, err := shard.OpenDataset(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return &Config{Source: src, Dataset: ds, Recipe: rec, Mode: mode, Workers: 2}
}

// trainBatches runs Train and returns the raw bytes of every batch message
// with its decoded form.
func trainBatches(t *testing.T, cfg *Config, so StreamOptions, to TrainOptions) ([][]byte, []*sink.DecodedBatch) {
	t.Helper()
	raws, msgs, err := trainRaw(t, []Mix{{Config: cfg, Weight: 1}}, so, to)
	if err != nil {
		t.Fatal(err)
	}
	var braws [][]byte
	var bs []*sink.DecodedBatch
	for i, m := range msgs {
		if m.Type == sink.TypeBatch {
			braws = append(braws, raws[i])
			bs = append(bs, m.Batch)
		}
	}
	return braws, bs
}

// trainRaw runs TrainMix and returns every message's bytes (header,
// batches, end or error) and the error.
func trainRaw(t *testing.T, srcs []Mix, so StreamOptions, to TrainOptions) ([][]byte, []*sink.Message, error) {
	t.Helper()
	var buf bytes.Buffer
	_, runErr := TrainMix(context.Background(), srcs, so, to, sink.NewMsgpack(&buf))
	d := sink.NewDecoder(&buf)
	var raws [][]byte
	var msgs []*sink.Message
	for {
		m, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, m.Raw)
		msgs = append(msgs, m)
	}
	return raws, msgs, runErr
}

func batchIndexes(t *testing.T, b *sink.DecodedBatch) []int64 {
	a := b.Column("index").(*sink.Array)
	out := make([]int64, b.Size)
	for i := range out {
		for k := 0; k < 8; k++ {
			out[i] |= int64(a.Data[8*i+k]) << (8 * k)
		}
	}
	return out
}

func TestTrainOrderIndependentOfConsumers(t *testing.T) {
	cfg := demoConfig(t, render.ModeDrop)
	so := StreamOptions{BatchSize: 16}
	base := TrainOptions{Shuffle: true, Seed: 7, BufferSize: 300, Epochs: 2}
	_, all := trainBatches(t, cfg, so, base)
	perEpoch := map[int64][][]int64{}
	for _, b := range all {
		perEpoch[b.Meta.Epoch] = append(perEpoch[b.Meta.Epoch], batchIndexes(t, b))
	}
	if len(perEpoch) != 2 {
		t.Fatalf("epochs %d", len(perEpoch))
	}
	if equalBatches(perEpoch[0], perEpoch[1]) {
		t.Fatal("epoch 1 repeats epoch 0's order")
	}
	// Every kept frame exactly once per epoch with one consumer.
	seen := map[int64]bool{}
	for _, b := range perEpoch[0] {
		for _, ix := range b {
			if seen[ix] {
				t.Fatalf("frame %d twice in an epoch", ix)
			}
			seen[ix] = true
		}
	}
	for _, C := range []int{2, 3, 5} {
		got := make([][][]int64, C)
		for c := 0; c < C; c++ {
			to := base
			to.Consumer, to.Consumers = c, C
			_, bs := trainBatches(t, cfg, so, to)
			for _, b := range bs {
				if b.Meta.Epoch == 0 {
					got[c] = append(got[c], batchIndexes(t, b))
				}
			}
		}
		n := len(got[0])
		for c := range got {
			if len(got[c]) != n {
				t.Fatalf("C=%d: consumer %d got %d batches, consumer 0 %d", C, c, len(got[c]), n)
			}
		}
		if n != len(perEpoch[0])/C {
			t.Fatalf("C=%d: %d batches each, want %d", C, n, len(perEpoch[0])/C)
		}
		// Interleaving the consumers' batches gives the global order.
		for j := 0; j < n; j++ {
			for c := 0; c < C; c++ {
				if !slices.Equal(got[c][j], perEpoch[0][j*C+c]) {
					t.Fatalf("C=%d: consumer %d batch %d differs from global batch %d", C, c, j, j*C+c)
				}
			}
		}
	}
}

func TestTrainResumeIsBitIdentical(t *testing.T) {
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 24}
	for _, to := range []TrainOptions{
		{Shuffle: true, Seed: 3, BufferSize: 500, Epochs: 2},
		{Epochs: 2, Consumer: 1, Consumers: 3},
	} {
		raws, bs := trainBatches(t, cfg, so, to)
		for _, cut := range []int{0, 1, len(bs) / 3, len(bs)/2 - 1, len(bs) / 2, len(bs) - 2} {
			r := to
			r.Resume = bs[cut].Meta.Resume
			got, _ := trainBatches(t, cfg, so, r)
			want := raws[cut+1:]
			if len(got) != len(want) {
				t.Fatalf("%+v cut %d: %d batches after resume, want %d", to, cut, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("%+v cut %d: batch %d differs", to, cut, i)
				}
			}
		}
		r := to
		r.Resume = bs[0].Meta.Resume
		r.Seed++
		if _, err := Train(context.Background(), cfg, so, r, sink.Discard()); err == nil && to.Shuffle {
			t.Fatal("token accepted by a run with another seed")
		}
	}
}

func TestTrainShuffleDeterministic(t *testing.T) {
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 32}
	a, _ := trainBatches(t, cfg, so, TrainOptions{Shuffle: true, Seed: 11, Epochs: 1, BufferSize: 200})
	cfg.Workers = 1
	b, _ := trainBatches(t, cfg, so, TrainOptions{Shuffle: true, Seed: 11, Epochs: 1, BufferSize: 200})
	c, bs := trainBatches(t, cfg, so, TrainOptions{Shuffle: true, Seed: 12, Epochs: 1, BufferSize: 200})
	if len(a) != len(b) {
		t.Fatal("batch counts differ")
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("batch %d differs between worker counts", i)
		}
	}
	if bytes.Equal(a[0], c[0]) {
		t.Fatal("another seed gave the same first batch")
	}
	// Neighbouring frames of an episode are not batched together: few
	// pairs in a batch are consecutive frames.
	adjacent, pairs := 0, 0
	for _, b := range bs {
		ix := batchIndexes(t, b)
		for i := 1; i < len(ix); i++ {
			pairs++
			if ix[i] == ix[i-1]+1 {
				adjacent++
			}
		}
	}
	if adjacent*20 > pairs {
		t.Fatalf("%d of %d neighbouring pairs are consecutive frames", adjacent, pairs)
	}
}

func equalBatches(a, b [][]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestTrainNothingToServe(t *testing.T) {
	cfg := demoConfig(t, render.ModeDrop)
	sel, _ := shard.ParseSelection("999", "")
	cfg.Selection = sel
	if _, err := Train(context.Background(), cfg, StreamOptions{BatchSize: 4}, TrainOptions{Epochs: 0}, sink.Discard()); err == nil {
		t.Fatal("--epochs 0 over an empty selection did not fail")
	}
	var buf bytes.Buffer
	if _, err := Train(context.Background(), cfg, StreamOptions{BatchSize: 4}, TrainOptions{Epochs: 3}, sink.NewMsgpack(&buf)); err != nil {
		t.Fatal(err)
	}
	st, err := sink.Decode(&buf)
	if err != nil || len(st.Batches) != 0 {
		t.Fatalf("empty selection: %v, %d batches", err, len(st.Batches))
	}
	// More consumers than batches is refused with a clear message.
	cfg = demoConfig(t, render.ModeDrop)
	_, err = Train(context.Background(), cfg, StreamOptions{BatchSize: 1000}, TrainOptions{Epochs: 1, Consumer: 0, Consumers: 3}, sink.Discard())
	if err == nil {
		t.Fatal("3 consumers of 1 batch accepted")
	}
}

func TestIndexCacheSharedAcrossStreams(t *testing.T) {
	cfg := demoConfig(t, render.ModeDrop)
	so := StreamOptions{BatchSize: 16}
	cache := &IndexCache{}
	var outs [3][][]byte
	var wg sync.WaitGroup
	for c := 0; c < 3; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			to := TrainOptions{Shuffle: true, Seed: 2, Epochs: 1, Consumer: c, Consumers: 3, Cache: cache}
			if _, err := Train(context.Background(), cfg, so, to, sink.NewMsgpack(&buf)); err != nil {
				t.Error(err)
			}
			outs[c] = rawOf(t, &buf)
		}()
	}
	wg.Wait()
	if len(cache.m) != 1 {
		t.Fatalf("%d cached indexes, want 1", len(cache.m))
	}
	for c := 0; c < 3; c++ {
		want, _ := trainBatches(t, cfg, so, TrainOptions{Shuffle: true, Seed: 2, Epochs: 1, Consumer: c, Consumers: 3})
		if len(want) != len(outs[c]) {
			t.Fatalf("consumer %d: %d batches with the cache, %d without", c, len(outs[c]), len(want))
		}
		for i := range want {
			if !bytes.Equal(want[i], outs[c][i]) {
				t.Fatalf("consumer %d batch %d differs with the cache", c, i)
			}
		}
	}
}

func rawOf(t *testing.T, r io.Reader) [][]byte {
	d := sink.NewDecoder(r)
	var out [][]byte
	for {
		m, err := d.Next()
		if err != nil {
			return out
		}
		if m.Type == sink.TypeBatch {
			out = append(out, m.Raw)
		}
	}
}

// TestTrainPosition checks the hello position (epoch, next): for a rank of
// W workers among world ranks, streams started at rank-sequence index k
// (worker w at k+w, stepping W) and read round-robin, as a DataLoader
// does, give exactly the rank's uninterrupted sequence from batch k.
func TestTrainPosition(t *testing.T) {
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 8}
	base := TrainOptions{Shuffle: true, Seed: 5, BufferSize: 300, Epochs: 3}
	for _, tc := range []struct{ world, W, rank, epoch int }{
		{1, 1, 0, 0}, {1, 3, 0, 1}, {2, 2, 1, 2}, {2, 2, 0, 0},
	} {
		C := tc.world * tc.W
		// The uninterrupted rank sequence: the rank's consumers round-robin.
		per := make([][]*sink.DecodedBatch, tc.W)
		for w := range tc.W {
			to := base
			to.Consumer, to.Consumers = tc.rank*tc.W+w, C
			_, bs := trainBatches(t, cfg, so, to)
			for _, b := range bs {
				if b.Meta.Epoch == int64(tc.epoch) {
					per[w] = append(per[w], b)
				}
			}
		}
		var want [][]int64
		for i := 0; i < len(per[0]); i++ {
			for w := range tc.W {
				want = append(want, batchIndexes(t, per[w][i]))
			}
		}
		for _, k := range []int{0, 1, tc.W + 1, len(want) - 1, len(want)} {
			streams := make([][]*sink.DecodedBatch, tc.W)
			for w := range tc.W {
				to := base
				to.Consumer, to.Consumers, to.Workers = tc.rank*tc.W+w, C, tc.W
				to.Position = &sink.Position{Epoch: int64(tc.epoch), Next: int64(k + w)}
				_, streams[w] = trainBatches(t, cfg, so, to)
			}
			var got [][]int64
			for i := 0; ; i++ {
				more := false
				for w := range tc.W {
					if i < len(streams[w]) {
						more = true
						b := streams[w][i]
						if b.Meta.Epoch != int64(tc.epoch) || b.Meta.Seq != int64(k+len(got)) {
							t.Fatalf("%+v k=%d: batch epoch %d seq %d, want epoch %d seq %d", tc, k, b.Meta.Epoch, b.Meta.Seq, tc.epoch, k+len(got))
						}
						got = append(got, batchIndexes(t, b))
					}
				}
				if !more {
					break
				}
			}
			if !equalBatches(got, want[k:]) {
				t.Fatalf("%+v k=%d: %d batches, want the %d after %d", tc, k, len(got), len(want)-k, k)
			}
		}
	}
	// A wrong fingerprint and an epoch beyond --epochs are refused.
	for _, p := range []sink.Position{{Epoch: 0, Fingerprint: "nope"}, {Epoch: 3}} {
		to := base
		to.Position = &p
		if _, err := Train(context.Background(), cfg, so, to, sink.Discard()); err == nil {
			t.Fatalf("position %+v accepted", p)
		}
	}
}
