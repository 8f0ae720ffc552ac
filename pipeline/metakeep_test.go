package pipeline

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

// metaCases are configurations whose keep index follows from metadata
// (fallback mode, --on-error fail, every task with a text) or not (ok).
func metaCases(t *testing.T) []struct {
	name string
	srcs []Mix
	ok   bool
} {
	t.Helper()
	gen := filepath.Join(t.TempDir(), "gen")
	if _, err := datagen.Generate(context.Background(), gen, datagen.Options{Episodes: 30, MinFrames: 20, MaxFrames: 45,
		FramesPerFile: 300, Cameras: []string{}, Dim: 4, Tasks: 3, Seed: 4, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	gen2 := filepath.Join(t.TempDir(), "gen2")
	if _, err := datagen.Generate(context.Background(), gen2, datagen.Options{Episodes: 12, MinFrames: 30, MaxFrames: 50,
		FramesPerFile: 200, Cameras: []string{}, Dim: 4, Tasks: 2, Seed: 5, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	rec, err := render.LoadFile(filepath.Join(sharedDir(t), "recipes", "subtask.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	failing := func(c *Config) *Config { c.SkipErrors = false; return c }
	rechunked := t.TempDir()
	rechunk(t, filepath.Join(conformanceDatasets(t), "pub_jsonext_front_wrist"), rechunked, 23)
	g := failing(datasetConfig(t, gen, rec))
	g2 := failing(datasetConfig(t, gen2, rec))
	sel := *g
	sel.Selection = shard.Selection{Episodes: shard.Ranges{{Lo: 3, Hi: 11}, {Lo: 20, Hi: 24}}}
	exc := *g
	exc.Selection = shard.Selection{Exclude: shard.Ranges{{Lo: 0, Hi: 4}}}
	rc := failing(datasetConfig(t, rechunked, rec))
	rcSel := *rc
	rcSel.Selection = shard.Selection{Episodes: shard.Ranges{{Lo: 1, Hi: 2}}}
	drop := *g
	drop.Mode = render.ModeDrop
	skip := *g
	skip.SkipErrors = true
	noTask := *g
	ds := *g.Dataset
	ds.Tasks = slices.Clone(ds.Tasks)
	ds.Tasks[1].Text = ""
	noTask.Dataset = &ds
	demo := demoConfig(t, render.ModeFallback)
	conf := failing(datasetConfig(t, filepath.Join(conformanceDatasets(t), "pub_jsonext_front_wrist"), rec))
	real1 := failing(datasetConfig(t, filepath.Join(sharedDir(t), "datasets", "real", "yipiandanxinxiangyangkai__open_50"), rec))
	real2 := failing(datasetConfig(t, filepath.Join(sharedDir(t), "datasets", "real", "SamueleSandrini__record-test"), rec))
	real1Sel := *real1
	real1Sel.Selection = shard.Selection{Episodes: shard.Ranges{{Lo: 5, Hi: 9}, {Lo: 30, Hi: 30}}}
	return []struct {
		name string
		srcs []Mix
		ok   bool
	}{
		{"generated", []Mix{{Config: g, Weight: 1}}, true},
		{"selection", []Mix{{Config: &sel, Weight: 1}}, true},
		{"exclude", []Mix{{Config: &exc, Weight: 1}}, true},
		{"demo", []Mix{{Config: demo, Weight: 1}}, true},
		{"conformance", []Mix{{Config: conf, Weight: 1}}, true},
		{"real open_50", []Mix{{Config: real1, Weight: 1}}, true},
		{"real open_50 selection", []Mix{{Config: &real1Sel, Weight: 1}}, true},
		{"real record-test", []Mix{{Config: real2, Weight: 1}}, true},
		// Episodes across row groups (multi-unit groups), and several
		// episodes a row group.
		{"rechunked", []Mix{{Config: rc, Weight: 1}}, true},
		// A row group read partially: the keep pass.
		{"rechunked selection", []Mix{{Config: &rcSel, Weight: 1}}, false},
		{"mixture", []Mix{{Config: g, Weight: 0.6, Name: "a"}, {Config: g2, Weight: 0.4, Name: "b"}}, true},
		{"drop mode", []Mix{{Config: &drop, Weight: 1}}, false},
		{"on-error skip", []Mix{{Config: &skip, Weight: 1}}, false},
		{"task without text", []Mix{{Config: &noTask, Weight: 1}}, false},
		{"mixture with drop mode", []Mix{{Config: g, Weight: 1, Name: "a"}, {Config: &drop, Weight: 1, Name: "b"}}, false},
	}
}

// TestMetaKeepIndexMatchesPass checks that the keep index built from
// metadata is the keep pass's, position for position, wherever it is used,
// and that configurations that can drop a frame keep the pass.
func TestMetaKeepIndexMatchesPass(t *testing.T) {
	ctx := context.Background()
	for _, tc := range metaCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := metaKeepIndex(ctx, tc.srcs)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok {
				t.Fatalf("metaKeepIndex ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			want, err := buildKeepIndex(ctx, tc.srcs)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.units) != len(want.units) || !slices.Equal(got.src, want.src) || !slices.Equal(got.unitStart, want.unitStart) {
				t.Fatalf("groups differ: %d groups starting at %v, the pass %d at %v", len(got.units), got.unitStart, len(want.units), want.unitStart)
			}
			for i := range got.units {
				if len(got.units[i]) != len(want.units[i]) {
					t.Fatalf("group %d: %d units, the pass %d", i, len(got.units[i]), len(want.units[i]))
				}
				for k, u := range got.units[i] {
					w := want.units[i][k]
					if u.File != w.File || u.RowGroup != w.RowGroup || !slices.Equal(u.Episodes, w.Episodes) {
						t.Fatalf("group %d unit %d: %s/%d %v, the pass %s/%d %v", i, k, u.File, u.RowGroup, u.Episodes, w.File, w.RowGroup, w.Episodes)
					}
				}
			}
			for d := range got.runs {
				if !slices.Equal(got.runs[d], want.runs[d]) {
					t.Fatalf("source %d: runs differ:\n%v\n%v", d, got.runs[d], want.runs[d])
				}
			}
			if !slices.Equal(got.keep, want.keep) || len(want.failed) != 0 {
				t.Fatalf("keep bits differ (%d failed in the pass)", len(want.failed))
			}
		})
	}
}

// TestTrainMetaKeepIdentical checks that the streams (header, every batch
// of every epoch with its resume token, end) are byte-identical with the
// keep pass forced on and off, for the global and partitioned orders,
// several cluster shapes, resumes and positions.
func TestTrainMetaKeepIdentical(t *testing.T) {
	cases := metaCases(t)
	byName := map[string][]Mix{}
	for _, c := range cases {
		byName[c.name] = c.srcs
	}
	type run struct {
		name string
		srcs []Mix
		so   StreamOptions
		to   TrainOptions
	}
	var runs []run
	deltas, err := ParseDeltaTimestamps("action=-2:3/10,observation.state=-1/10,0")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"generated", "selection", "rechunked", "demo"} {
		srcs := byName[name]
		for _, order := range []string{OrderGlobal, OrderPartitioned} {
			for _, sh := range []shape{{1, 1}, {2, 3}} {
				base := TrainOptions{Shuffle: true, Seed: 3, BufferSize: 48, Epochs: 2, Order: order, Partitions: 6}
				if name == "rechunked" {
					base.Partitions = 2
				}
				if order == OrderPartitioned && base.Partitions%(sh.R*sh.W) != 0 {
					continue
				}
				for r := 0; r < sh.R; r++ {
					for w := 0; w < sh.W; w++ {
						to := partOptions(base, sh, r, w)
						to.Order = order
						runs = append(runs, run{name, srcs, StreamOptions{BatchSize: 5}, to})
					}
				}
			}
		}
	}
	// Deltas and kept language; unshuffled; a mixture (global only).
	dl := *byName["rechunked"][0].Config
	dl.Deltas = deltas
	runs = append(runs,
		run{"deltas", []Mix{{Config: &dl, Weight: 1}}, StreamOptions{BatchSize: 7, KeepLanguage: true}, TrainOptions{Shuffle: true, Seed: 1, BufferSize: 30, Epochs: 2}},
		run{"deltas partitioned", []Mix{{Config: &dl, Weight: 1}}, StreamOptions{BatchSize: 7, KeepLanguage: true}, TrainOptions{Shuffle: true, Seed: 1, BufferSize: 30, Epochs: 2, Order: OrderPartitioned, Partitions: 2}},
		run{"unshuffled", byName["generated"], StreamOptions{BatchSize: 9, DropLast: true}, TrainOptions{Epochs: 2, Consumers: 3, Consumer: 1}},
		run{"real, partitioned", byName["real open_50"], StreamOptions{BatchSize: 32}, TrainOptions{Shuffle: true, Seed: 4, BufferSize: 500, Epochs: 2, Order: OrderPartitioned, Partitions: 6, Consumers: 2, Consumer: 1, WorldSize: 2}},
		run{"mixture", byName["mixture"], StreamOptions{BatchSize: 6}, TrainOptions{Shuffle: true, Seed: 2, BufferSize: 40, Epochs: 2, Consumers: 2, Consumer: 1}},
	)
	compare := func(t *testing.T, r run) [][]byte {
		t.Helper()
		pass := r.to
		pass.keepPass = true
		want, _, err := trainRaw(t, r.srcs, r.so, pass)
		if err != nil {
			t.Fatalf("%s %+v, keep pass: %v", r.name, r.to, err)
		}
		got, _, err := trainRaw(t, r.srcs, r.so, r.to)
		if err != nil {
			t.Fatalf("%s %+v, from metadata: %v", r.name, r.to, err)
		}
		if len(got) != len(want) || len(want) < 3 {
			t.Fatalf("%s %+v: %d messages from metadata, %d with the keep pass", r.name, r.to, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%s %+v: message %d differs", r.name, r.to, i)
			}
		}
		return want
	}
	for _, r := range runs {
		msgs := compare(t, r)
		// Resume from a batch in the middle (its token), and from a
		// position, both ways.
		var d *sink.DecodedBatch
		if m, err := sink.NewDecoder(bytes.NewReader(msgs[len(msgs)/2])).Next(); err == nil && m.Batch != nil {
			d = m.Batch
		}
		if d == nil {
			continue
		}
		res := r
		res.to.Resume = d.Meta.Resume
		compare(t, res)
		if len(r.srcs) == 1 && r.to.WorldSize <= 1 {
			pos := r
			pos.to.Position = &sink.Position{Epoch: 1, Next: 1}
			pos.to.Workers = max(1, r.to.Consumers)
			pos.to.WorldSize = 1
			compare(t, pos)
		}
	}
}

// TestTrainMetaKeepRenderFailure checks that with the keep index from
// metadata, a frame whose rendering fails fails the stream, in-band, with
// the keep pass's error (naming file, row group, episode and index), after
// the batches before it, never skipping or shifting a batch.
func TestTrainMetaKeepRenderFailure(t *testing.T) {
	rec, err := render.LoadFile(filepath.Join(sharedDir(t), "recipes", "subtask_mem.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := datasetConfig(t, filepath.Join(conformanceDatasets(t), "pub_documented_top_wrist"), rec)
	cfg.SkipErrors = false
	srcs := []Mix{{Config: cfg, Weight: 1}}
	if _, ok, err := metaKeepIndex(context.Background(), srcs); err != nil || !ok {
		t.Fatalf("metaKeepIndex: ok %v, %v", ok, err)
	}
	// The same recipe skipping failures: the frames served before the
	// first failure.
	for _, order := range []string{OrderGlobal, OrderPartitioned} {
		to := TrainOptions{Epochs: 1, Order: order, Partitions: 1}
		pass := to
		pass.keepPass = true
		_, _, passErr := trainRaw(t, srcs, StreamOptions{BatchSize: 4}, pass)
		if passErr == nil {
			t.Fatal("the keep pass did not fail")
		}
		_, msgs, metaErr := trainRaw(t, srcs, StreamOptions{BatchSize: 4}, to)
		if metaErr == nil || metaErr.Error() != passErr.Error() {
			t.Fatalf("%s: error from metadata %v, the keep pass's %v", order, metaErr, passErr)
		}
		var fe *FrameError
		if !errors.As(metaErr, &fe) || !strings.Contains(metaErr.Error(), fe.File) {
			t.Fatalf("%s: %v does not locate the frame", order, metaErr)
		}
		last := msgs[len(msgs)-1]
		if last.Type != sink.TypeError || last.Error != metaErr.Error() {
			t.Fatalf("%s: last message %s %q, want the error in-band", order, last.Type, last.Error)
		}
		// Every batch before the failure holds frames in plan order
		// (unshuffled), up to the failing frame.
		var served []int64
		for _, m := range msgs {
			if m.Batch != nil {
				served = append(served, batchIndexes(t, m.Batch)...)
			}
		}
		seen := map[int64]bool{}
		for i, ix := range served {
			if seen[ix] || ix == fe.Index || (order == OrderGlobal && i > 0 && ix != served[i-1]+1) {
				t.Fatalf("%s: served %v before the failure at index %d", order, served, fe.Index)
			}
			seen[ix] = true
		}
		if order == OrderGlobal && len(served) > 0 && served[len(served)-1] >= fe.Index {
			t.Fatalf("%s: served %v before the failure at index %d", order, served, fe.Index)
		}
	}
}

// TestTrainMetaKeepIndexMismatch checks that an episodes index whose
// lengths do not describe the data files (here two episodes of one row
// group with their lengths swapped: the group's row count still matches)
// fails the stream, naming the row, instead of serving a shifted order.
func TestTrainMetaKeepIndexMismatch(t *testing.T) {
	rec, err := render.LoadFile(filepath.Join(sharedDir(t), "recipes", "subtask.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rechunk(t, filepath.Join(conformanceDatasets(t), "pub_jsonext_front_wrist"), dir, 23)
	cfg := datasetConfig(t, dir, rec)
	cfg.SkipErrors = false
	ds := *cfg.Dataset
	ds.Episodes = slices.Clone(ds.Episodes)
	if ds.Episodes[0].Length == ds.Episodes[1].Length {
		t.Fatalf("episodes 0 and 1 have the same length %d", ds.Episodes[0].Length)
	}
	ds.Episodes[0].Length, ds.Episodes[1].Length = ds.Episodes[1].Length, ds.Episodes[0].Length
	cfg.Dataset = &ds
	srcs := []Mix{{Config: cfg, Weight: 1}}
	if _, ok, err := metaKeepIndex(context.Background(), srcs); err != nil || !ok {
		t.Fatalf("metaKeepIndex: ok %v, %v", ok, err)
	}
	_, msgs, err := trainRaw(t, srcs, StreamOptions{BatchSize: 4}, TrainOptions{Epochs: 1})
	if err == nil || !strings.Contains(err.Error(), "the episodes index places episode") {
		t.Fatalf("error %v, want the episodes index mismatch", err)
	}
	if last := msgs[len(msgs)-1]; last.Type != sink.TypeError {
		t.Fatalf("last message %s, want the error in-band", last.Type)
	}
	t.Log(err)
}

// TestTrainMetaKeepUnknownTask checks that a frame whose task_index is not
// in meta/tasks.parquet, which metadata cannot show (it would have no task,
// and --mode fallback drops it when it renders to None), fails the stream
// with the keep pass's error instead of shifting the order: the reader
// refuses it (shard's frame checks).
func TestTrainMetaKeepUnknownTask(t *testing.T) {
	var cfg *Config
	for _, c := range metaCases(t) {
		if c.name == "generated" {
			cfg = c.srcs[0].Config
		}
	}
	ds := *cfg.Dataset
	ds.Tasks = ds.Tasks[:len(ds.Tasks)-1] // the last task's frames have none
	c := *cfg
	c.Dataset = &ds
	srcs := []Mix{{Config: &c, Weight: 1}}
	if _, ok, err := metaKeepIndex(context.Background(), srcs); err != nil || !ok {
		t.Fatalf("metaKeepIndex: ok %v, %v", ok, err)
	}
	for _, order := range []string{OrderGlobal, OrderPartitioned} {
		to := TrainOptions{Epochs: 1, Order: order, Partitions: 2}
		pass := to
		pass.keepPass = true
		_, _, passErr := trainRaw(t, srcs, StreamOptions{BatchSize: 8}, pass)
		_, msgs, err := trainRaw(t, srcs, StreamOptions{BatchSize: 8}, to)
		if passErr == nil || err == nil || !strings.Contains(err.Error(), "is not in meta/tasks.parquet") {
			t.Fatalf("%s: error %v (keep pass: %v), want the task_index refused", order, err, passErr)
		}
		if last := msgs[len(msgs)-1]; last.Type != sink.TypeError {
			t.Fatalf("%s: last message %s, want the error in-band", order, last.Type)
		}
	}
}
