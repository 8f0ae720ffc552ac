package pipeline

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

// renderOnly are the batch columns only a recipe produces.
var renderOnly = map[string]bool{"messages": true, "message_streams": true, "target_message_indices": true}

// TestStreamWithoutRecipe streams datasets without a recipe (Config.Recipe
// nil) and with one in --mode fallback, in file order and in a shuffled
// training order: without a recipe every frame is kept, the header says
// mode "none" with no recipe, no batch carries a rendered column, and
// every other column (index, episode, frame, timestamp, task, numeric
// features) is identical to the run with the recipe, batch for batch.
func TestStreamWithoutRecipe(t *testing.T) {
	ctx := context.Background()
	shared := sharedDir(t)
	demoRecipe, err := render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	anyRecipe, err := render.LoadFile(filepath.Join(shared, "recipes", "subtask_mem_vqa_speech.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		dir    string // "": the embedded demo dataset
		recipe *render.Recipe
		train  bool
		deltas string
		// errors is how many frames the recipe fails to render (skipped
		// with the recipe, kept without); batches are compared only
		// without errors.
		errors int64
	}{
		{name: "demo", recipe: demoRecipe},
		{name: "demo/train", recipe: demoRecipe, train: true},
		{name: "demo/deltas", recipe: demoRecipe, deltas: "action=0:3/10"},
		{name: "conformance", dir: filepath.Join(conformanceDatasets(t), "pub_sorted_three_cams"), recipe: anyRecipe},
		{name: "conformance/train", dir: filepath.Join(conformanceDatasets(t), "pub_sorted_three_cams"), recipe: anyRecipe, train: true},
		{name: "conformance/render-errors", dir: filepath.Join(conformanceDatasets(t), "pub_documented_top_wrist"), recipe: anyRecipe, errors: 2},
		{name: "real", dir: filepath.Join(shared, "datasets", "real", "SamueleSandrini__record-test"), recipe: anyRecipe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var src fetch.Source = fetch.NewFS(lrstream.DemoName, lrstream.Demo())
			if tc.dir != "" {
				if src, err = fetch.NewDir(tc.dir); err != nil {
					t.Fatal(err)
				}
			}
			ds, err := shard.OpenDataset(ctx, src)
			if err != nil {
				t.Fatal(err)
			}
			deltas, err := ParseDeltaTimestamps(tc.deltas)
			if err != nil {
				t.Fatal(err)
			}
			stream := func(rec *render.Recipe) *sink.Stream {
				t.Helper()
				cfg := &Config{Source: src, Dataset: ds, Recipe: rec, Mode: render.ModeFallback, Workers: 2, Deltas: deltas, SkipErrors: tc.errors > 0}
				if err := CheckBatchable(ctx, cfg); err != nil {
					t.Fatal(err)
				}
				so := StreamOptions{BatchSize: 7, Version: "test"}
				var buf bytes.Buffer
				if tc.train {
					_, err = Train(ctx, cfg, so, TrainOptions{Shuffle: true, Seed: 5, Epochs: 1}, sink.NewMsgpack(&buf))
				} else {
					_, err = Stream(ctx, cfg, so, sink.NewMsgpack(&buf))
				}
				if err != nil {
					t.Fatal(err)
				}
				s, err := sink.Decode(&buf)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			with, without := stream(tc.recipe), stream(nil)

			h := without.Header
			if h.Mode != sink.ModeNoRecipe || h.Recipe != "" || h.RecipeSHA256 != "" || len(h.Components) != 0 {
				t.Errorf("header: mode %q, recipe %q, sha %q, components %v; want mode %q and no recipe", h.Mode, h.Recipe, h.RecipeSHA256, h.Components, sink.ModeNoRecipe)
			}
			if !reflect.DeepEqual(h.Features, with.Header.Features) {
				t.Errorf("features %v, with the recipe %v", h.Features, with.Header.Features)
			}
			e, we := without.End, with.End
			var total int64
			for _, ep := range ds.Episodes {
				total += ep.Length
			}
			if e.Frames != total || e.Samples != e.Frames || e.Passthrough != e.Frames || e.Rendered != 0 || e.Dropped != 0 || e.Errors != 0 {
				t.Errorf("end %+v: want every one of the %d frames kept without messages", e, total)
			}
			if e.Frames != we.Frames || we.Errors != tc.errors || e.Samples != we.Samples+tc.errors || we.Rendered != we.Frames-tc.errors {
				t.Errorf("end %+v, with the recipe %+v: want the same frames, the %d render errors kept", e, we, tc.errors)
			}
			if tc.errors > 0 {
				return
			}
			if len(without.Batches) != len(with.Batches) {
				t.Fatalf("%d batches, with the recipe %d", len(without.Batches), len(with.Batches))
			}
			for i, b := range without.Batches {
				wb := with.Batches[i]
				var want []sink.Field
				for _, f := range wb.Columns {
					if !renderOnly[f.Name] {
						want = append(want, f)
					}
				}
				if len(want) == len(wb.Columns) {
					t.Fatalf("batch %d with the recipe has no rendered column: the comparison would prove nothing", i)
				}
				for _, f := range b.Columns {
					if renderOnly[f.Name] {
						t.Errorf("batch %d carries %q without a recipe", i, f.Name)
					}
				}
				if b.Size != wb.Size || !reflect.DeepEqual(b.Columns, want) {
					t.Fatalf("batch %d differs from the with-recipe batch without its rendered columns", i)
				}
			}
		})
	}
}
