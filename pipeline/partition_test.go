package pipeline

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/order"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

// shape is a cluster shape: ranks × dataloader workers.
type shape struct{ R, W int }

// partOptions returns the partitioned-order options of rank r, worker w.
func partOptions(base TrainOptions, sh shape, r, w int) TrainOptions {
	to := base
	to.WorldSize = sh.R
	if to.Order == "" {
		to.Order = OrderPartitioned
	}
	to.Consumer, to.Consumers = r*sh.W+w, sh.R*sh.W
	return to
}

// globalSequence runs every consumer of sh and interleaves their batches
// into the documented global sequence (consumer slot w*R+r's own batch j
// is global batch j*C+slot), per epoch. It also returns each consumer's
// batch count per epoch.
func globalSequence(t *testing.T, cfg *Config, so StreamOptions, base TrainOptions, sh shape) (map[int64]map[int64][]int64, []map[int64]int) {
	t.Helper()
	C := sh.R * sh.W
	seq := map[int64]map[int64][]int64{}
	var counts []map[int64]int
	for r := 0; r < sh.R; r++ {
		for w := 0; w < sh.W; w++ {
			to := partOptions(base, sh, r, w)
			_, bs := trainBatches(t, cfg, so, to)
			slot := int64(w*sh.R + r)
			n := map[int64]int{}
			first := map[int64]int64{}
			for _, b := range bs {
				e := b.Meta.Epoch
				if seq[e] == nil {
					seq[e] = map[int64][]int64{}
				}
				if _, ok := first[e]; !ok {
					first[e] = b.Meta.Seq
				}
				j := b.Meta.Seq - first[e] + ownStart(base, e, slot, int64(C))
				g := j*int64(C) + slot
				if _, dup := seq[e][g]; dup {
					t.Fatalf("%v: global batch %d of epoch %d served twice", sh, g, e)
				}
				seq[e][g] = batchIndexes(t, b)
				n[e]++
			}
			counts = append(counts, n)
		}
	}
	return seq, counts
}

// forPartitionedOrders runs test for each order that cuts epochs into
// canonical partitions.
func forPartitionedOrders(t *testing.T, test func(t *testing.T, ord string)) {
	for _, ord := range []string{OrderPartitioned, OrderStratified} {
		t.Run(ord, func(t *testing.T) { test(t, ord) })
	}
}

// ownStart is the first own batch of a consumer resuming from base.Resume.
func ownStart(base TrainOptions, epoch, slot, C int64) int64 {
	if base.Resume == "" {
		return 0
	}
	tk, _, _ := order.ParseToken(base.Resume)
	if tk.Epoch != epoch {
		return 0
	}
	return max(0, (tk.Batch-slot+C-1)/C)
}

func TestPartitionedOrderInvariantToShape(t *testing.T) {
	forPartitionedOrders(t, testPartitionedOrderInvariantToShape)
}

func testPartitionedOrderInvariantToShape(t *testing.T, ord string) {
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 8}
	base := TrainOptions{Shuffle: true, Seed: 9, BufferSize: 64, Epochs: 2, Partitions: 6, Order: ord}
	want, _ := globalSequence(t, cfg, so, base, shape{1, 1})
	parts, _ := partitionEpisodes(cfg, 9, 0, 6)
	for e := int64(0); e < 2; e++ {
		_, frames := partitionEpisodes(cfg, 9, e, 6)
		nbp := slices.Min(frames) / 8
		if int64(len(want[e])) != nbp*6 {
			t.Fatalf("epoch %d: %d global batches, want %d", e, len(want[e]), nbp*6)
		}
		seen := map[int64]bool{}
		for g := int64(0); g < int64(len(want[e])); g++ {
			for _, ix := range want[e][g] {
				if seen[ix] {
					t.Fatalf("epoch %d: frame %d served twice", e, ix)
				}
				seen[ix] = true
			}
		}
	}
	// Partitions are a disjoint cover of the selection.
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n != len(cfg.Dataset.Episodes) {
		t.Fatalf("partitions hold %d episodes, dataset %d", n, len(cfg.Dataset.Episodes))
	}
	if slices.Equal(want[0][0], want[1][0]) {
		t.Fatal("epoch 1 repeats epoch 0")
	}
	for _, sh := range []shape{{2, 1}, {1, 2}, {3, 2}, {2, 3}, {1, 6}} {
		got, counts := globalSequence(t, cfg, so, base, sh)
		for e := int64(0); e < 2; e++ {
			if len(got[e]) != len(want[e]) {
				t.Fatalf("%v epoch %d: %d global batches, want %d", sh, e, len(got[e]), len(want[e]))
			}
			for g, b := range want[e] {
				if !slices.Equal(got[e][g], b) {
					t.Fatalf("%v epoch %d: global batch %d differs", sh, e, g)
				}
			}
		}
		for c := range counts {
			if counts[c][0] != counts[0][0] || counts[c][1] != counts[0][1] {
				t.Fatalf("%v: unequal batch counts %v", sh, counts)
			}
		}
	}
}

