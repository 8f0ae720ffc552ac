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
	var total int64
	for _, e := range cfg.Dataset.Episodes {
		total += e.Length
	}
	nb := total / 8
	parts, _ := partitionEpisodes(cfg, 9, 0, 6, 8)
	for e := int64(0); e < 2; e++ {
		if int64(len(want[e])) != nb {
			t.Fatalf("epoch %d: %d global batches, want %d (%d frames)", e, len(want[e]), nb, total)
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
	// Partitions cover the selection: every episode in one, or split
	// between two neighbours.
	in := map[int64]int{}
	for _, p := range parts {
		for _, e := range p {
			in[e]++
		}
	}
	if len(in) != len(cfg.Dataset.Episodes) {
		t.Fatalf("partitions hold %d episodes, dataset %d", len(in), len(cfg.Dataset.Episodes))
	}
	if slices.Equal(want[0][0], want[1][0]) {
		t.Fatal("epoch 1 repeats epoch 0")
	}
	for _, sh := range []shape{{2, 1}, {1, 2}, {3, 2}, {2, 3}, {1, 6}} {
		C := int64(sh.R * sh.W)
		got, counts := globalSequence(t, cfg, so, base, sh)
		for e := int64(0); e < 2; e++ {
			// The same global sequence, less the last nb mod C batches.
			if int64(len(got[e])) != nb/C*C {
				t.Fatalf("%v epoch %d: %d global batches, want %d", sh, e, len(got[e]), nb/C*C)
			}
			for g, b := range got[e] {
				if !slices.Equal(b, want[e][g]) {
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

// TestPartitionedExactCover: per epoch the consumers of the partitioned
// orders serve every kept frame exactly once, except fewer than
// consumers × batch size frames (the last global batches that cannot go
// to every consumer alike, and the frames short of a batch), with equal
// batch counts, on several shapes; the remainder is the stream's
// Stats.Unserved. With --mode drop (frames dropped by rendering) a
// partition's batches are short of its drops instead.
func TestPartitionedExactCover(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	if _, err := datagen.Generate(context.Background(), dir, datagen.Options{Episodes: 128, MinFrames: 40, MaxFrames: 60,
		FramesPerFile: 1200, Cameras: []string{}, Dim: 6, Tasks: 3, Seed: 2, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	gen := datasetConfig(t, dir, nil)
	gen.SkipErrors = false
	for _, tc := range []struct {
		name   string
		cfg    *Config
		B, P   int
		shapes []shape
	}{
		// 2 episodes a partition: the old rule (every partition serves
		// its smallest one's batches) left half the frames out.
		{"generated, P=64", gen, 4, 64, []shape{{1, 1}, {2, 2}, {8, 4}, {16, 4}}},
		{"generated, P=12, batch 32", gen, 32, 12, []shape{{1, 1}, {3, 1}, {2, 3}, {12, 1}}},
		{"demo, --mode drop", demoConfig(t, render.ModeDrop), 8, 6, []shape{{1, 1}, {2, 1}, {3, 2}}},
	} {
		forPartitionedOrders(t, func(t *testing.T, ord string) {
			t.Run(tc.name, func(t *testing.T) {
				kept := map[int64]bool{}
				if tc.cfg.Mode == render.ModeDrop {
					idx, err := buildKeepIndex(context.Background(), []Mix{{Config: tc.cfg, Weight: 1}})
					if err != nil {
						t.Fatal(err)
					}
					for p, k := range idx.keep {
						if k {
							kept[int64(p)] = true // demo: index p is position p
						}
					}
				} else {
					var n int64
					for _, e := range tc.cfg.Dataset.Episodes {
						for i := int64(0); i < e.Length; i++ {
							kept[n+i] = true
						}
						n += e.Length
					}
				}
				for _, sh := range tc.shapes {
					C := sh.R * sh.W
					base := TrainOptions{Shuffle: true, Seed: 4, BufferSize: 256, Epochs: 2, Partitions: tc.P, Order: ord}
					served := map[int64]map[int64]int{}
					var counts []int
					var unserved int64
					for r := 0; r < sh.R; r++ {
						for w := 0; w < sh.W; w++ {
							to := partOptions(base, sh, r, w)
							raws, msgs, err := trainRaw(t, []Mix{{Config: tc.cfg, Weight: 1}}, StreamOptions{BatchSize: tc.B}, to)
							if err != nil {
								t.Fatalf("%v: %v", sh, err)
							}
							_ = raws
							n := 0
							for _, m := range msgs {
								if m.Type != sink.TypeBatch {
									continue
								}
								n++
								if m.Batch.Size > tc.B {
									t.Fatalf("%v: a batch of %d", sh, m.Batch.Size)
								}
								e := m.Batch.Meta.Epoch
								if served[e] == nil {
									served[e] = map[int64]int{}
								}
								for _, ix := range batchIndexes(t, m.Batch) {
									served[e][ix]++
								}
							}
							counts = append(counts, n)
							st, err := Train(context.Background(), tc.cfg, StreamOptions{BatchSize: tc.B}, to, sink.Discard())
							if err != nil {
								t.Fatal(err)
							}
							if unserved != 0 && st.Unserved != unserved {
								t.Fatalf("%v: consumers report %d and %d unserved frames", sh, unserved, st.Unserved)
							}
							unserved = st.Unserved
						}
					}
					for _, n := range counts {
						if n != counts[0] || n == 0 {
							t.Fatalf("%v: batch counts %v", sh, counts)
						}
					}
					for e := int64(0); e < 2; e++ {
						for ix, n := range served[e] {
							if n != 1 || !kept[ix] {
								t.Fatalf("%v epoch %d: frame %d served %d times (kept %v)", sh, e, ix, n, kept[ix])
							}
						}
						left := len(kept) - len(served[e])
						if left < 0 || left >= C*tc.B {
							t.Fatalf("%v epoch %d: %d of %d kept frames not served, want fewer than %d consumers × %d", sh, e, left, len(kept), C, tc.B)
						}
						if tc.cfg.Mode != render.ModeDrop && unserved != 2*int64(left) && e == 1 {
							t.Fatalf("%v: Stats.Unserved %d over 2 epochs, the epochs left %d out each", sh, unserved, left)
						}
					}
					t.Logf("%s %v: %d batches per consumer, %d frames unserved over 2 epochs", ord, sh, counts[0], unserved)
				}
			})
		})
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
		// C consumers serve the first nb - nb mod C global batches.
		C := int64(sh.R * sh.W)
		served := int64(len(want[0])) / C * C
		for g := int64(0); g < int64(len(want[0])); g++ {
			b, ok := got[0][g]
			if (g < 8 || g >= served) && ok {
				t.Fatalf("%v: resumed stream repeats global batch %d, or serves one past %d", sh, g, served)
			}
			if g >= 8 && g < served && (!ok || !slices.Equal(b, want[0][g])) {
				t.Fatalf("%v: resumed stream lost or changed global batch %d", sh, g)
			}
		}
		if int64(len(got[1])) != int64(len(want[1]))/C*C {
			t.Fatalf("%v: epoch 1 has %d batches, want %d", sh, len(got[1]), int64(len(want[1]))/C*C)
		}
	}
}

func TestPartitionedRefusesShapes(t *testing.T) {
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 8}
	for _, tc := range []struct {
		to   TrainOptions
		B    int // batch size, 8 when 0
		want string
	}{
		{TrainOptions{Order: OrderPartitioned, Partitions: 6, Consumers: 4, Epochs: 1}, 0, "must divide --partitions 6"},
		{TrainOptions{Order: OrderPartitioned, Partitions: 6, Consumers: 1, Epochs: 1, Shuffle: true}, 0, ""},
		// More partitions than episodes: partitions split episodes.
		{TrainOptions{Order: OrderPartitioned, Partitions: 24, Consumers: 1, Epochs: 1, Shuffle: true}, 0, ""},
		// The error says how big the selection is.
		{TrainOptions{Order: OrderPartitioned, Partitions: 24, Consumers: 2, Epochs: 1}, 600, "an epoch has 1175 frames in 12 episodes: 1 batches of 600 cannot give each of 2 consumers a batch"},
		{TrainOptions{Order: "random", Epochs: 1}, 0, "unknown order"},
	} {
		so := so
		if tc.B > 0 {
			so.BatchSize = tc.B
		}
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
			parts, _ := partitionEpisodes(cfg, 1, 0, 6, 8)
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
		// together open every row group once, and those of an episode
		// two partitions of different consumers split twice.
		if C == 1 {
			all = units
		} else if units < all || units > all+5 {
			t.Fatalf("C=%d: consumers open %d row groups in all, one consumer %d (at most 5 split episodes)", C, units, all)
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
		// C consumers serve the first nb - nb mod C global batches.
		perRank := int64(len(want[e])) / int64(sh.R*sh.W) * int64(sh.W)
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
			// One consumer serves every global batch; C serve the first
			// nb - nb mod C of them.
			C := int64(sh.R * sh.W)
			served := int64(len(want[0])) / C * C
			for g := int64(0); g < int64(len(want[0])); g++ {
				b, ok := got[0][g]
				if (g < next || g >= served) && ok {
					t.Fatalf("%v: resumed stream repeats global batch %d, or serves one past %d", sh, g, served)
				}
				if g >= next && g < served && (!ok || !slices.Equal(b, want[0][g])) {
					t.Fatalf("%v: resumed stream lost or changed global batch %d", sh, g)
				}
			}
			if int64(len(got[1])) != int64(len(want[1]))/C*C {
				t.Fatalf("%v: epoch 1 has %d batches, want %d", sh, len(got[1]), int64(len(want[1]))/C*C)
			}
			for g, b := range got[1] {
				if !slices.Equal(b, want[1][g]) {
					t.Fatalf("%v: epoch 1 global batch %d differs", sh, g)
				}
			}
		}
	})
}
