package pipeline

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/tamper"
	"github.com/lrstream/lrstream/internal/testkit"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// TestDeltaCameraKeyNotDecoded: a camera key in --delta-timestamps of a
// stream that carries no frames of it names the real cause.
func TestDeltaCameraKeyNotDecoded(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{video.ModeNone, "not selected (--cameras)"},
		{video.ModeAuto, "video files absent"},
	} {
		cfg := demoConfig(t, render.ModeFallback)
		if tc.spec == video.ModeAuto { // the demo ships its videos: auto needs a copy without them
			cfg = demoWithoutVideos(t, cfg)
		}
		var err error
		if cfg.Deltas, err = ParseDeltaTimestamps("observation.images.front=-1/30,0"); err != nil {
			t.Fatal(err)
		}
		if err := SetupCameras(context.Background(), cfg, CameraOptions{Spec: tc.spec}); err != nil {
			t.Fatal(err)
		}
		err = CheckStart([]Mix{{Config: cfg, Weight: 1}}, StreamOptions{BatchSize: 4}, nil)
		if err == nil || !strings.Contains(err.Error(), "is a camera") || !strings.Contains(err.Error(), tc.want) ||
			strings.Contains(err.Error(), "numeric features") {
			t.Errorf("--cameras %s: %v", tc.spec, err)
		}
	}
}

// demoWithoutVideos is cfg over a copy of the embedded demo without its
// videos/ directory (the cameras declared, their files absent).
func demoWithoutVideos(t *testing.T, cfg *Config) *Config {
	t.Helper()
	dir := t.TempDir()
	err := fs.WalkDir(lrstream.Demo(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		if d.IsDir() {
			if p == "videos" {
				return fs.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, p), 0o755)
		}
		b, err := fs.ReadFile(lrstream.Demo(), p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, p), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	src := fetch.NewFS("demo-novideos", os.DirFS(dir))
	ds, err := shard.OpenDataset(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	c := *cfg
	c.Source, c.Dataset = src, ds
	return &c
}

// addScalarFeatures adds to every data file of dir scalar columns grip
// (int32 = row), reward (float64 = 0.1·row + 1e-9) and u64 (uint64 = row,
// or 2^63 in row bigRow of the first file when bigRow >= 0), declared in
// info.json with shape (1,) as LeRobot writes them.
func addScalarFeatures(t *testing.T, dir string, bigRow int) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "data", "*", "*.parquet"))
	sort.Strings(files)
	for fi, f := range files {
		err := tamper.Parquet(f, func(fields []arrow.Field, cols []arrow.Array) ([]arrow.Field, []arrow.Array, error) {
			n := cols[0].Len()
			gi, rf, ub := array.NewInt32Builder(memory.DefaultAllocator), array.NewFloat64Builder(memory.DefaultAllocator), array.NewUint64Builder(memory.DefaultAllocator)
			for r := range n {
				gi.Append(int32(-r))
				rf.Append(0.1*float64(r) + 1e-9)
				u := uint64(r)
				if fi == 0 && r == bigRow {
					u = 1 << 63
				}
				ub.Append(u)
			}
			fields = append(fields, arrow.Field{Name: "grip", Type: arrow.PrimitiveTypes.Int32},
				arrow.Field{Name: "reward", Type: arrow.PrimitiveTypes.Float64}, arrow.Field{Name: "u64", Type: arrow.PrimitiveTypes.Uint64})
			return fields, append(cols, gi.NewArray(), rf.NewArray(), ub.NewArray()), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range [][2]string{{"grip", "int32"}, {"reward", "float64"}, {"u64", "uint64"}} {
		if err := tamper.Replace(filepath.Join(dir, "meta", "info.json"), `"features": {`,
			`"features": {"`+kv[0]+`": {"dtype": "`+kv[1]+`", "shape": [1], "names": null}, `); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEmittedDTypes: through the whole stream, int32 becomes int64,
// float64 float32 (rounded to nearest), a shape (1,) feature a scalar — (N,),
// and (N, k) with a window — as LeRobotDataset's torch.tensor; a uint64
// above 2^63-1 is an error naming file, row group, episode, index, frame and
// feature.
func TestEmittedDTypes(t *testing.T) {
	dir := t.TempDir()
	if err := tamper.CopyDataset(testkit.Shared(t, "conformance", "datasets", "pub_jsonext_front_wrist"), dir); err != nil {
		t.Fatal(err)
	}
	addScalarFeatures(t, dir, -1)
	cfg, err := cameraConfig(t, dir, video.ModeNone)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Recipe = nil // frames, no messages
	if cfg.Deltas, err = ParseDeltaTimestamps("reward=-1/10,0"); err != nil {
		t.Fatal(err)
	}
	b, _, err := streamBytes(cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	h, batches := decodeAll(t, b)
	got := map[string]string{}
	for _, f := range h.Features {
		got[f.Name] = fmt.Sprintf("%s%v", f.DType, f.Shape)
	}
	for name, want := range map[string]string{"grip": "<i8[]", "reward": "<f4[2]", "u64": "<i8[]", "reward_is_pad": "|b1[2]"} {
		if got[name] != want {
			t.Errorf("%s: %s, want %s", name, got[name], want)
		}
	}
	a := batches[0].Column("reward").(*sink.Array)
	if !slices.Equal(a.Shape, []int{4, 2}) {
		t.Fatalf("reward window shape %v", a.Shape)
	}
	fi := batches[0].Column("frame_index").(*sink.Array)
	g := batches[0].Column("grip").(*sink.Array)
	for i := range 4 {
		row := int64(binary.LittleEndian.Uint64(fi.Data[8*i:])) // row = frame within the first episode here
		if v := int64(binary.LittleEndian.Uint64(g.Data[8*i:])); v != -row {
			t.Errorf("grip[%d] = %d, want %d", i, v, -row)
		}
		r := math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*(2*i+1):]))
		if want := float32(0.1*float64(row) + 1e-9); r != want {
			t.Errorf("reward[%d] = %v, want %v", i, r, want)
		}
	}

	bad := t.TempDir()
	if err := tamper.CopyDataset(testkit.Shared(t, "conformance", "datasets", "pub_jsonext_front_wrist"), bad); err != nil {
		t.Fatal(err)
	}
	addScalarFeatures(t, bad, 2)
	cfg, err = cameraConfig(t, bad, video.ModeNone)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Recipe = nil
	_, _, err = streamBytes(cfg, 4)
	for _, want := range []string{"file-000.parquet row group 0", "episode 0", "index 2", "frame 2", "feature u64 (uint64)", "does not fit int64"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("uint64 2^63: %v, want %q", err, want)
		}
	}
}

// TestCameraOptionFlags: --depth-unit and --video-backend are checked on
// every dataset, with cameras or not.
func TestCameraOptionFlags(t *testing.T) {
	cfg := demoConfig(t, render.ModeFallback)
	for _, tc := range []struct {
		o  CameraOptions
		ok bool
	}{
		{CameraOptions{}, true},
		{CameraOptions{DepthUnit: "mm"}, true},
		{CameraOptions{DepthUnit: "m"}, true},
		{CameraOptions{DepthUnit: "cm"}, false},
		{CameraOptions{VideoBackend: "torchcodec"}, true},
		{CameraOptions{VideoBackend: "pyav"}, true},
		{CameraOptions{VideoBackend: "video_reader"}, false},
	} {
		tc.o.Spec = video.ModeNone
		err := SetupCameras(context.Background(), cfg, tc.o)
		if (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.o, err)
		}
	}
}