func TestPartitionedElasticResume(t *testing.T) {
	forPartitionedOrders(t, testPartitionedElasticResume)
}

func testPartitionedElasticResume(t *testing.T, ord string) {
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 8}
	base := TrainOptions{Shuffle: true, Seed: 3, BufferSize: 32, Epochs: 2, Partitions: 6, Order: ord}
	want, _ := globalSequence(t, cfg, so, base, shape{1, 1})
	// Take the token after global batch 7 of epoch 0 on a 3×2 cluster:
	// slot 1 (rank 1, worker 0) serves global batch 7 as own batch 1.
	_, bs := trainBatches(t, cfg, so, partOptions(base, shape{3, 2}, 1, 0))
	tok := bs[1].Meta.Resume
	for _, sh := range []shape{{1, 1}, {2, 1}, {1, 3}, {6, 1}} {
		rb := base
		rb.Resume = tok
		got, _ := globalSequence(t, cfg, so, rb, sh)
		for g := int64(0); g < int64(len(want[0])); g++ {
			b, ok := got[0][g]
			if g < 8 && ok {
				t.Fatalf("%v: resumed stream repeats global batch %d", sh, g)
			}
			if g >= 8 && (!ok || !slices.Equal(b, want[0][g])) {
				t.Fatalf("%v: resumed stream lost or changed global batch %d", sh, g)
			}
		}
		if len(got[1]) != len(want[1]) {
			t.Fatalf("%v: epoch 1 has %d batches, want %d", sh, len(got[1]), len(want[1]))
		}
	}
}

func TestPartitionedRefusesShapes(t *testing.T) {
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 8}
	for _, tc := range []struct {
		to   TrainOptions
		want string
	}{
		{TrainOptions{Order: OrderPartitioned, Partitions: 6, Consumers: 4, Epochs: 1}, "must divide --partitions 6"},
		{TrainOptions{Order: OrderPartitioned, Partitions: 6, Consumers: 1, Epochs: 1, Shuffle: true}, ""},
		{TrainOptions{Order: OrderPartitioned, Partitions: 24, Consumers: 1, Epochs: 1}, "less than one batch"},
		// The error says why (whole episodes) and how big the selection is.
		{TrainOptions{Order: OrderPartitioned, Partitions: 24, Consumers: 1, Epochs: 1}, "the selection has 12 episodes of 1175 frames"},
		{TrainOptions{Order: "random", Epochs: 1}, "unknown order"},
	} {
		_, err := Train(context.Background(), cfg, so, tc.to, sink.Discard())
		if tc.want == "" {
			if err != nil {
				t.Fatalf("%+v: %v", tc.to, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: error %v, want %q", tc.to, err, tc.want)
		}
	}
	// Drop mode: a partition that keeps fewer frames than the metadata
	// count promises is an error naming it, never a short epoch.
	d := demoConfig(t, render.ModeDrop)
	_, err := Train(context.Background(), d, StreamOptions{BatchSize: 64}, TrainOptions{Order: OrderPartitioned, Partitions: 3, Epochs: 1}, sink.Discard())
	if err != nil && !strings.Contains(err.Error(), "partition") {
		t.Fatalf("drop mode: %v", err)
	}
}

// countingSource counts the bytes read from data files.
type countingSource struct {
	fetch.Source
	bytes *atomic.Int64
}

func (s countingSource) Open(ctx context.Context, name string) (fetch.File, error) {
	f, err := s.Source.Open(ctx, name)
	if err != nil || !strings.HasPrefix(name, "data/") {
		return f, err
	}
	return countingFile{f, s.bytes}, nil
}

type countingFile struct {
	fetch.File
	bytes *atomic.Int64
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.bytes.Add(int64(n))
	return n, err
}

// TestPartitionedReadsOnlyItsShare checks that a consumer plans and
// decodes only the row groups of its partitions' episodes.
func TestPartitionedReadsOnlyItsShare(t *testing.T) {
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 8}
	base := TrainOptions{Shuffle: true, Seed: 1, BufferSize: 16, Epochs: 1, Partitions: 6}
	var all int
	for _, C := range []int{1, 2, 6} {
		units := 0
		for c := 0; c < C; c++ {
			to := partOptions(base, shape{C, 1}, c, 0)
			parts, _ := partitionEpisodes(cfg, 1, 0, 6)
			want := map[int64]bool{}
			for p := c; p < 6; p += C {
				for _, e := range parts[p] {
					want[e] = true
				}
			}
			var mine []int64
			for e := range want {
				mine = append(mine, e)
			}
			cc := *cfg
			cc.Selection = episodeSelection(mine)
			idx, err := buildKeepIndex(context.Background(), []Mix{{Config: &cc, Weight: 1}})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range idx.runs[0] {
				if !want[r.Episode] {
					t.Fatalf("C=%d consumer %d plans episode %d of another partition", C, c, r.Episode)
				}
			}
			var n atomic.Int64
			c2 := *cfg
			c2.Source = countingSource{cfg.Source, &n}
			if _, err := Train(context.Background(), &c2, so, to, sink.Discard()); err != nil {
				t.Fatal(err)
			}
			if n.Load() == 0 {
				t.Fatalf("C=%d consumer %d read nothing", C, c)
			}
			t.Logf("C=%d consumer %d: %d units, %d data bytes", C, c, len(idx.units), n.Load())
			units += len(idx.units)
		}
		// The demo's row groups each hold one episode: the consumers
		// together open every row group exactly once.
		if C == 1 {
			all = units
		} else if units != all {
			t.Fatalf("C=%d: consumers open %d row groups in all, one consumer %d", C, units, all)
		}
	}
}

