package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/fakehub"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// startupDataset is a 4-episode, 2-camera dataset whose episodes span two
// video files per camera (the same options as TestCamerasHub: generated
// once), with the wrist camera's second file removed. It returns the
// dataset, the episodes in that file, and how many video files the given
// cameras' episodes need (eps nil: every episode).
func startupDataset(t *testing.T) (dir string, inMissing []int64, files func(eps []int64, keys ...string) int) {
	t.Helper()
	dir = videoDataset(t, func(o *datagen.Options) { o.Episodes, o.MinFrames, o.MaxFrames, o.FramesPerFile = 4, 10, 14, 25 })
	const gone = "videos/observation.images.wrist/chunk-000/file-001.mp4"
	if err := os.Remove(filepath.Join(dir, gone)); err != nil {
		t.Fatal(err)
	}
	ds, spans := datasetSpans(t, dir)
	for _, sp := range spans {
		if name, _ := ds.Info.VideoFile(sp.Key, sp.Chunk, sp.File); name == gone {
			inMissing = append(inMissing, sp.Episode)
		}
	}
	if len(inMissing) == 0 || len(inMissing) == len(ds.Episodes) {
		t.Fatalf("episodes in %s: %v of %d; the test needs some, not all", gone, inMissing, len(ds.Episodes))
	}
	files = func(eps []int64, keys ...string) int {
		seen := map[string]bool{}
		for _, sp := range spans {
			if (eps == nil || slices.Contains(eps, sp.Episode)) && slices.Contains(keys, sp.Key) {
				name, _ := ds.Info.VideoFile(sp.Key, sp.Chunk, sp.File)
				seen[name] = true
			}
		}
		return len(seen)
	}
	return dir, inMissing, files
}

// TestCamerasAbsentAtStartup: --cameras all (or a list naming a camera)
// whose video files for the selected episodes (selection and share) are
// absent fails in SetupCameras — before any output, and before FFmpeg is
// looked for — naming camera, file, episode and count and saying how to go
// on; files of episodes not selected do not count; auto, which decides
// from all of a camera's files, refuses the partial camera.
func TestCamerasAbsentAtStartup(t *testing.T) {
	dir, inMissing, files := startupDataset(t)
	missing := map[int64]bool{}
	for _, e := range inMissing {
		missing[e] = true
	}
	var others []int64 // episodes whose files are all present
	for e := int64(0); e < 4; e++ {
		if !missing[e] {
			others = append(others, e)
		}
	}
	const wrist, front = "observation.images.wrist", "observation.images.front"
	first := fmt.Sprintf("camera %s: video file videos/%s/chunk-000/file-001.mp4 (episode %d) is not in ", wrist, wrist, inMissing[0])
	hints := []string{"--cameras none", "--cameras auto"}
	count := func(eps []int64, keys ...string) string {
		return fmt.Sprintf("1 of the %d video file(s)", files(eps, keys...))
	}
	tests := []struct {
		name    string
		spec    string
		sel     []int64 // nil: every episode
		share   Share
		wantErr []string // nil: no error
		decoded []string
	}{
		{name: "all", spec: "all", wantErr: append([]string{"--cameras all: " + first, count(nil, front, wrist), "camera(s) " + wrist}, hints...)},
		{name: "list naming it", spec: front + "," + wrist, wantErr: append([]string{first, count(nil, front, wrist)}, hints...)},
		{name: "list of the camera alone", spec: wrist, wantErr: []string{first, count(nil, wrist)}},
		{name: "list without it", spec: front, decoded: []string{front}},
		{name: "all, episodes whose files exist", spec: "all", sel: others, decoded: []string{front, wrist}},
		{name: "all, an episode in the absent file", spec: "all", sel: inMissing[:1], wantErr: []string{first, count(inMissing[:1], front, wrist)}},
		// Auto decides per camera from all its files (issue 25 item 4):
		// some present, some absent is an error naming camera and
		// file, whatever the selection.
		{name: "auto", spec: "auto", wantErr: []string{"--cameras auto: camera " + wrist + ": 1 of its " + fmt.Sprint(files(nil, wrist)) + " video files are absent (videos/" + wrist + "/chunk-000/file-001.mp4)", "--cameras none"}},
		{name: "auto, episodes whose files exist", spec: "auto", sel: others, wantErr: []string{"--cameras auto: camera " + wrist}},
	}
	// The shares of two workers: each fails exactly when it holds an
	// episode of the absent file.
	rec, err := render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src, err := fetch.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	for w := range 2 {
		sh := Share{Worker: w, NumWorkers: 2}
		tc := tests[0]
		tc.name, tc.share, tc.wantErr, tc.decoded = fmt.Sprintf("all, share %d of 2", w), sh, nil, []string{front, wrist}
		for _, e := range ShareEpisodes(ds, shard.Selection{}, sh) {
			if missing[e] {
				tc.wantErr, tc.decoded = []string{"camera " + wrist + ": video file videos/" + wrist + "/chunk-000/file-001.mp4"}, nil
			}
		}
		tests = append(tests, tc)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Source: src, Dataset: ds, Recipe: rec, Mode: render.ModeFallback, Workers: 2, Share: tc.share}
			if tc.sel != nil {
				cfg.Selection = episodeSelection(tc.sel)
			}
			decoders := 0
			err := SetupCameras(context.Background(), cfg, CameraOptions{Spec: tc.spec, NewDecoder: func() (video.Decoder, error) {
				decoders++
				return video.NewFFmpeg()
			}})
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; cameras %+v", cfg.CameraStatus)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				if decoders != 0 {
					t.Errorf("the decoder was made (%d) before the absent file was found", decoders)
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
			if fmt.Sprint(got) != fmt.Sprint(tc.decoded) {
				t.Fatalf("decoded %v, want %v", got, tc.decoded)
			}
			note := CameraNote(cfg)
			if tc.spec != "auto" {
				if note != "" {
					t.Fatalf("CameraNote %q, want none (the cameras were chosen)", note)
				}
				return
			}
			want := fmt.Sprintf("decoding %s; not decoding %s: video files absent, e.g. videos/%s/chunk-000/file-001.mp4; --cameras %s to silence", front, wrist, wrist, front)
			if !strings.Contains(note, want) {
				t.Fatalf("CameraNote %q, want it to say %q", note, want)
			}
		})
	}
}

