package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

// referencePlan is the whole plan at once, as shard.Plan gives it.
func referencePlan(t *testing.T, cfg *Config) []shard.Unit {
	t.Helper()
	sel, err := shareSelection(cfg.Dataset, cfg.Selection, cfg.Share)
	if err != nil {
		t.Fatal(err)
	}
	units, err := shard.Plan(context.Background(), cfg.Source, cfg.Dataset, sel)
	if err != nil {
		t.Fatal(err)
	}
	return units
}

func unitString(u shard.Unit) string {
	return fmt.Sprintf("%d %s rg%d rows%d eps%v partial=%v", u.Seq, u.File, u.RowGroup, u.Rows, u.Episodes, u.Partial)
}

func groupStrings(groups [][]shard.Unit) []string {
	var out []string
	for _, g := range groups {
		s := ""
		for _, u := range g {
			s += unitString(u) + "; "
		}
		out = append(out, s)
	}
	return out
}

// checkPlanner compares the lazy, segmented plan (units and unit groups)
// with shard.Plan of the whole selection.
func checkPlanner(t *testing.T, name string, cfg *Config) {
	t.Helper()
	want := referencePlan(t, cfg)
	got, err := PlanUnits(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ws, gs := make([]string, len(want)), make([]string, len(got))
	for i := range want {
		ws[i] = unitString(want[i])
	}
	for i := range got {
		gs[i] = unitString(got[i])
	}
	if !slices.Equal(ws, gs) {
		t.Fatalf("%s: lazy plan differs:\nwant %q\ngot  %q", name, ws, gs)
	}
	p, err := newPlanner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var groups [][]shard.Unit
	for {
		g, ok, err := p.nextGroup(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		groups = append(groups, g)
	}
	if w, g := groupStrings(groupUnits(want)), groupStrings(groups); !slices.Equal(w, g) {
		t.Fatalf("%s: lazy groups differ:\nwant %q\ngot  %q", name, w, g)
	}
}

func planConfig(t *testing.T, dir string) *Config {
	t.Helper()
	src, err := fetch.OpenDataset(context.Background(), dir, fetch.HubOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return &Config{Source: src, Dataset: ds}
}

func TestPlannerMatchesWholePlan(t *testing.T) {
	// A generated dataset of many small files over several chunks, and a
	// copy whose episodes span row groups.
	gen := filepath.Join(t.TempDir(), "gen")
	if _, err := datagen.Generate(context.Background(), gen, datagen.Options{
		Episodes: 23, MinFrames: 20, MaxFrames: 60, FPS: 10, Dim: 2, Cameras: []string{},
		FramesPerFile: 90, FilesPerChunk: 3, Seed: 5, Density: datagen.DensitySparse,
	}); err != nil {
		t.Fatal(err)
	}
	rechunked := filepath.Join(t.TempDir(), "rechunked")
	rechunk(t, gen, rechunked, 17)
	dirs := []string{gen, rechunked}
	if ents, err := os.ReadDir(conformanceDatasets(t)); err == nil {
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			dirs = append(dirs, filepath.Join(conformanceDatasets(t), e.Name()))
		}
	}
	for _, dir := range dirs {
		cfg := planConfig(t, dir)
		for _, sel := range []struct{ eps, excl string }{{"", ""}, {"0-2,5,9-11,20-40", ""}, {"", "1,4-8"}, {"3", ""}} {
			s, err := shard.ParseSelection(sel.eps, sel.excl)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Selection = s
			for _, share := range []Share{{}, {Worker: 1, NumWorkers: 3}} {
				cfg.Share = share
				for _, per := range []int{1, 2, 3} {
					cfg.filesPerSegment = per
					checkPlanner(t, fmt.Sprintf("%s %v %v per %d", filepath.Base(dir), sel, share, per), cfg)
				}
			}
		}
	}
	cfg := demoConfig(t, 0)
	checkPlanner(t, "demo", cfg)
}

func TestOrderedFeed(t *testing.T) {
	for _, tc := range []struct{ n, workers, window int }{{0, 2, 4}, {1, 1, 1}, {100, 3, 2}, {257, 4, 8}} {
		i := 0
		next := func(context.Context) (int, bool, error) {
			if i == tc.n {
				return 0, false, nil
			}
			i++
			return i - 1, true, nil
		}
		var got []int
		err := orderedFeed(context.Background(), tc.workers, tc.window, next,
			func(_ context.Context, in int) (int, error) { return in * in, nil },
			func(in, v int) error {
				if v != in*in {
					t.Errorf("result %d for input %d", v, in)
				}
				got = append(got, in)
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.n || !slices.IsSorted(got) {
			t.Fatalf("%+v: emitted %v", tc, got)
		}
	}
}

func TestOrderedFeedErrorsInOrder(t *testing.T) {
	boom := fmt.Errorf("boom")
	// An error from next comes after the results before it.
	i := 0
	var got []int
	err := orderedFeed(context.Background(), 2, 4,
		func(context.Context) (int, bool, error) {
			if i == 10 {
				return 0, false, boom
			}
			i++
			return i - 1, true, nil
		},
		func(_ context.Context, in int) (int, error) { return in, nil },
		func(in, _ int) error { got = append(got, in); return nil })
	if err != boom || len(got) != 10 {
		t.Fatalf("err %v after %d results", err, len(got))
	}
	// An error from fn stops at that input.
	i = 0
	got = got[:0]
	err = orderedFeed(context.Background(), 3, 3,
		func(context.Context) (int, bool, error) { i++; return i - 1, true, nil },
		func(_ context.Context, in int) (int, error) {
			if in == 7 {
				return 0, boom
			}
			return in, nil
		},
		func(in, _ int) error { got = append(got, in); return nil })
	if err != boom || len(got) != 7 {
		t.Fatalf("err %v after %d results", err, len(got))
	}
	// Cancellation.
	ctx, cancel := context.WithCancel(context.Background())
	i = 0
	err = orderedFeed(ctx, 2, 2,
		func(context.Context) (int, bool, error) { i++; return i - 1, true, nil },
		func(_ context.Context, in int) (int, error) { return in, nil },
		func(in, _ int) error {
			if in == 5 {
				cancel()
			}
			return nil
		})
	if err != context.Canceled {
		t.Fatalf("err %v, want canceled", err)
	}
}

// TestStreamIdenticalAcrossWorkers: the parallel encoder and the lazy,
// segmented planner give the bytes of the sequential path (one worker,
// batches encoded one by one on the emitting goroutine), on a multi-file
// generated dataset and the conformance datasets.
func TestStreamIdenticalAcrossWorkers(t *testing.T) {
	gen := filepath.Join(t.TempDir(), "gen")
	if _, err := datagen.Generate(context.Background(), gen, datagen.Options{
		Episodes: 19, MinFrames: 20, MaxFrames: 70, FPS: 10, Dim: 3, Cameras: []string{},
		FramesPerFile: 120, FilesPerChunk: 4, Seed: 11, Density: datagen.DensityFull,
	}); err != nil {
		t.Fatal(err)
	}
	dirs := []string{gen}
	if ents, err := os.ReadDir(conformanceDatasets(t)); err == nil {
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(conformanceDatasets(t), e.Name()))
			}
		}
	}
	rec, err := render.LoadFile(filepath.Join(sharedDir(t), "recipes", "subtask_mem_vqa_speech.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	streamBytes := func(cfg *Config, workers int) []byte {
		c := *cfg
		c.Workers = workers
		var buf bytes.Buffer
		if _, err := Stream(context.Background(), &c, StreamOptions{BatchSize: 5, Version: "test"}, sink.NewMsgpack(&buf)); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, dir := range dirs {
		cfg := planConfig(t, dir)
		cfg.Recipe, cfg.Mode, cfg.SkipErrors = rec, render.ModeFallback, true
		cfg.filesPerSegment = 1 << 20 // one segment: the whole plan at once
		want := streamBytes(cfg, 1)
		for _, per := range []int{1, 2} {
			cfg.filesPerSegment = per
			for _, w := range []int{1, 3} {
				if got := streamBytes(cfg, w); !bytes.Equal(got, want) {
					t.Fatalf("%s: %d workers, %d files per segment: output differs", filepath.Base(dir), w, per)
				}
			}
		}
	}
}