// TestPartitionedPosition: under the partitioned order a hello position
// (epoch, next) resumes exactly: rank r's worker w asking for index
// next+w serves the rank's batches next+w, next+w+W, ... of the epoch
// (rank-sequence index m is global batch m*R + r), so the workers read
// round-robin continue the rank's sequence at next, on any epoch.
func TestPartitionedPosition(t *testing.T) { forPartitionedOrders(t, testPartitionedPosition) }

func testPartitionedPosition(t *testing.T, ord string) {
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 8}
	base := TrainOptions{Shuffle: true, Seed: 6, BufferSize: 48, Epochs: 2, Partitions: 6, Order: ord}
	want, _ := globalSequence(t, cfg, so, base, shape{1, 1})
	sh := shape{2, 3}
	for _, e := range []int64{0, 1} {
		perRank := int64(len(want[e])) / int64(sh.R)
		for _, k := range []int64{0, 1, 4, perRank - 2} {
			for r := 0; r < sh.R; r++ {
				got := map[int64][]int64{}
				for w := 0; w < sh.W; w++ {
					to := partOptions(base, sh, r, w)
					to.Position, to.Workers = &sink.Position{Epoch: e, Next: k + int64(w)}, sh.W
					_, bs := trainBatches(t, cfg, so, to)
					for i, b := range bs {
						m := k + int64(w) + int64(i*sh.W)
						if b.Meta.Epoch != e || b.Meta.Seq != m {
							t.Fatalf("epoch %d next %d rank %d worker %d: batch %d is epoch %d seq %d, want %d %d", e, k, r, w, i, b.Meta.Epoch, b.Meta.Seq, e, m)
						}
						got[m] = batchIndexes(t, b)
					}
				}
				if int64(len(got)) != perRank-k {
					t.Fatalf("epoch %d next %d rank %d: %d batches, want %d", e, k, r, len(got), perRank-k)
				}
				for m := k; m < perRank; m++ {
					if !slices.Equal(got[m], want[e][m*int64(sh.R)+int64(r)]) {
						t.Fatalf("epoch %d next %d rank %d: rank batch %d differs from global batch %d", e, k, r, m, m*int64(sh.R)+int64(r))
					}
				}
			}
		}
	}
	// A position of another run is refused.
	to := partOptions(base, sh, 0, 0)
	to.Position, to.Workers = &sink.Position{Epoch: 0, Next: 0, Fingerprint: "other"}, sh.W
	if _, err := Train(context.Background(), cfg, so, to, sink.Discard()); err == nil || !strings.Contains(err.Error(), "different run") {
		t.Fatalf("foreign position: %v", err)
	}
}

