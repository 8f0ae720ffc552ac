package pipeline

import (
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/sink"
)

// shape is a cluster shape: ranks × dataloader workers.
type shape struct{ R, W int }

// partOptions returns the partitioned-order options of rank r, worker w.
func partOptions(base TrainOptions, sh shape, r, w int) TrainOptions {
	to := base
	to.Order, to.WorldSize = OrderPartitioned, sh.R
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

// ownStart is the first own batch of a consumer resuming from base.Resume.
func ownStart(base TrainOptions, epoch, slot, C int64) int64 {
	if base.Resume == "" {
		return 0
	}
	tk, _ := parseToken(base.Resume)
	if tk.Epoch != epoch {
		return 0
	}
	return max(0, (tk.Batch-slot+C-1)/C)
}

func TestPartitionedOrderInvariantToShape(t *testing.T) {
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 8}
	base := TrainOptions{Shuffle: true, Seed: 9, BufferSize: 64, Epochs: 2, Partitions: 6}
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
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 8}
	base := TrainOptions{Shuffle: true, Seed: 3, BufferSize: 32, Epochs: 2, Partitions: 6}
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
				if !want[r.episode] {
					t.Fatalf("C=%d consumer %d plans episode %d of another partition", C, c, r.episode)
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

// storageCount counts what one consumer reads from its source: bytes of
// data files' footers and of their row groups.
type storageCount struct {
	footer, data atomic.Int64
	tails        map[string]int64 // file -> footer bytes (with the length and magic)
}

type storageSource struct {
	fetch.Source
	c *storageCount
}

func (s storageSource) Open(ctx context.Context, name string) (fetch.File, error) {
	f, err := s.Source.Open(ctx, name)
	if err != nil || !strings.HasPrefix(name, "data/") {
		return f, err
	}
	return storageFile{f, s.c, f.Size() - s.c.tails[name]}, nil
}

type storageFile struct {
	fetch.File
	c      *storageCount
	footer int64 // offset where the footer starts
}

func (f storageFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	end := off + int64(n)
	if end > f.footer {
		from := max(off, f.footer)
		f.c.footer.Add(end - from)
		end = from
	}
	if end > off {
		f.c.data.Add(end - off)
	}
	return n, err
}

// footerTails returns each data file's footer size (parquet: footer,
// 4-byte length, "PAR1").
func footerTails(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(filepath.Join(dir, "data"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = int64(binary.LittleEndian.Uint32(b[len(b)-8:])) + 8
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStorageBytesPerConsumer measures, as consumers grow 1 → 64, the
// bytes each consumer reads from storage (the source: what a Hub range
// stream fetches) and the frames it decodes, for both orders: the
// partitioned order's consumers read about 1/C each and 1× in total
// (plus every file's footer per consumer), the global order's C× in
// total. go test -run TestStorageBytesPerConsumer -v prints the table of
// docs/training.md.
func TestStorageBytesPerConsumer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	if _, err := datagen.Generate(context.Background(), dir, datagen.Options{Episodes: 128, MinFrames: 40, MaxFrames: 60,
		FramesPerFile: 1200, Cameras: []string{}, Dim: 6, Tasks: 3, Seed: 2, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	tails := footerTails(t, dir)
	base := datasetConfig(t, dir, demoConfig(t, render.ModeFallback).Recipe)
	so := StreamOptions{BatchSize: 4}
	var total int64
	for _, e := range base.Dataset.Episodes {
		total += e.Length
	}
	type result struct {
		data, footer, maxData, maxFrames, served int64
	}
	run := func(order string, C int) result {
		var r result
		for c := 0; c < C; c++ {
			cnt := &storageCount{tails: tails}
			cfg := *base
			cfg.Source = storageSource{base.Source, cnt}
			cfg.Workers = 1
			to := TrainOptions{Shuffle: true, Seed: 1, BufferSize: 256, Epochs: 1, Order: order, Partitions: 64,
				Consumers: C, Consumer: c, WorldSize: C}
			st, err := Train(context.Background(), &cfg, so, to, sink.Discard())
			if err != nil {
				t.Fatalf("%s C=%d consumer %d: %v", order, C, c, err)
			}
			r.data += cnt.data.Load()
			r.footer += cnt.footer.Load()
			r.maxData = max(r.maxData, cnt.data.Load())
			r.maxFrames = max(r.maxFrames, st.Frames)
			r.served += st.Frames
		}
		return r
	}
	// The projected columns, read once: a plain pass.
	plain := &storageCount{tails: tails}
	pc := *base
	pc.Source = storageSource{base.Source, plain}
	if _, err := Stream(context.Background(), &pc, so, sink.Discard()); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d frames, %d data files, projected columns %d bytes (a plain pass); bytes of row groups read (× one consumer's), footer bytes, frames served", total, len(tails), plain.data.Load())
	one := run(OrderPartitioned, 1)
	gone := run(OrderGlobal, 1)
	// A consumer reads the language columns twice (the keep index, then
	// its batches) and the other projected columns once.
	ratio := float64(one.data) / float64(plain.data.Load())
	t.Logf("one consumer reads %.2f× the projected columns", ratio)
	if ratio < 1 || ratio > 2 {
		t.Errorf("one consumer reads %.2f× the projected columns, want 1-2×", ratio)
	}
	t.Logf("| consumers | partitioned: total | per consumer (max) | footers | frames per consumer (max) | global: total | per consumer (max) |")
	for _, C := range []int{1, 2, 8, 64} {
		p := run(OrderPartitioned, C)
		var g result
		if C <= 2 { // the global order's cost is C× one consumer's: two points show it
			g = run(OrderGlobal, C)
		}
		t.Logf("| %d | %d (%.2f×) | %d (%.3f×) | %d | %d (%.3f of %d) | %d (%.2f×) | %d |", C,
			p.data, float64(p.data)/float64(one.data), p.maxData, float64(p.maxData)/float64(one.data), p.footer,
			p.maxFrames, float64(p.maxFrames)/float64(one.served), one.served,
			g.data, float64(g.data)/float64(gone.data), g.maxData)
		// Every consumer's row groups together are read about once...
		if float64(p.data) > 1.05*float64(one.data) {
			t.Errorf("partitioned C=%d: %d row group bytes in all, one consumer reads %d", C, p.data, one.data)
		}
		// ... each consumer reads and serves about 1/C (partitions are
		// balanced by frames, not bytes: 1.5/C allows for that).
		if float64(p.maxData) > 1.5*float64(one.data)/float64(C) || float64(p.maxFrames) > 1.5*float64(one.served)/float64(C) {
			t.Errorf("partitioned C=%d: a consumer reads %d bytes and serves %d frames, one consumer %d and %d", C, p.maxData, p.maxFrames, one.data, one.served)
		}
		// The global order: every consumer reads nearly everything.
		if C > 1 && g.data != 0 && float64(g.data) < 0.8*float64(C)*float64(gone.data) {
			t.Errorf("global C=%d: %d bytes in all, expected about %d× %d", C, g.data, C, gone.data)
		}
	}
}

// TestPartitionedPosition: under the partitioned order a hello position
// (epoch, next) resumes exactly: rank r's worker w asking for index
// next+w serves the rank's batches next+w, next+w+W, ... of the epoch
// (rank-sequence index m is global batch m*R + r), so the workers read
// round-robin continue the rank's sequence at next, on any epoch.
func TestPartitionedPosition(t *testing.T) {
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 8}
	base := TrainOptions{Shuffle: true, Seed: 6, BufferSize: 48, Epochs: 2, Partitions: 6}
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