// TestCamerasAbsentOnHub: on a Hub dataset the check answers from the
// file listing: --cameras all fails at startup naming the absent file,
// auto refuses the partial camera, and neither downloads a video.
func TestCamerasAbsentOnHub(t *testing.T) {
	dir, inMissing, _ := startupDataset(t)
	rec, err := render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hub := fakehub.New(t, dir, fakehub.Options{ID: "org/absent"})
	src, err := fetch.OpenDataset(context.Background(), "org/absent", fetch.HubOptions{Endpoint: hub.URL(), CacheDir: t.TempDir(), Cache: fetch.CacheNone})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec, want string
	}{
		{"all", fmt.Sprintf("video file videos/observation.images.wrist/chunk-000/file-001.mp4 (episode %d) is not in org/absent", inMissing[0])},
		// Auto decides from all of a camera's files: some absent is an
		// error (issue 25 item 4), answered from the listing too.
		{"auto", "--cameras auto: camera observation.images.wrist: 1 of its"},
	} {
		cfg := &Config{Source: src, Dataset: ds, Recipe: rec, Mode: render.ModeFallback, Workers: 2}
		err := SetupCameras(context.Background(), cfg, CameraOptions{Spec: tc.spec})
		switch {
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Fatalf("%s: error %v, want %q", tc.spec, err, tc.want)
		case tc.want == "" && err != nil:
			t.Fatalf("%s: %v", tc.spec, err)
		case tc.want == "" && (cfg.Cameras == nil || len(cfg.Cameras.Cameras) != 1):
			t.Fatalf("%s: cameras %+v, want the front camera only", tc.spec, cfg.CameraStatus)
		}
	}
	if f := videosFetched(hub); len(f) != 0 {
		t.Fatalf("videos downloaded to check them: %v", f)
	}
}

// TestCameraNote: the line commands log when cameras are left out without
// being asked to.
func TestCameraNote(t *testing.T) {
	const a, b = "observation.images.a", "observation.images.b"
	absent := func(f string) string { return filesAbsent + exampleSep + f }
	tests := []struct {
		name string
		cams []sink.Camera
		want string
	}{
		{"no cameras", nil, ""},
		{"all decoded", []sink.Camera{{Key: a, Decoded: true}, {Key: b, Decoded: true}}, ""},
		{"--cameras none", []sink.Camera{{Key: a, Reason: notSelected}, {Key: b, Reason: notSelected}}, ""},
		{"a list", []sink.Camera{{Key: a, Decoded: true}, {Key: b, Reason: notSelected}}, ""},
		{"no video files", []sink.Camera{{Key: a, Reason: absent("videos/a/f.mp4")}, {Key: b, Reason: absent("videos/b/f.mp4")}},
			"cameras: ds declares " + a + ", " + b + "; decoding none: video files absent, e.g. videos/a/f.mp4; --cameras none to silence"},
		{"one absent", []sink.Camera{{Key: a, Decoded: true}, {Key: b, Reason: absent("videos/b/f.mp4")}},
			"cameras: ds declares " + a + ", " + b + "; decoding " + a + "; not decoding " + b + ": video files absent, e.g. videos/b/f.mp4; --cameras " + a + " to silence"},
		{"episodes index", []sink.Camera{{Key: a, Reason: "episodes index: no videos columns"}, {Key: b, Reason: notSelected}},
			"cameras: ds declares " + a + ", " + b + "; decoding none: episodes index: no videos columns; --cameras none to silence"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Dataset: &schema.Dataset{ID: "ds"}, CameraStatus: tc.cams}
			if got := CameraNote(cfg); got != tc.want {
				t.Fatalf("CameraNote:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestCheckStartCameraWindow: a --delta-timestamps window on a decoded
// camera passes CheckStart; on a camera auto leaves out it is refused.
func TestCheckStartCameraWindow(t *testing.T) {
	dir, _, _ := startupDataset(t)
	// The wrist camera lacks every file (auto leaves it out; one file
	// absent of several is an error: TestCamerasAbsentAtStartup).
	if err := os.RemoveAll(filepath.Join(dir, "videos", "observation.images.wrist")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key     string
		wantErr bool
	}{
		{"observation.images.front", false},
		{"observation.images.wrist", true},
	} {
		cfg, err := cameraConfig(t, dir, "auto")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Deltas, err = ParseDeltaTimestamps(tc.key + "=0"); err != nil {
			t.Fatal(err)
		}
		err = CheckStart([]Mix{{Config: cfg, Weight: 1}}, StreamOptions{BatchSize: 8}, nil)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: CheckStart %v, want an error: %v", tc.key, err, tc.wantErr)
		}
	}
}
