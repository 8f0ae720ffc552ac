package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// needFFmpeg skips a frame test without ffmpeg, except under CI (which
// installs it): there its absence fails.
func needFFmpeg(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		if os.Getenv("CI") != "" || os.Getenv("LRSTREAM_REQUIRE_FFMPEG") != "" {
			t.Fatalf("CI: ffmpeg not found: %v", err)
		}
		t.Skipf("ffmpeg not found: %v", err)
	}
}

// videoDataset generates a small dataset with two cameras (96×64 by
// default), several episodes per mp4. Datasets are generated once per
// distinct options and copied into each test's directory (tests may break
// their copy's files): every mp4 is an ffmpeg process, ~70 ms of CPU to
// start, and most tests ask for the same few datasets.
func videoDataset(t testing.TB, edit func(*datagen.Options)) string {
	t.Helper()
	needFFmpeg(t)
	o := datagen.Options{Episodes: 5, MinFrames: 12, MaxFrames: 30, FramesPerFile: 50, Density: datagen.DensityNone,
		Dim: 2, Tasks: 2, Videos: true, VideoWidth: 96, VideoHeight: 64, Workers: 1}
	if edit != nil {
		edit(&o)
	}
	src := generatedVideos.get(t, o)
	dir := filepath.Join(t.TempDir(), "ds")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// generatedVideos is videoDataset's cache of generated datasets, removed
// by TestMain.
var generatedVideos videoCache

type videoCache struct {
	mu   sync.Mutex
	root string
	dirs map[string]string // fmt %+v of the options → dataset
}

func (c *videoCache) get(t testing.TB, o datagen.Options) string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	key := fmt.Sprintf("%+v", o)
	if dir, ok := c.dirs[key]; ok {
		return dir
	}
	if c.root == "" {
		root, err := os.MkdirTemp("", "lrstream-pipeline-videos")
		if err != nil {
			t.Fatal(err)
		}
		c.root, c.dirs = root, map[string]string{}
	}
	dir := filepath.Join(c.root, fmt.Sprint(len(c.dirs)))
	if _, err := datagen.Generate(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
	c.dirs[key] = dir
	return dir
}

func (c *videoCache) remove() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.root != "" {
		os.RemoveAll(c.root)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	generatedVideos.remove()
	os.Exit(code)
}

func cameraConfig(t testing.TB, dir string, spec string) (*Config, error) {
	t.Helper()
	src, err := fetch.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Source: src, Dataset: ds, Recipe: rec, Mode: render.ModeFallback, Workers: 2}
	return cfg, SetupCameras(context.Background(), cfg, CameraOptions{Spec: spec})
}

func streamBytes(cfg *Config, bs int) ([]byte, *Stats, error) {
	var buf bytes.Buffer
	st, err := Stream(context.Background(), cfg, StreamOptions{BatchSize: bs}, sink.NewMsgpack(&buf))
	return buf.Bytes(), st, err
}

func decodeAll(t testing.TB, b []byte) (*sink.Header, []*sink.DecodedBatch) {
	t.Helper()
	d := sink.NewDecoder(bytes.NewReader(b))
	var h *sink.Header
	var out []*sink.DecodedBatch
	for {
		m, err := d.Next()
		if errors.Is(err, io.EOF) {
			return h, out
		}
		if err != nil {
			t.Fatal(err)
		}
		switch m.Type {
		case sink.TypeHeader:
			h = m.Header
		case sink.TypeBatch:
			out = append(out, m.Batch)
		case sink.TypeError:
			t.Fatalf("stream error: %s", m.Error)
		}
	}
}

