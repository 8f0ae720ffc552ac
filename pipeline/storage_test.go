package pipeline

import (
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/fakehub"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

// storageCount counts the row-group bytes read from a local source (the
// projected columns a plain pass reads).
type storageCount struct {
	data  atomic.Int64
	tails map[string]int64 // file -> footer bytes (with the length and magic)
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
	if end := min(off+int64(n), f.footer); end > off {
		f.c.data.Add(end - off)
	}
	return n, err
}

// footerTails returns each data file's footer size (parquet: footer,
// 4-byte length, "PAR1") and size.
func footerTails(t *testing.T, dir string) (tails, sizes map[string]int64) {
	t.Helper()
	tails, sizes = map[string]int64{}, map[string]int64{}
	err := filepath.WalkDir(filepath.Join(dir, "data"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		tails[filepath.ToSlash(rel)] = int64(binary.LittleEndian.Uint32(b[len(b)-8:])) + 8
		sizes[filepath.ToSlash(rel)] = int64(len(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tails, sizes
}

// TestStorageBytesPerConsumer measures, through the fake Hub with
// --download none (HTTP range reads), the bytes the Hub serves as
// consumers grow 1 → 64, per consumer and in total, split into footer
// fetches (the file's last 64 KiB, footer included) and the rest (row
// groups' column chunks and the gaps merged between them), and the frames
// each consumer decodes.
// Consumers are grouped into nodes of 8: each node runs one `serve` (one
// Hub source, one footer store, one cache directory) whose clients are
// its consumers; one row instead runs each consumer as its own process
// (own source and store) on the node's cache. The partitioned order
// reads the row groups about once in all, whatever C, and footers once
// per node; the global order reads everything per consumer.
// go test ./pipeline -run TestStorageBytesPerConsumer -v prints the table
// of docs/training.md.
func TestStorageBytesPerConsumer(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ds")
	if _, err := datagen.Generate(ctx, dir, datagen.Options{Episodes: 128, MinFrames: 40, MaxFrames: 60,
		FramesPerFile: 1200, Cameras: []string{}, Dim: 6, Tasks: 3, Seed: 2, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	tails, sizes := footerTails(t, dir)
	var allFooters int64
	for _, n := range tails {
		allFooters += n
	}
	rec := demoConfig(t, render.ModeFallback).Recipe
	local := datasetConfig(t, dir, rec)
	so := StreamOptions{BatchSize: 4}
	// The projected columns, read once: a plain local pass.
	plain := &storageCount{tails: tails}
	pc := *local
	pc.Source = storageSource{local.Source, plain}
	if _, err := Stream(ctx, &pc, so, sink.Discard()); err != nil {
		t.Fatal(err)
	}
	projected := plain.data.Load()

	hub := fakehub.New(t, dir, fakehub.Options{ID: "org/storage"})
	// skipErrors runs the consumers with --on-error skip, which needs the
	// keep pass (a failed frame is not served); with --on-error fail (the
	// default) --mode fallback keeps every frame and the keep index comes
	// from metadata.
	skipErrors := false
	mode := render.ModeFallback // --mode drop needs the keep pass too
	// openNode opens the dataset as one process of a node does: its own
	// Hub source and footer store, on the node's cache directory.
	openNode := func(cache string) *Config {
		t.Helper()
		src, err := fetch.OpenHub(ctx, "org/storage", fetch.HubOptions{Endpoint: hub.URL(), CacheDir: cache, Cache: fetch.CacheNone})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := shard.OpenDataset(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		return &Config{Source: src, Dataset: ds, Recipe: rec, Mode: mode, SkipErrors: skipErrors, Workers: 1, Footers: shard.NewFooters(0)}
	}
	// served returns the data files' bytes the Hub served since the last
	// call: in footer fetches (a request reaching into the footer: the
	// file's last 64 KiB, fetch.HubOptions.FooterSize, footer included),
	// and the rest (row groups' column chunks and the gaps merged between
	// them).
	served := func() (data, footer int64) {
		for path, spans := range hub.ServedSpans() {
			if !strings.HasPrefix(path, "data/") {
				continue
			}
			from := sizes[path] - tails[path]
			for _, s := range spans {
				if s.Off+s.Len > from {
					footer += s.Len // the footer fetch: the file's last 64 KiB
				} else {
					data += s.Len
				}
			}
		}
		hub.ResetServed()
		return data, footer
	}
	type result struct {
		data, footer, maxData, maxFrames, frames int64
		nodes                                    int
	}
	const perNode = 8
	run := func(order string, C int, processes bool, epochs int64) result {
		var r result
		var cfg *Config
		var cache string
		for c := 0; c < C; c++ {
			if c%perNode == 0 {
				cache = t.TempDir()
				r.nodes++
			}
			if c%perNode == 0 || processes {
				cfg = openNode(cache)
				served() // the metadata is not counted
			}
			to := TrainOptions{Shuffle: true, Seed: 1, BufferSize: 256, Epochs: epochs, Order: order, Partitions: 64,
				Consumers: C, Consumer: c, WorldSize: C}
			st, err := Train(ctx, cfg, so, to, sink.Discard())
			if err != nil {
				t.Fatalf("%s C=%d consumer %d: %v", order, C, c, err)
			}
			d, f := served()
			r.data += d
			r.footer += f
			r.maxData = max(r.maxData, d)
			r.maxFrames = max(r.maxFrames, st.Frames)
			r.frames += st.Frames
		}
		return r
	}
	t.Logf("%d frames, %d data files (%d bytes of footers), projected columns %d bytes (a plain pass)", local.Dataset.Info.TotalFrames, len(tails), allFooters, projected)
	one := run(OrderPartitioned, 1, false, 1)
	gone := run(OrderGlobal, 1, false, 1)
	t.Logf("one consumer: %d row-group bytes (%.2f× the projected columns), %d of footer fetches", one.data, float64(one.data)/float64(projected), one.footer)
	// In --mode fallback with --on-error fail every frame is kept: the
	// keep index comes from metadata and a consumer reads the projected
	// columns once.
	if r := float64(one.data) / float64(projected); r < 1 || r > 1.02 {
		t.Errorf("one consumer reads %.3f× the projected columns, want 1.00×", r)
	}
	if r := float64(gone.data) / float64(projected); r < 1 || r > 1.02 {
		t.Errorf("global order, one consumer: reads %.3f× the projected columns, want 1.00×", r)
	}
	// With the keep pass (--on-error skip here; also --mode drop) a
	// consumer reads the language columns twice (the keep index, then its
	// batches) and the other projected columns once, plus the gaps merged
	// between column chunks.
	skipErrors = true
	onePass := run(OrderPartitioned, 1, false, 1)
	gonePass := run(OrderGlobal, 1, false, 1)
	skipErrors = false
	t.Logf("one consumer with the keep pass (--on-error skip): %d row-group bytes (%.2f× the projected columns), global %d (%.2f×)",
		onePass.data, float64(onePass.data)/float64(projected), gonePass.data, float64(gonePass.data)/float64(projected))
	if r := float64(onePass.data) / float64(projected); r < 1.1 || r > 2 {
		t.Errorf("one consumer with the keep pass reads %.2f× the projected columns, want 1.1-2×", r)
	}
	mode = render.ModeDrop
	gdrop := run(OrderGlobal, 1, false, 1)
	mode = render.ModeFallback
	t.Logf("one consumer of the global order with --mode drop: %d row-group bytes (%.2f×)", gdrop.data, float64(gdrop.data)/float64(projected))
	if gonePass.data != onePass.data || gdrop.data != onePass.data {
		t.Errorf("one consumer with the keep pass: global order %d bytes (--mode drop %d), partitioned %d", gonePass.data, gdrop.data, onePass.data)
	}
	tailFetch := one.footer // each file's footer fetch, once
	if one.footer < allFooters || one.footer > int64(len(tails))*(64<<10) {
		t.Errorf("one consumer: %d footer fetch bytes, want each file's once (footers %d)", one.footer, allFooters)
	}
	// Partitions hold whole batches, so each of the P-1 edges between
	// them may split an episode, whose row group (one per episode here)
	// both neighbours read: at most (1 + (P-1)/E)× in all (1.49× at the
	// P = 64 of this 128-episode dataset; 1.05× at 20 episodes a
	// partition), and (E/C + 2P/C) episodes a consumer.
	const P, E = 64, 128
	edges := 1 + 1.1*float64(P-1)/E
	perCons := func(C int) float64 { return 1.5 * float64(one.data) / float64(C) * (1 + 2*float64(P)/E) }
	t.Logf("| consumers (nodes) | partitioned: row-group bytes, all consumers | per consumer (max) | footer fetches, all consumers | frames decoded per consumer (max) | stratified: row-group bytes, all consumers (per consumer, max) | global: row-group bytes, all consumers |")
	for _, C := range []int{1, 2, 8, 64} {
		p := run(OrderPartitioned, C, false, 1)
		// The stratified order reads the partitioned order's share (the
		// same partitions).
		s := run(OrderStratified, C, false, 1)
		if float64(s.data) > edges*float64(one.data) || float64(s.maxData) > perCons(C) || s.frames != p.frames {
			t.Errorf("stratified C=%d: %d row-group bytes in all (%d at most per consumer), %d frames; one consumer reads %d, the partitioned order %d frames", C, s.data, s.maxData, s.frames, one.data, p.frames)
		}
		g := "not run"
		if C <= 2 { // the global order's cost is C× one consumer's: two points show it
			gr := run(OrderGlobal, C, false, 1)
			g = fmtBytes(gr.data, gone.data)
			if C > 1 && float64(gr.data) < 0.8*float64(C)*float64(gone.data) {
				t.Errorf("global C=%d: %d bytes in all, expected about %d× %d", C, gr.data, C, gone.data)
			}
		}
		t.Logf("| %d (%d) | %s | %s | %s (%.2f× the footers) | %d (%.3f of %d) | %s (%s) | %s |", C, p.nodes,
			fmtBytes(p.data, one.data), fmtBytes(p.maxData, one.data), formatInt(p.footer), float64(p.footer)/float64(allFooters),
			p.maxFrames, float64(p.maxFrames)/float64(one.frames), one.frames, fmtBytes(s.data, one.data), fmtBytes(s.maxData, one.data), g)
		// Every consumer's row groups together are read about once (1×
		// one consumer's: the projected columns, see above; the edges'
		// episodes twice) ...
		if float64(p.data) > edges*float64(one.data) {
			t.Errorf("partitioned C=%d: %d row-group bytes in all, one consumer reads %d", C, p.data, one.data)
		}
		// ... every frame but fewer than C × batch is served once ...
		if total := local.Dataset.Info.TotalFrames; p.frames > total || p.frames <= total-int64(C*so.BatchSize) {
			t.Errorf("partitioned C=%d: %d frames served of %d, want all but fewer than %d × %d", C, p.frames, total, C, so.BatchSize)
		}
		// ... each consumer reads and decodes about 1/C (partitions are
		// balanced by frames, not bytes: 1.5/C allows for that) ...
		if float64(p.maxData) > perCons(C) || float64(p.maxFrames) > 1.5*float64(one.frames)/float64(C) {
			t.Errorf("partitioned C=%d: a consumer reads %d bytes and decodes %d frames, one consumer %d and %d", C, p.maxData, p.maxFrames, one.data, one.frames)
		}
		// ... and footers at most once per node.
		if p.footer > int64(p.nodes)*tailFetch {
			t.Errorf("partitioned C=%d: %d footer fetch bytes, more than once per node (%d nodes × %d)", C, p.footer, p.nodes, tailFetch)
		}
	}
	// Eight processes on one node (no shared server): footers once, through
	// the node's cache.
	pr := run(OrderPartitioned, 8, true, 1)
	t.Logf("8 processes on one node: %d row-group bytes, %d of footer fetches (%.2f× the files' footers)", pr.data, pr.footer, float64(pr.footer)/float64(allFooters))
	if pr.footer > tailFetch {
		t.Errorf("8 processes on one node: %d footer fetch bytes, more than once per file (%d)", pr.footer, tailFetch)
	}
	// Two epochs, one consumer: the second epoch reads the projected
	// columns once too (with the keep pass it reuses the keep bits, see
	// below).
	two := run(OrderPartitioned, 1, false, 2)
	second := two.data - one.data
	t.Logf("one consumer, 2 epochs: %d row-group bytes; the second epoch %d (%.2f× the projected columns), footers %d", two.data, second, float64(second)/float64(projected), two.footer)
	if float64(second) > 1.15*float64(projected) {
		t.Errorf("the second epoch reads %d bytes, more than the projected columns once (%d): the keep index was rebuilt", second, projected)
	}
	if two.footer != tailFetch {
		t.Errorf("2 epochs: %d footer fetch bytes, want each file's once (%d)", two.footer, tailFetch)
	}
	// With the keep pass the second epoch reuses the keep bits of the
	// first (keepMemo): its language columns are read once, with the
	// batches.
	skipErrors = true
	twoPass := run(OrderPartitioned, 1, false, 2)
	skipErrors = false
	secondPass := twoPass.data - onePass.data
	t.Logf("one consumer with the keep pass, 2 epochs: the second epoch %d (%.2f× the projected columns)", secondPass, float64(secondPass)/float64(projected))
	if float64(secondPass) > 1.15*float64(projected) {
		t.Errorf("with the keep pass the second epoch reads %d bytes, more than the projected columns once (%d): the keep index was rebuilt", secondPass, projected)
	}
}

// fmtBytes formats n and its ratio to base.
func fmtBytes(n, base int64) string {
	return formatInt(n) + " (" + formatRatio(float64(n)/float64(base)) + "×)"
}

func formatInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func formatRatio(r float64) string { return strconv.FormatFloat(r, 'f', 3, 64) }
