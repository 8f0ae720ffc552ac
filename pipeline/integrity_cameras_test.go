package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/fakehub"
	"github.com/lrstream/lrstream/internal/tamper"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
)

// datasetSpans opens the dataset in dir and returns it with the video
// ranges of its episodes index.
func datasetSpans(t *testing.T, dir string) (*schema.Dataset, []shard.VideoSpan) {
	t.Helper()
	src, err := fetch.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	spans, err := shard.EpisodeVideos(context.Background(), src, ds)
	if err != nil {
		t.Fatal(err)
	}
	return ds, spans
}

// episodeSpans returns the dataset's video ranges of camera key by
// episode (the row of the episode in the one index file).
func episodeSpans(t *testing.T, dir, key string) (*schema.Dataset, []shard.VideoSpan) {
	t.Helper()
	ds, spans := datasetSpans(t, dir)
	var out []shard.VideoSpan
	for _, s := range spans {
		if s.Key == key {
			out = append(out, s)
		}
	}
	return ds, out
}

// TestCameraInconsistentVideoIndex: an episodes index whose video ranges
// disagree with the episodes (moved by a frame, swapped, pointed at
// another episode's frames) is refused at startup naming episode, camera
// and file, under every --cameras that decodes the camera (issue 25
// item 1: these streamed neighbouring frames with rc 0).
func TestCameraInconsistentVideoIndex(t *testing.T) {
	const cam = "observation.images.front"
	index := "meta/episodes/chunk-000/file-000.parquet"
	from, to := "videos/"+cam+"/from_timestamp", "videos/"+cam+"/to_timestamp"
	tests := []struct {
		name string
		edit func(s []shard.VideoSpan, fps float64) tamper.Edit
		want string
	}{
		{"moved by one frame", func(s []shard.VideoSpan, fps float64) tamper.Edit {
			return tamper.Chain(tamper.SetFloat64(from, 1, s[1].From+1/fps), tamper.SetFloat64(to, 1, s[1].To+1/fps))
		}, "overlaps episode 1's"},
		{"swapped", func(s []shard.VideoSpan, fps float64) tamper.Edit {
			return tamper.Chain(tamper.SetFloat64(from, 0, s[2].From), tamper.SetFloat64(to, 0, s[2].To),
				tamper.SetFloat64(from, 2, s[0].From), tamper.SetFloat64(to, 2, s[0].To))
		}, "but the episode has"},
		{"pointed at the file's start", func(s []shard.VideoSpan, fps float64) tamper.Edit {
			return tamper.Chain(tamper.SetFloat64(from, 2, 0), tamper.SetFloat64(to, 2, s[2].To-s[2].From))
		}, "overlaps episode 0's"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := videoDataset(t, func(o *datagen.Options) {
				o.Episodes, o.MinFrames, o.MaxFrames, o.FramesPerFile, o.Cameras = 3, 8, 30, 100, []string{"front"}
			})
			ds, spans := episodeSpans(t, dir, cam)
			if len(spans) != 3 || spans[1].File != spans[0].File || spans[2].File != spans[0].File || spans[0].To-spans[0].From == spans[2].To-spans[2].From {
				t.Fatalf("spans %+v: want 3 episodes of different lengths in one file", spans)
			}
			if err := tamper.Parquet(filepath.Join(dir, index), tc.edit(spans, ds.Info.FPS)); err != nil {
				t.Fatal(err)
			}
			for _, spec := range []string{"all", "auto", cam} {
				_, err := cameraConfig(t, dir, spec)
				var se *shard.Error
				if err == nil || !errors.As(err, &se) {
					t.Fatalf("--cameras %s: error %v, want a *shard.Error", spec, err)
				}
				for _, w := range []string{tc.want, "episode ", "camera " + cam, "videos/" + cam + "/chunk-000/file-000.mp4", index} {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("--cameras %s: error %q does not say %q", spec, err, w)
					}
				}
			}
			// Without frames nothing is looked up in the videos.
			if _, err := cameraConfig(t, dir, "none"); err != nil {
				t.Fatalf("--cameras none: %v", err)
			}
		})
	}
}