// TestTrainEndCountsAddUp checks the end message of every order and
// consumer: frames = rendered + dropped + passthrough + errors
// (docs/wire-format.md, "end"), also when frames fail to render and are
// skipped (a conformance dataset whose recipe fails on a few frames).
func TestTrainEndCountsAddUp(t *testing.T) {
	ctx := context.Background()
	src, err := fetch.NewDir(filepath.Join(conformanceDatasets(t), "pub_documented_top_wrist"))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := render.LoadFile(filepath.Join(sharedDir(t), "recipes", "subtask.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Source: src, Dataset: ds, Recipe: rec, Mode: render.ModeFallback, SkipErrors: true, Workers: 2}
	for _, ord := range []string{OrderGlobal, OrderPartitioned} {
		for _, C := range []int{1, 2} {
			var errs int64
			for c := 0; c < C; c++ {
				to := TrainOptions{Order: ord, Partitions: 2, Shuffle: true, Seed: 3, Epochs: 2, Consumer: c, Consumers: C}
				_, msgs, err := trainRaw(t, []Mix{{Config: cfg, Weight: 1}}, StreamOptions{BatchSize: 8}, to)
				if err != nil {
					t.Fatalf("%s consumer %d of %d: %v", ord, c, C, err)
				}
				e := msgs[len(msgs)-1].End
				if e == nil {
					t.Fatalf("%s consumer %d of %d: no end message", ord, c, C)
				}
				errs += e.Errors
				if e.Frames != e.Rendered+e.Dropped+e.Passthrough+e.Errors {
					t.Errorf("%s consumer %d of %d: frames %d, but rendered %d + dropped %d + passthrough %d + errors %d", ord, c, C, e.Frames, e.Rendered, e.Dropped, e.Passthrough, e.Errors)
				}
			}
			if errs == 0 {
				t.Fatalf("%s, %d consumers: no frame failed: the test needs failures", ord, C)
			}
		}
	}
}

// TestPartitionedElasticResume8x4 resumes a token of an 8 ranks × 4
// workers cluster on 2 × 2 and on 4 × 8 (32 partitions of a generated
// 128-episode dataset): no global batch lost or repeated, the rest of the
// epoch and the next as the uninterrupted run's.
func TestPartitionedElasticResume8x4(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	if _, err := datagen.Generate(context.Background(), dir, datagen.Options{Episodes: 128, MinFrames: 40, MaxFrames: 60,
		FramesPerFile: 1200, Cameras: []string{}, Dim: 6, Tasks: 3, Seed: 2, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	cfg := datasetConfig(t, dir, nil)
	cfg.SkipErrors = false
	forPartitionedOrders(t, func(t *testing.T, ord string) {
		so := StreamOptions{BatchSize: 4}
		base := TrainOptions{Shuffle: true, Seed: 5, BufferSize: 256, Epochs: 2, Partitions: 32, Order: ord}
		want, _ := globalSequence(t, cfg, so, base, shape{1, 1})
		// Rank 3, worker 2 of 8 × 4 is slot 2×8+3 = 19: its own batch 5
		// is global batch 5×32+19 = 179.
		_, bs := trainBatches(t, cfg, so, partOptions(base, shape{8, 4}, 3, 2))
		tok := bs[5].Meta.Resume
		const next = 180
		for _, sh := range []shape{{2, 2}, {4, 8}} {
			rb := base
			rb.Resume = tok
			got, _ := globalSequence(t, cfg, so, rb, sh)
			for g := int64(0); g < int64(len(want[0])); g++ {
				b, ok := got[0][g]
				if g < next && ok {
					t.Fatalf("%v: resumed stream repeats global batch %d", sh, g)
				}
				if g >= next && (!ok || !slices.Equal(b, want[0][g])) {
					t.Fatalf("%v: resumed stream lost or changed global batch %d", sh, g)
				}
			}
			if len(got[1]) != len(want[1]) {
				t.Fatalf("%v: epoch 1 has %d batches, want %d", sh, len(got[1]), len(want[1]))
			}
			for g, b := range want[1] {
				if !slices.Equal(got[1][g], b) {
					t.Fatalf("%v: epoch 1 global batch %d differs", sh, g)
				}
			}
		}
	})
}
