package shard

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
)

// TestParquetGoMatches reads the conformance, real and generated datasets
// and the page layout variants through the parquet-go path and through
// the arrow-go path, and requires identical batches (frame columns and
// numeric features, frame for frame).
func TestParquetGoMatches(t *testing.T) {
	dirs := append(conformanceDatasets(t), realDatasets(t)...)
	for _, v := range []datagen.Variant{datagen.VariantDocumented, datagen.VariantInferred} {
		dirs = append(dirs, generated(t, v, 6, 150, 400, 7))
	}
	dtypes := map[string]bool{}
	for _, dir := range dirs {
		_, want := readAll(t, mustDir(t, dir), Selection{}, Options{})
		_, got := readAll(t, mustDir(t, dir), Selection{}, Options{parquetGo: true})
		compareBatches(t, dir, got, want)
		for _, b := range got {
			for _, f := range b.Features {
				dtypes[f.DType+fmt.Sprint(f.Shape)] = true
			}
		}
	}
	if len(dtypes) < 2 {
		t.Fatalf("only %v numeric features compared", dtypes)
	}
	t.Logf("numeric features compared: %v", dtypes)
}

// TestParquetGoLayouts compares both paths on the page layout variants
// (page sizes, encodings, compression) and episode selections.
func TestParquetGoLayouts(t *testing.T) {
	base, variants := layoutVariants(t)
	for name, data := range variants {
		bb, be := readVariant(t, base, data, Options{})
		pb, pe := readVariant(t, base, data, Options{parquetGo: true})
		if len(be) != 0 || len(pe) != 0 {
			t.Fatalf("%s: errors %v / %v", name, be, pe)
		}
		compareBatches(t, name, pb, bb)
	}
}

func compareBatches(t *testing.T, name string, got, want []*Batch) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d and %d batches", name, len(got), len(want))
	}
	for i := range got {
		a, b := got[i], want[i]
		for _, c := range []struct {
			col  string
			x, y any
		}{{"index", a.Index, b.Index}, {"episode_index", a.EpisodeIndex, b.EpisodeIndex}, {"frame_index", a.FrameIndex, b.FrameIndex},
			{"task_index", a.TaskIndex, b.TaskIndex}, {"timestamp", a.Timestamp, b.Timestamp}, {"features", a.Features, b.Features}} {
			if !reflect.DeepEqual(c.x, c.y) {
				t.Fatalf("%s %s rg %d: %s differs", name, a.File, a.RowGroup, c.col)
			}
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s %s rg %d: batches differ", name, a.File, a.RowGroup)
		}
	}
}