// fullDecode decodes every frame of an mp4 with plain ffmpeg (no seek, no
// frame selection) as CHW frames.
func fullDecode(t testing.TB, path string, w, h int) [][]byte {
	t.Helper()
	out, err := exec.Command("ffmpeg", "-nostdin", "-loglevel", "error", "-i", path, "-fps_mode", "passthrough",
		"-sws_flags", "bilinear", "-f", "rawvideo", "-pix_fmt", "rgb24", "-").Output()
	if err != nil {
		t.Fatalf("ffmpeg %s: %v", path, err)
	}
	n := w * h * 3
	var frames [][]byte
	for i := 0; i+n <= len(out); i += n {
		chw := make([]byte, n)
		for p := 0; p < w*h; p++ {
			chw[p], chw[w*h+p], chw[2*w*h+p] = out[i+3*p], out[i+3*p+1], out[i+3*p+2]
		}
		frames = append(frames, chw)
	}
	return frames
}

// samplesByIndex returns each sample's bytes of column key in the msgpack
// stream raw, by dataset index.
func samplesByIndex(t testing.TB, raw []byte, key string) map[int64][]byte {
	t.Helper()
	out := map[int64][]byte{}
	_, batches := decodeAll(t, raw)
	for _, b := range batches {
		col, ok := b.Column(key).(*sink.Array)
		if !ok {
			t.Fatalf("no column %s", key)
		}
		idx := b.Column("index").(*sink.Array)
		fb := len(col.Data) / b.Size
		for i := 0; i < b.Size; i++ {
			out[int64At(idx, i)] = col.Data[i*fb : (i+1)*fb]
		}
	}
	return out
}

func int64At(a *sink.Array, i int) int64 {
	var v int64
	for k := 0; k < 8; k++ {
		v |= int64(a.Data[8*i+k]) << (8 * k)
	}
	return v
}

