package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/fakehub"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

// videosFetched returns the mp4 files GET from the fake Hub.
func videosFetched(h *fakehub.Hub) []string {
	_, gets := h.Served()
	var out []string
	for f := range gets {
		if strings.HasSuffix(f, ".mp4") {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// cameraColumns returns every sample's camera bytes by dataset index.
func cameraColumns(t *testing.T, raw []byte) map[string][]byte {
	t.Helper()
	_, bs := decodeAll(t, raw)
	out := map[string][]byte{}
	for _, b := range bs {
		idx := batchIndexes(t, b)
		for _, c := range []string{"observation.images.front", "observation.images.wrist"} {
			col, ok := b.Column(c).(*sink.Array)
			if !ok {
				t.Fatalf("no column %s", c)
			}
			fb := len(col.Data) / b.Size
			for i, x := range idx {
				out[fmt.Sprint(c, x)] = col.Data[i*fb : (i+1)*fb]
			}
		}
	}
	return out
}

// TestCamerasHub: a Hub dataset's cameras are decoded from video files
// materialized through fetch.Materialize — into the Hugging Face cache
// with --download full, into temporary files removed after the run with
// --download none — with the same pixels as the local copy; only the
// video files of the selected episodes are downloaded.
func TestCamerasHub(t *testing.T) {
	dir := videoDataset(t, func(o *datagen.Options) { o.Episodes, o.MinFrames, o.MaxFrames, o.FramesPerFile = 4, 10, 14, 25 })
	local, err := cameraConfig(t, dir, "all")
	if err != nil {
		t.Fatal(err)
	}
	// Episodes of the last data file only: its video files alone.
	last := local.Dataset.Episodes[len(local.Dataset.Episodes)-1]
	var sel []int64
	for _, e := range local.Dataset.Episodes {
		if e.DataFile == last.DataFile {
			sel = append(sel, e.Index)
		}
	}
	local.Selection = episodeSelection(sel)
	want, _, err := streamBytes(local, 8)
	if err != nil {
		t.Fatal(err)
	}
	wantCols := cameraColumns(t, want)
	rec, err := render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []fetch.CacheMode{fetch.CacheFull, fetch.CacheNone} {
		t.Run(string(mode), func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			hub := fakehub.New(t, dir, fakehub.Options{ID: "org/cams"})
			cache := t.TempDir()
			src, err := fetch.OpenDataset(context.Background(), "org/cams", fetch.HubOptions{Endpoint: hub.URL(), CacheDir: cache, Cache: mode})
			if err != nil {
				t.Fatal(err)
			}
			ds, err := shard.OpenDataset(context.Background(), src)
			if err != nil {
				t.Fatal(err)
			}
			cfg := &Config{Source: src, Dataset: ds, Recipe: rec, Mode: render.ModeFallback, Workers: 2, Selection: episodeSelection(sel)}
			if err := SetupCameras(context.Background(), cfg, CameraOptions{}); err != nil {
				t.Fatal(err)
			}
			if cfg.Cameras == nil || len(cfg.Cameras.Cameras) != 2 {
				t.Fatalf("auto on the Hub: cameras %+v", cfg.CameraStatus)
			}
			got, _, err := streamBytes(cfg, 8)
			if err != nil {
				t.Fatal(err)
			}
			gotCols := cameraColumns(t, got)
			if len(gotCols) != len(wantCols) || len(gotCols) == 0 {
				t.Fatalf("%d camera frames from the Hub, %d locally", len(gotCols), len(wantCols))
			}
			for k, v := range wantCols {
				if !bytes.Equal(gotCols[k], v) {
					t.Fatalf("%s: Hub pixels differ from the local copy's", k)
				}
			}
			wantFiles := []string{
				fmt.Sprintf("videos/observation.images.front/chunk-000/file-%03d.mp4", last.DataFile),
				fmt.Sprintf("videos/observation.images.wrist/chunk-000/file-%03d.mp4", last.DataFile),
			}
			if f := videosFetched(hub); fmt.Sprint(f) != fmt.Sprint(wantFiles) {
				t.Fatalf("video files downloaded %v, want %v (the selected episodes' only)", f, wantFiles)
			}
			var cached []string
			filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
				if err == nil && strings.HasSuffix(p, ".mp4") {
					cached = append(cached, p)
				}
				return nil
			})
			left, _ := os.ReadDir(tmp)
			switch mode {
			case fetch.CacheFull:
				if len(cached) != 2 {
					t.Fatalf("--download full: %d videos in the cache, want 2: %v", len(cached), cached)
				}
			case fetch.CacheNone:
				if len(cached) != 0 {
					t.Fatalf("--download none: videos in the cache: %v", cached)
				}
				if len(left) != 0 {
					t.Fatalf("--download none: temporary files left after the run: %v", left)
				}
			}
		})
	}
}
