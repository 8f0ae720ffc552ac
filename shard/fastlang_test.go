package shard

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
)

// TestFastPathMatchesArrow reads every conformance dataset through the
// low-level language path and through pqarrow, and requires identical
// batches.
func TestFastPathMatchesArrow(t *testing.T) {
	before := fastReads.Load()
	dirs := append(conformanceDatasets(t), realDatasets(t)...)
	for _, dir := range dirs {
		_, fast := readAll(t, mustDir(t, dir), Selection{}, Options{})
		_, slow := readAll(t, mustDir(t, dir), Selection{}, Options{noFast: true})
		if len(fast) != len(slow) {
			t.Fatalf("%s: %d and %d batches", dir, len(fast), len(slow))
		}
		for i := range fast {
			a, b := fast[i], slow[i]
			if !reflect.DeepEqual(a.Index, b.Index) || a.HasPersistent != b.HasPersistent || a.HasEvents != b.HasEvents {
				t.Fatalf("%s %s rg %d: frames differ", filepath.Base(dir), a.File, a.RowGroup)
			}
			for r := 0; r < a.Len(); r++ {
				if rowsJSON(a.PersistentRows(r), true) != rowsJSON(b.PersistentRows(r), true) {
					t.Fatalf("%s %s rg %d frame %d: persistent differs:\n%s\n%s", filepath.Base(dir), a.File, a.RowGroup, r,
						rowsJSON(a.PersistentRows(r), true), rowsJSON(b.PersistentRows(r), true))
				}
				if rowsJSON(a.EventRows(r), false) != rowsJSON(b.EventRows(r), false) {
					t.Fatalf("%s %s rg %d frame %d: events differ", filepath.Base(dir), a.File, a.RowGroup, r)
				}
			}
			if !reflect.DeepEqual(a.PersistentOf, b.PersistentOf) || len(a.Persistent) != len(b.Persistent) {
				t.Fatalf("%s %s rg %d: distinct lists differ", filepath.Base(dir), a.File, a.RowGroup)
			}
			if !reflect.DeepEqual(a.Features, b.Features) || !reflect.DeepEqual(a.Timestamp, b.Timestamp) ||
				!reflect.DeepEqual(a.EpisodeIndex, b.EpisodeIndex) || !reflect.DeepEqual(a.FrameIndex, b.FrameIndex) ||
				!reflect.DeepEqual(a.TaskIndex, b.TaskIndex) {
				t.Fatalf("%s %s rg %d: frame columns or features differ", filepath.Base(dir), a.File, a.RowGroup)
			}
		}
	}
	if fastReads.Load() == before {
		t.Fatal("the low-level path was never used")
	}
	t.Logf("%d columns read by the low-level path", fastReads.Load()-before)
}

// TestFastPathGenerated compares both paths on generated datasets of both
// schema variants (realistic annotation density and page layout).
func TestFastPathGenerated(t *testing.T) {
	for _, v := range []datagen.Variant{datagen.VariantDocumented, datagen.VariantInferred} {
		dir := filepath.Join(t.TempDir(), "ds")
		o := datagen.DefaultOptions()
		o.Episodes, o.MinFrames, o.MaxFrames, o.Variant, o.Seed = 6, 150, 400, v, 3
		if _, err := datagen.Generate(context.Background(), dir, o); err != nil {
			t.Fatal(err)
		}
		_, fast := readAll(t, mustDir(t, dir), Selection{}, Options{})
		_, slow := readAll(t, mustDir(t, dir), Selection{}, Options{noFast: true})
		frames, events := 0, 0
		for i := range fast {
			a, b := fast[i], slow[i]
			if a.Len() != b.Len() || !reflect.DeepEqual(a.PersistentOf, b.PersistentOf) {
				t.Fatalf("%s: batch %d differs", v, i)
			}
			for r := 0; r < a.Len(); r++ {
				if rowsJSON(a.PersistentRows(r), true) != rowsJSON(b.PersistentRows(r), true) ||
					rowsJSON(a.EventRows(r), false) != rowsJSON(b.EventRows(r), false) {
					t.Fatalf("%s: batch %d frame %d differs", v, i, r)
				}
				if len(a.EventRows(r)) > 0 {
					events++
				}
			}
			if !reflect.DeepEqual(a.Features, b.Features) {
				t.Fatalf("%s: features differ", v)
			}
			frames += a.Len()
		}
		if events == 0 || frames == 0 {
			t.Fatalf("%s: %d frames, %d with events", v, frames, events)
		}
	}
}
