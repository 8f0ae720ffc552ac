package pipeline

import (
	"github.com/lrstream/lrstream/internal/testkit"

	"bytes"
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

func TestParseDeltaTimestamps(t *testing.T) {
	got, err := ParseDeltaTimestamps("action=0:4/30, observation.state=-1/30,0;x=0.5,-2:2:2/10")
	if err != nil {
		t.Fatal(err)
	}
	want := []Delta{
		{Key: "action", Seconds: []float64{0, 1.0 / 30, 2.0 / 30, 3.0 / 30}},
		{Key: "observation.state", Seconds: []float64{-1.0 / 30, 0}},
		{Key: "x", Seconds: []float64{0.5, -0.2, 0}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	for _, bad := range []string{"0.1", "a=", "a=1/0", "a=1:1/2", "a=x", "a=1,a=2", "=1", "a=1:5:0/3"} {
		if _, err := ParseDeltaTimestamps(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	fs := StandardFeaturesForTest()
	if _, err := ResolveDeltas([]Delta{{Key: "action", Seconds: []float64{0.05}}}, 30, DefaultTolerance, fs); err == nil {
		t.Error("0.05 s accepted at 30 fps")
	}
	if _, err := ResolveDeltas([]Delta{{Key: "nope", Seconds: []float64{0}}}, 30, DefaultTolerance, fs); err == nil {
		t.Error("unknown key accepted")
	}
	// Offsets whose frame count does not fit (1e300 s, or 1e308 × fps
	// overflowing to +Inf) are refused, never converted to a wrapped int.
	for _, sec := range []float64{1e300, -1e300, 1e308, 3e5} {
		if _, err := ResolveDeltas([]Delta{{Key: "action", Seconds: []float64{sec}}}, 10000, DefaultTolerance, fs); err == nil || !strings.Contains(err.Error(), "beyond") {
			t.Errorf("offset %g s at 10000 fps: %v, want it refused", sec, err)
		}
	}
	r, err := ResolveDeltas([]Delta{{Key: "action", Seconds: []float64{-1.0 / 30, 0, 0.1}}}, 30, DefaultTolerance, fs)
	if err != nil || !reflect.DeepEqual(r[0].Offsets, []int{-1, 0, 3}) {
		t.Fatalf("offsets %+v, %v", r, err)
	}
}

// StandardFeaturesForTest is a small feature list for ResolveDeltas tests.
func StandardFeaturesForTest() []collate.Feature {
	return []collate.Feature{{Name: "action", DType: "<f4", Shape: []int{6}}}
}

// TestDeltaTimestampsWindows checks --delta-timestamps windows and pad
// masks against an independent computation from the parquet values, on a
// dataset re-chunked so that episodes span row groups.
func TestDeltaTimestampsWindows(t *testing.T) {
	src := filepath.Join(conformanceDatasets(t), "pub_inferred_front_wrist")
	dir := t.TempDir()
	rechunk(t, src, dir, 23)
	ctx := context.Background()
	fsrc, _ := fetch.NewDir(dir)
	ds, err := shard.OpenDataset(ctx, fsrc)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := render.LoadFile(filepath.Join(sharedDir(t), "recipes", "subtask.yaml"))
	fps := ds.Info.FPS
	deltas, err := ParseDeltaTimestamps("action=-2:6/15,observation.state=-1/15,0")
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[string][]int{"action": {-2, -1, 0, 1, 2, 3, 4, 5}, "observation.state": {-1, 0}}
	cfg := &Config{Source: fsrc, Dataset: ds, Recipe: rec, Mode: render.ModeFallback, SkipErrors: true, Deltas: deltas, Workers: 2}
	if fps != 15 {
		t.Fatalf("fps %v", fps)
	}
	var buf bytes.Buffer
	if _, err := Stream(ctx, cfg, StreamOptions{BatchSize: 50}, sink.NewMsgpack(&buf)); err != nil {
		t.Fatal(err)
	}
	st, err := sink.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// Episode bounds in index space, from the data.
	first, last := map[int64]int64{}, map[int64]int64{}
	frames := testkit.ReadFrames(t, dir, "action", "observation.state")
	eps := frames.Episode
	for ix, e := range eps {
		if f, ok := first[e]; !ok || ix < f {
			first[e] = ix
		}
		if l, ok := last[e]; !ok || ix > l {
			last[e] = ix
		}
	}
	checked := 0
	for _, b := range st.Batches {
		idx := batchIndexes(t, b)
		for name, offs := range offsets {
			a := b.Column(name).(*sink.Array)
			pad := b.Column(name + "_is_pad").(*sink.Array)
			if a.Shape[0] != b.Size || a.Shape[1] != len(offs) || pad.DType != "|b1" || pad.Shape[1] != len(offs) {
				t.Fatalf("%s shapes %v / %v %v", name, a.Shape, pad.DType, pad.Shape)
			}
			w := a.Shape[2]
			for i, ix := range idx {
				e := eps[ix]
				for k, off := range offs {
					q := ix + int64(off)
					wantPad := q < first[e] || q > last[e]
					q = min(max(q, first[e]), last[e])
					if got := pad.Data[i*len(offs)+k] == 1; got != wantPad {
						t.Fatalf("index %d %s offset %d: pad %v, want %v", ix, name, off, got, wantPad)
					}
					for d := 0; d < w; d++ {
						p := ((i*len(offs)+k)*w + d) * 4
						got := math.Float32frombits(binary.LittleEndian.Uint32(a.Data[p:]))
						if got != frames.Values[q][name][d] {
							t.Fatalf("index %d %s offset %d dim %d: %v, want %v", ix, name, off, d, got, frames.Values[q][name][d])
						}
					}
				}
				checked++
			}
		}
	}
	if checked < 2000 {
		t.Fatalf("checked only %d windows", checked)
	}
}

// TestFillerChecksEachChunk checks that the filler refuses a chunk whose
// features differ from the stream's, also after a matching chunk, and
// fills frames of matching ones.
func TestFillerChecksEachChunk(t *testing.T) {
	in := []collate.Feature{{Name: "s", DType: "<f4", Shape: []int{2}}}
	fl := newFiller(in, nil)
	chunk := func(dtype string, shape []int) *Chunk {
		return &Chunk{Unit: shard.Unit{File: "f.parquet", RowGroup: 3}, Batch: &shard.Batch{
			EpisodeIndex: []int64{0, 0},
			Features:     []shard.FeatureData{{Name: "s", DType: dtype, Shape: shape, Data: make([]byte, 16)}},
		}}
	}
	var f collate.Frame
	good := chunk("<f4", []int{2})
	good.Batch.Features[0].Data[8] = 7
	for j := 0; j < 2; j++ {
		if err := fl.fill(&f, good, j); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.Features) != 1 || len(f.Features[0]) != 8 || f.Features[0][0] != 7 {
		t.Fatalf("frame 1 filled with %v", f.Features)
	}
	for _, bad := range []*Chunk{chunk("<f8", []int{2}), chunk("<f4", []int{3})} {
		err := fl.fill(&f, bad, 0)
		if err == nil || !strings.Contains(err.Error(), "f.parquet row group 3: feature s is") {
			t.Fatalf("mismatching chunk: %v", err)
		}
	}
}