// TestStreamCameraFrames: every sample's camera columns are exactly the
// frame of its video file at its position (an independent full decode),
// declared in the header as uint8 (3, H, W); output does not depend on the
// worker count.
func TestStreamCameraFrames(t *testing.T) {
	dir := videoDataset(t, nil)
	cfg, err := cameraConfig(t, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	raw, st, err := streamBytes(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	h, batches := decodeAll(t, raw)
	cams := []string{"observation.images.front", "observation.images.wrist"}
	for _, c := range cams {
		found := false
		for _, f := range h.Features {
			if f.Name == c {
				found = true
				if f.DType != "|u1" || fmt.Sprint(f.Shape) != "[3 64 96]" {
					t.Fatalf("header feature %s: %s %v", c, f.DType, f.Shape)
				}
			}
		}
		if !found {
			t.Fatalf("header has no feature %s", c)
		}
	}
	if len(h.Cameras) != 2 || !h.Cameras[0].Decoded || !h.Cameras[1].Decoded {
		t.Fatalf("header cameras %+v", h.Cameras)
	}
	// File k's first dataset index.
	fileFirst := map[int64]int64{}
	for _, e := range cfg.Dataset.Episodes {
		if v, ok := fileFirst[e.DataFile]; !ok || e.FromIndex < v {
			fileFirst[e.DataFile] = e.FromIndex
		}
	}
	epFile := map[int64]int64{}
	for _, e := range cfg.Dataset.Episodes {
		epFile[e.Index] = e.DataFile
	}
	decoded := map[string][][]byte{}
	n := 0
	for _, b := range batches {
		idx := b.Column("index").(*sink.Array)
		eps := b.Column("episode_index").(*sink.Array)
		for ci, c := range cams {
			col := b.Column(c).(*sink.Array)
			if fmt.Sprint(col.Shape) != fmt.Sprint([]int{b.Size, 3, 64, 96}) {
				t.Fatalf("batch %d %s shape %v", b.Meta.Seq, c, col.Shape)
			}
			for i := 0; i < b.Size; i++ {
				f := epFile[int64At(eps, i)]
				path := filepath.Join(dir, fmt.Sprintf("videos/%s/chunk-000/file-%03d.mp4", c, f))
				if decoded[path] == nil {
					decoded[path] = fullDecode(t, path, 96, 64)
				}
				k := int64At(idx, i) - fileFirst[f]
				want := decoded[path][k]
				fb := 3 * 64 * 96
				if got := col.Data[i*fb : (i+1)*fb]; !bytes.Equal(got, want) {
					t.Fatalf("index %d camera %s: pixels differ from frame %d of %s", int64At(idx, i), c, k, path)
				}
				if ci == 0 {
					n++
				}
			}
		}
	}
	if int64(n) != cfg.Dataset.Info.TotalFrames || st.Frames != int64(n) {
		t.Fatalf("%d samples (%d counted), dataset has %d frames", n, st.Frames, cfg.Dataset.Info.TotalFrames)
	}
	cfg.Workers = 1
	raw1, _, err := streamBytes(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, raw1) {
		t.Fatal("--workers 1 and 2 streams differ")
	}
}

// TestCamerasChoice: --cameras none/auto/all/list, with a camera's video
// files absent.
func TestCamerasChoice(t *testing.T) {
	dir := videoDataset(t, func(o *datagen.Options) { o.Episodes = 2; o.FramesPerFile = 100 })
	if err := os.RemoveAll(filepath.Join(dir, "videos", "observation.images.wrist")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		spec    string
		decoded []string
		setErr  string // from SetupCameras
	}{
		{spec: "none"},
		{spec: "", decoded: []string{"observation.images.front"}},
		{spec: "auto", decoded: []string{"observation.images.front"}},
		{spec: "observation.images.front", decoded: []string{"observation.images.front"}},
		{spec: "all", setErr: "--cameras all: camera observation.images.wrist: video file videos/observation.images.wrist/chunk-000/file-000.mp4 (episode 0) is not in"},
		{spec: "observation.images.wrist", setErr: "1 of the 1 video file(s) the selected episodes need are absent"},
		{spec: "observation.images.top", setErr: "not a camera of the dataset"},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			cfg, err := cameraConfig(t, dir, tc.spec)
			if tc.setErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.setErr) {
					t.Fatalf("SetupCameras error %v, want %q", err, tc.setErr)
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
				} else if c.Reason == "" {
					t.Errorf("camera %s not decoded without a reason", c.Key)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.decoded) {
				t.Fatalf("decoded %v, want %v", got, tc.decoded)
			}
			raw, _, err := streamBytes(cfg, 8)
			if err != nil {
				t.Fatal(err)
			}
			h, _ := decodeAll(t, raw)
			var cols []string
			for _, f := range h.Features {
				if strings.HasPrefix(f.Name, "observation.images.") {
					cols = append(cols, f.Name)
				}
			}
			if fmt.Sprint(cols) != fmt.Sprint(tc.decoded) {
				t.Fatalf("header camera columns %v, want %v", cols, tc.decoded)
			}
		})
	}
}