// TestCamerasAutoPerCamera: --cameras auto decides each camera from all
// its video files: all present, decoded; none, left out with the reason
// (CameraNote); some, an error naming the camera and the absent file —
// also when a directory stands where the file should be, or the index
// points at a file that is not there (issue 25 item 4: the camera was
// dropped from every frame with rc 0).
func TestCamerasAutoPerCamera(t *testing.T) {
	const front, wrist = "observation.images.front", "observation.images.wrist"
	second := "videos/" + wrist + "/chunk-000/file-001.mp4"
	tests := []struct {
		name    string
		break_  func(t *testing.T, dir string)
		decoded []string
		note    string // in CameraNote
		err     []string
	}{
		{"all present", func(*testing.T, string) {}, []string{front, wrist}, "", nil},
		{"a camera without files", func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "videos", wrist)); err != nil {
				t.Fatal(err)
			}
		}, []string{front}, "not decoding " + wrist + ": video files absent, e.g. videos/" + wrist + "/chunk-000/file-000.mp4", nil},
		{"one file absent", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, second)); err != nil {
				t.Fatal(err)
			}
		}, nil, "", []string{"--cameras auto: camera " + wrist + ": 1 of its ", " video files are absent (" + second + ")"}},
		{"a directory instead of a file", func(t *testing.T, dir string) {
			p := filepath.Join(dir, second)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, nil, "", []string{"camera " + wrist + ": 1 of its ", " video files are absent (" + second + ")"}},
		{"the index points at an absent file", func(t *testing.T, dir string) {
			err := tamper.Parquet(filepath.Join(dir, "meta/episodes/chunk-000/file-000.parquet"), tamper.SetInt("videos/"+wrist+"/file_index", 0, 7))
			if err != nil {
				t.Fatal(err)
			}
		}, nil, "", []string{"camera " + wrist + ": 1 of its ", " video files are absent (videos/" + wrist + "/chunk-000/file-007.mp4)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := videoDataset(t, func(o *datagen.Options) { o.Episodes, o.MinFrames, o.MaxFrames, o.FramesPerFile = 4, 10, 14, 25 })
			tc.break_(t, dir)
			cfg, err := cameraConfig(t, dir, "auto")
			if tc.err != nil {
				if err == nil {
					t.Fatalf("no error; cameras %+v", cfg.CameraStatus)
				}
				for _, w := range tc.err {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range cfg.CameraStatus {
				if c.Decoded {
					got = append(got, c.Key)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.decoded, ",") {
				t.Fatalf("decoded %v, want %v", got, tc.decoded)
			}
			if note := CameraNote(cfg); !strings.Contains(note, tc.note) || (tc.note == "") != (note == "") {
				t.Fatalf("CameraNote %q, want %q", note, tc.note)
			}
		})
	}
}

// TestCamerasAutoOfflinePartialCache: offline, a Hub cache holding only
// some of a camera's video files (the episodes an earlier run streamed,
// or a blob gone) makes --cameras auto fail naming the camera and the
// files, instead of dropping the camera on this node only (issue 25
// item 4).
func TestCamerasAutoOfflinePartialCache(t *testing.T) {
	dir := videoDataset(t, func(o *datagen.Options) { o.Episodes, o.MinFrames, o.MaxFrames, o.FramesPerFile = 4, 10, 14, 25 })
	rec, err := render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hub := fakehub.New(t, dir, fakehub.Options{ID: "org/cams"})
	cache := t.TempDir()
	open := func(offline bool) (*Config, error) {
		src, err := fetch.OpenDataset(context.Background(), "org/cams", fetch.HubOptions{Endpoint: hub.URL(), CacheDir: cache, Cache: fetch.CacheFull, Offline: offline})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := shard.OpenDataset(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		last := ds.Episodes[len(ds.Episodes)-1]
		cfg := &Config{Source: src, Dataset: ds, Recipe: rec, Mode: render.ModeFallback, Workers: 2, Selection: episodeSelection([]int64{last.Index})}
		return cfg, SetupCameras(context.Background(), cfg, CameraOptions{Spec: "auto"})
	}
	// Online: the Hub lists every file; one episode's videos are fetched.
	cfg, err := open(false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := streamBytes(cfg, 8); err != nil {
		t.Fatal(err)
	}
	if n := len(videosFetched(hub)); n != 2 {
		t.Fatalf("%d videos fetched, want the episode's 2", n)
	}
	// Offline: the cache holds one of each camera's files.
	_, err = open(true)
	if err == nil || !strings.Contains(err.Error(), "--cameras auto: camera observation.images.front: ") || !strings.Contains(err.Error(), "video files are absent (videos/observation.images.front/chunk-000/file-000.mp4") {
		t.Fatalf("offline with a partial cache: %v", err)
	}
}