// TestCameraBadVideos: broken video files are errors naming file, camera,
// episode and index (never a panic, a hang or a wrong frame); with
// SkipErrors the frames are counted and skipped. (A file absent at startup
// is a SetupCameras error: TestCamerasAbsentAtStartup; here it goes
// missing after.)
func TestCameraBadVideos(t *testing.T) {
	const cam = "observation.images.front"
	file := "videos/" + cam + "/chunk-000/file-000.mp4"
	reencode := func(dir string, extra ...string) {
		p := filepath.Join(dir, file)
		tmp := p + ".tmp.mp4"
		args := append([]string{"-nostdin", "-loglevel", "error", "-y", "-i", p}, extra...)
		args = append(args, "-c:v", "libx264", "-g", "2", tmp)
		if out, err := exec.Command("ffmpeg", args...).CombinedOutput(); err != nil {
			t.Fatalf("ffmpeg: %v: %s", err, out)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		break_ func(dir string)
		want   string
		// wholeFile: the file is refused before any of its frames is
		// used (CheckStream), so with SkipErrors every sample of it is
		// skipped, none delivered.
		wholeFile bool
	}{
		{"missing file (removed after startup)", nil, "no such file", true},
		{"truncated", func(dir string) {
			p := filepath.Join(dir, file)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
		}, "Invalid data found", true},
		{"not a video", func(dir string) { os.WriteFile(filepath.Join(dir, file), []byte("garbage"), 0o644) }, "ffprobe", true},
		{"shorter than its episodes", func(dir string) { reencode(dir, "-frames:v", "10") }, "frame(s) short", true},
		// Issue 25 item 3: one frame dropped in the middle, the others
		// re-timed at the fps: every frame after it had a matching
		// timestamp and its successor's pixels.
		{"one frame short", func(dir string) { reencode(dir, "-vf", `select='not(eq(n\,5))',setpts=N/FRAME_RATE/TB`) }, "it is 1 frame(s) short", true},
		{"wrong fps", func(dir string) { reencode(dir, "-r", "25") }, "is not info.json's fps 30", true},
		// Issue 25 item 2: timestamps scaled x2 (every other query
		// matched a frame of another time).
		{"timestamps scaled x2", func(dir string) {
			p := filepath.Join(dir, file)
			tmp := p + ".tmp.mp4"
			if out, err := exec.Command("ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-itsscale", "2", "-i", p, "-c", "copy", tmp).CombinedOutput(); err != nil {
				t.Fatalf("ffmpeg: %v: %s", err, out)
			}
			if err := os.Rename(tmp, p); err != nil {
				t.Fatal(err)
			}
		}, "(r_frame_rate 15/1, avg_frame_rate", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := videoDataset(t, func(o *datagen.Options) { o.Episodes = 3; o.Cameras = []string{"front"} })
			if tc.break_ != nil {
				tc.break_(dir)
			}
			cfg, err := cameraConfig(t, dir, "all")
			if err != nil {
				t.Fatal(err)
			}
			if tc.break_ == nil {
				if err := os.Remove(filepath.Join(dir, file)); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err = streamBytes(cfg, 8)
			if err == nil {
				t.Fatal("no error")
			}
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a FrameError", err)
			}
			for _, s := range []string{file, "camera " + cam, "episode", "index", tc.want} {
				if !strings.Contains(err.Error(), s) {
					t.Fatalf("error %q does not mention %q", err, s)
				}
			}
			cfg.SkipErrors = true
			raw, st, err := streamBytes(cfg, 8)
			if err != nil {
				t.Fatalf("with SkipErrors: %v", err)
			}
			if st.Errors == 0 || st.Skipped.Total() != st.Errors {
				t.Fatalf("with SkipErrors: %d errors, %d skipped counted", st.Errors, st.Skipped.Total())
			}
			_, batches := decodeAll(t, raw)
			kept := 0
			for _, b := range batches {
				kept += b.Size
			}
			if int64(kept)+st.Errors != cfg.Dataset.Info.TotalFrames {
				t.Fatalf("kept %d + skipped %d != %d frames", kept, st.Errors, cfg.Dataset.Info.TotalFrames)
			}
			if tc.wholeFile {
				var inFile int64
				_, spans := episodeSpans(t, dir, cam)
				for _, sp := range spans {
					if sp.File == 0 {
						inFile += sp.Length
					}
				}
				if st.Errors != inFile {
					t.Fatalf("with SkipErrors: %d samples skipped, the broken file holds %d", st.Errors, inFile)
				}
			}
		})
	}
}

// TestCameraFrameProvenance: each sample's frame is the one at
// from_timestamp + timestamp of its camera's file (what inspect shows).
func TestCameraFrameProvenance(t *testing.T) {
	dir := videoDataset(t, func(o *datagen.Options) { o.Episodes = 3 })
	cfg, err := cameraConfig(t, dir, "auto")
	if err != nil {
		t.Fatal(err)
	}
	spans, err := shard.EpisodeVideos(context.Background(), cfg.Source, cfg.Dataset)
	if err != nil {
		t.Fatal(err)
	}
	from := map[string]float64{}
	for _, s := range spans {
		from[fmt.Sprint(s.Episode, s.Key)] = s.From
	}
	n := 0
	err = Run(context.Background(), cfg, func(c *Chunk) error {
		if len(c.Frames) != 2 {
			return fmt.Errorf("%d cameras' provenance", len(c.Frames))
		}
		for _, f := range c.Frames {
			for i := range f.PTS {
				want := from[fmt.Sprint(c.Batch.EpisodeIndex[i], f.Camera)] + float64(c.Batch.Timestamp[i])
				if d := f.PTS[i] - want; d > 1e-4 || d < -1e-4 || !strings.Contains(f.File[i], f.Camera) {
					return fmt.Errorf("index %d %s: frame at %g of %s, want %g", c.Batch.Index[i], f.Camera, f.PTS[i], f.File[i], want)
				}
				n++
			}
			line, err := AppendFrameJSON(nil, c, 0)
			if err != nil || !strings.Contains(string(line), `"video_frames": {"observation.images.front": {"file": "videos/observation.images.front/`) {
				return fmt.Errorf("frame JSON %s (%v)", line, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if int64(n) != 2*cfg.Dataset.Info.TotalFrames {
		t.Fatalf("%d frames checked", n)
	}
}

// TestCamerasAutoWithoutVideoColumns: --cameras auto streams a dataset
// whose episodes index has no video columns, without frames; all fails.
func TestCamerasAutoWithoutVideoColumns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	// Cameras declared, no videos, and the episodes index rewritten
	// without its videos/* columns.
	o := datagen.Options{Episodes: 2, MinFrames: 5, MaxFrames: 5, Density: datagen.DensityNone, Dim: 2, Tasks: 1, Cameras: []string{"front"}}
	if _, err := datagen.Generate(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
	o.Cameras = []string{}
	other := filepath.Join(t.TempDir(), "nocam")
	if _, err := datagen.Generate(context.Background(), other, o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(other, "meta/episodes/chunk-000/file-000.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "meta/episodes/chunk-000/file-000.parquet"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := cameraConfig(t, dir, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cameras != nil || len(cfg.CameraStatus) != 1 || cfg.CameraStatus[0].Decoded || !strings.Contains(cfg.CameraStatus[0].Reason, "missing column videos/observation.images.front/") {
		t.Fatalf("cameras %+v", cfg.CameraStatus)
	}
	if _, _, err := streamBytes(cfg, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := cameraConfig(t, dir, "all"); err == nil || !strings.Contains(err.Error(), "videos/observation.images.front/") {
		t.Fatalf("--cameras all: %v", err)
	}
}

// countingDecoder records the segments it decodes.
type countingDecoder struct {
	video.Decoder
	mu   sync.Mutex
	segs []video.Segment
}

func (d *countingDecoder) Decode(ctx context.Context, seg video.Segment, fn func(video.Frame) error) error {
	d.mu.Lock()
	d.segs = append(d.segs, seg)
	d.mu.Unlock()
	return d.Decoder.Decode(ctx, seg, fn)
}

// Prestart forwards to the wrapped decoder when it is a Prestarter (a
// FFmpeg), so that the pipeline's tests run with prestarts as a run does.
func (d *countingDecoder) Prestart(ctx context.Context, seg video.Segment, hold func()) {
	if p, ok := d.Decoder.(video.Prestarter); ok {
		p.Prestart(ctx, seg, hold)
	} else if hold != nil {
		hold()
	}
}

// Close ends the wrapped decoder's kept processes, as the pipeline does
// for an unwrapped *video.FFmpeg at the end of a run.
func (d *countingDecoder) Close() error {
	if c, ok := d.Decoder.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// TestCameraShareDecodesOnlyItsEpisodes: a worker share decodes the
// segments of its own episodes only, one decode (seek) per episode and
// camera.
func TestCameraShareDecodesOnlyItsEpisodes(t *testing.T) {
	dir := videoDataset(t, func(o *datagen.Options) { o.Episodes = 4 })
	for w := 0; w < 2; w++ {
		cfg, err := cameraConfig(t, dir, "none")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Share = Share{Worker: w, NumWorkers: 2}
		cd := &countingDecoder{}
		err = SetupCameras(context.Background(), cfg, CameraOptions{Spec: "all", NewDecoder: func() (video.Decoder, error) {
			d, err := video.NewFFmpeg()
			cd.Decoder = d
			return cd, err
		}})
		if err != nil {
			t.Fatal(err)
		}
		sel, err := shareSelection(cfg.Dataset, cfg.Selection, cfg.Share)
		if err != nil {
			t.Fatal(err)
		}
		var mine []int64
		for _, e := range cfg.Dataset.Episodes {
			if sel.Contains(e.Index) {
				mine = append(mine, e.Index)
			}
		}
		if _, _, err := streamBytes(cfg, 8); err != nil {
			t.Fatal(err)
		}
		if got, want := len(cd.segs), 2*len(mine); got != want {
			t.Fatalf("worker %d: %d segments decoded, want %d (2 cameras × episodes %v)", w, got, want, mine)
		}
		// Each decoded segment lies within one of its episodes' spans.
		spans, _ := shard.EpisodeVideos(context.Background(), cfg.Source, cfg.Dataset)
		for _, s := range cd.segs {
			ok := false
			for _, sp := range spans {
				if slices.Contains(mine, sp.Episode) && s.Start >= sp.From-0.05 && s.End <= sp.To+0.05 {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("worker %d decoded [%g, %g], outside its episodes %v", w, s.Start, s.End, mine)
			}
		}
	}
}

// TestCamerasNonLocalSource: a source that is not a local directory (an
// embedded FS) decodes its cameras from temporary copies of the video
// files (fetch.Materialize), with the local copy's pixels, and removes
// the copies after the run — a plan-order stream and a training order.
func TestCamerasNonLocalSource(t *testing.T) {
	dir := videoDataset(t, func(o *datagen.Options) { o.Episodes = 4 })
	local, err := cameraConfig(t, dir, "all")
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := streamBytes(local, 8)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	src := fetch.NewFS("org/remote-like", os.DirFS(dir))
	ds, err := shard.OpenDataset(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Source: src, Dataset: ds, Recipe: rec, Mode: render.ModeFallback}
	if err := SetupCameras(context.Background(), cfg, CameraOptions{}); err != nil {
		t.Fatal(err)
	}
	if cfg.Cameras == nil || len(cfg.Cameras.Cameras) != 2 {
		t.Fatalf("auto: cameras %+v", cfg.CameraStatus)
	}
	got, _, err := streamBytes(cfg, 8)
	if err != nil {
		t.Fatal(err)
	}
	g, w := cameraColumns(t, got), cameraColumns(t, want)
	if len(g) != len(w) || len(g) == 0 {
		t.Fatalf("%d frames from the embedded source, %d local", len(g), len(w))
	}
	for k, v := range w {
		if !bytes.Equal(g[k], v) {
			t.Fatalf("%s differs from the local copy", k)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("temporary copies left after the run: %v", left)
	}
	// A training order in pieces, which prestarts FFmpeg on the copies
	// (Materializer.Held): the same frames, and the copies still removed
	// when the run ends, prestarted processes and all.
	cfg.PieceBytes, cfg.minPieceRows = 1, 6
	var buf bytes.Buffer
	if _, err := Train(context.Background(), cfg, StreamOptions{BatchSize: 8}, TrainOptions{Shuffle: true, Seed: 2, Epochs: 1}, sink.NewMsgpack(&buf)); err != nil {
		t.Fatal(err)
	}
	g = cameraColumns(t, buf.Bytes())
	if len(g) != len(w) {
		t.Fatalf("%d frames from the training order, %d local", len(g), len(w))
	}
	for k, v := range w {
		if !bytes.Equal(g[k], v) {
			t.Fatalf("training order: %s differs from the local copy", k)
		}
	}
	if pre, _ := cfg.Cameras.Decoder.(*video.FFmpeg).Prestarts(); pre == 0 {
		t.Fatal("no process prestarted: the test does not cover prestarts on temporary copies")
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("temporary copies left after the training run: %v", left)
	}
}

// TestTrainCameras: the training order delivers each sample's own frames,
// the keep index decodes no video, and a camera failure is an error
// naming the frame (it cannot be skipped in a fixed order).
func TestTrainCameras(t *testing.T) {
	dir := videoDataset(t, func(o *datagen.Options) { o.Episodes = 3 })
	run := func(cfg *Config) ([]byte, error) {
		var buf bytes.Buffer
		_, err := Train(context.Background(), cfg, StreamOptions{BatchSize: 8}, TrainOptions{Shuffle: true, Seed: 3, Epochs: 1}, sink.NewMsgpack(&buf))
		return buf.Bytes(), err
	}
	cfg, err := cameraConfig(t, dir, "none")
	if err != nil {
		t.Fatal(err)
	}
	cd := &countingDecoder{}
	if err := SetupCameras(context.Background(), cfg, CameraOptions{Spec: "all", NewDecoder: func() (video.Decoder, error) {
		d, err := video.NewFFmpeg()
		cd.Decoder = d
		return cd, err
	}}); err != nil {
		t.Fatal(err)
	}
	raw, err := run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(cd.segs), 2*len(cfg.Dataset.Episodes); got != want {
		t.Fatalf("%d segments decoded, want %d (one per episode and camera: no decoding in the keep index)", got, want)
	}
	// Same pixels as plan order (frames converted as decoded; the
	// training order holds them as decoded: Config.StoredFrames), sample
	// by sample, every camera; and so with a --delta-timestamps camera
	// window (gathered from stored frames).
	same := func(what string, raw []byte) {
		t.Helper()
		plan, _, err := streamBytes(cfg, 8)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"observation.images.front", "observation.images.wrist", "observation.images.front_is_pad"} {
			if key == "observation.images.front_is_pad" && cfg.Deltas == nil {
				continue
			}
			want, got := samplesByIndex(t, plan, key), samplesByIndex(t, raw, key)
			if len(got) != int(cfg.Dataset.Info.TotalFrames) || len(want) != len(got) {
				t.Fatalf("%s: %s: %d samples, plan order %d", what, key, len(got), len(want))
			}
			for i, b := range got {
				if !bytes.Equal(b, want[i]) {
					t.Fatalf("%s: %s index %d: shuffled frame differs from plan order's", what, key, i)
				}
			}
		}
	}
	same("frames", raw)
	if cfg.Deltas, err = ParseDeltaTimestamps("observation.images.front=-2/30,0,1/30"); err != nil {
		t.Fatal(err)
	}
	if raw, err = run(cfg); err != nil {
		t.Fatal(err)
	}
	same("camera window", raw)
	cfg.Deltas = nil
	// Resized: FFmpeg scales and gives RGB24 rows, held as such.
	if err := SetupCameras(context.Background(), cfg, CameraOptions{Spec: "all", ResizeH: 24, ResizeW: 34}); err != nil {
		t.Fatal(err)
	}
	if raw, err = run(cfg); err != nil {
		t.Fatal(err)
	}
	same("resized", raw)
	if !trainConfigs([]Mix{{Config: cfg, Weight: 1}}, TrainOptions{})[0].Config.StoredFrames {
		t.Fatal("a training stream's camera frames are not held as decoded")
	}
	// A broken video: an error naming the frame, even with SkipErrors.
	if err := os.WriteFile(filepath.Join(dir, "videos/observation.images.front/chunk-000/file-000.mp4"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.SkipErrors = true
	if _, err := run(cfg); err == nil || !strings.Contains(err.Error(), "camera observation.images.front, episode") {
		t.Fatalf("broken video in the training order: %v", err)
	}
}
