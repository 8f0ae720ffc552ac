package validate

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/fakehub"
	"github.com/lrstream/lrstream/internal/tamper"
	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// needFFmpeg returns FFmpeg, skipping without it except under CI.
func needFFmpeg(t *testing.T) *video.FFmpeg {
	t.Helper()
	ff, err := video.NewFFmpeg()
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("LRSTREAM_REQUIRE_FFMPEG") != "" {
			t.Fatalf("CI: %v", err)
		}
		t.Skip(err)
	}
	return ff
}

// streamAll streams dir as `lrstream stream` does with --cameras auto
// (every camera decoded whose files exist), to the end, and returns its
// error: nil when every frame was delivered.
func streamAll(t *testing.T, dir string) error { return streamCameras(t, dir, "auto") }

// streamCameras streams dir with --cameras spec.
func streamCameras(t *testing.T, dir, spec string) error {
	t.Helper()
	ctx := context.Background()
	src, err := fetch.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(ctx, src)
	if err != nil {
		return err
	}
	rec, err := render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &pipeline.Config{Source: src, Dataset: ds, Recipe: rec, Mode: render.ModeFallback, Workers: 2}
	if err := pipeline.SetupCameras(ctx, cfg, pipeline.CameraOptions{Spec: spec}); err != nil {
		return err
	}
	defer func() {
		if cfg.Cameras != nil {
			cfg.Cameras.Release()
		}
	}()
	if err := pipeline.CheckStart([]pipeline.Mix{{Config: cfg, Weight: 1}}, pipeline.StreamOptions{BatchSize: 8}, nil); err != nil {
		return err
	}
	_, err = pipeline.Stream(ctx, cfg, pipeline.StreamOptions{BatchSize: 8}, sink.NewMsgpack(io.Discard))
	return err
}

// editInfo rewrites meta/info.json through edit.
func editInfo(t *testing.T, dir string, edit func(info map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, shard.InfoPath)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	if err := json.Unmarshal(data, &info); err != nil {
		t.Fatal(err)
	}
	edit(info)
	if data, err = json.MarshalIndent(info, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func feature(info map[string]any, key string) map[string]any {
	return info["features"].(map[string]any)[key].(map[string]any)
}

// corruption is one input stream refuses, and what validate says of it.
type corruption struct {
	name   string
	break_ func(t *testing.T, dir string)
	// deep: only validate --deep can tell (decoding the media).
	deep bool
	// want are substrings of one of validate's error findings.
	want []string
	// cameras is the --cameras stream refuses it with (default auto; a
	// camera of a kind lrstream cannot decode is left out by auto with a
	// note, issue 27, and refused by all).
	cameras string
}

// sweep checks that each corruption of base makes stream fail and
// validate report an error (with --deep when the case says so), and that
// the intact base does neither.
func sweep(t *testing.T, base string, cases []corruption) {
	ff := needFFmpeg(t)
	t.Cleanup(func() { ff.Close() })
	copyBase := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "ds")
		if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("intact", func(t *testing.T) {
		dir := copyBase(t)
		if err := streamAll(t, dir); err != nil {
			t.Fatalf("stream: %v", err)
		}
		rep := runDir(t, dir, Options{Video: ff, Deep: true})
		if !rep.Clean() {
			t.Fatalf("validate --deep: %d errors:%s", rep.Errors, dump(rep))
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyBase(t)
			tc.break_(t, dir)
			spec := tc.cameras
			if spec == "" {
				spec = "auto"
			}
			if err := streamCameras(t, dir, spec); err == nil {
				t.Fatalf("stream --cameras %s delivered every frame: not a corruption stream refuses", spec)
			}
			rep := runDir(t, dir, Options{Video: ff, Deep: tc.deep})
			found := false
			for _, f := range rep.Findings {
				s := f.String()
				ok := f.Severity == Error
				for _, w := range tc.want {
					ok = ok && strings.Contains(s, w)
				}
				found = found || ok
			}
			if !found || rep.Clean() {
				t.Fatalf("validate (deep %v) has no error with %q:%s", tc.deep, tc.want, dump(rep))
			}
		})
	}
}

// videoBase generates the video sweep's dataset: one camera, 64x96 H.264,
// 4 episodes, two in each of its two files.
func videoBase(t *testing.T) string {
	needFFmpeg(t)
	dir := filepath.Join(t.TempDir(), "base")
	o := datagen.Options{Episodes: 4, MinFrames: 16, MaxFrames: 24, FramesPerFile: 50, Density: datagen.DensityNone,
		Dim: 2, Tasks: 2, Cameras: []string{"front"}, Videos: true, VideoWidth: 96, VideoHeight: 64, Workers: 1}
	if _, err := datagen.Generate(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

const (
	frontKey  = "observation.images.front"
	frontFile = "videos/" + frontKey + "/chunk-000/file-000.mp4"
)

// ffmpegRewrite rewrites the dataset's first front video through ffmpeg
// with the given arguments (between input and output).
func ffmpegRewrite(t *testing.T, dir string, pre []string, args ...string) {
	t.Helper()
	p := filepath.Join(dir, frontFile)
	tmp := p + ".tmp.mp4"
	a := append(append([]string{"-nostdin", "-loglevel", "error", "-y"}, pre...), "-i", p)
	a = append(append(a, args...), tmp)
	if out, err := exec.Command("ffmpeg", a...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v: %s", a, err, out)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// cutFaststart makes the front video faststart (its index before the
// media) and keeps the first pct percent of it.
func cutFaststart(pct int) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		ffmpegRewrite(t, dir, nil, "-c", "copy", "-movflags", "+faststart")
		p := filepath.Join(dir, frontFile)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b[:len(b)*pct/100], 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// spanEdit moves episode row's range of the front camera in the
// episodes index to [from, to) computed from the current ranges.
func spanEdit(edit func(s []shard.VideoSpan, fps float64) tamper.Edit) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
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
		if err := tamper.Parquet(filepath.Join(dir, "meta/episodes/chunk-000/file-000.parquet"), edit(spans, ds.Info.FPS)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestValidatePredictsStream (video): every video corruption of the
// reliability audit that makes stream fail is an error of validate —
// from the cheap checks, or with --deep where only decoding can tell
// (issue 25 item 11).
func TestValidatePredictsStreamVideo(t *testing.T) {
	from, to := "videos/"+frontKey+"/from_timestamp", "videos/"+frontKey+"/to_timestamp"
	cases := []corruption{
		{name: "resolution disagrees with info.json", break_: func(t *testing.T, dir string) {
			editInfo(t, dir, func(info map[string]any) { feature(info, frontKey)["shape"] = []int{48, 96, 3} })
		}, want: []string{frontFile, "64", "info.json says 96x48"}},
		{name: "fps disagrees with info.json", break_: func(t *testing.T, dir string) {
			editInfo(t, dir, func(info map[string]any) { info["fps"] = 25 })
		}, want: []string{frontFile, "is not info.json's fps 25"}},
		{name: "shape [48,64,4]", break_: func(t *testing.T, dir string) {
			editInfo(t, dir, func(info map[string]any) { feature(info, frontKey)["shape"] = []int{48, 64, 4} })
		}, want: []string{frontKey, "4 channels"}, cameras: "all"},
		{name: "faststart cut at 60%", break_: cutFaststart(60), want: []string{frontFile, "cut short or damaged"}},
		{name: "faststart cut at 80%", break_: cutFaststart(80), want: []string{frontFile, "cut short or damaged"}},
		{name: "faststart cut at 97%", break_: cutFaststart(97), want: []string{frontFile, "cut short or damaged"}},
		{name: "flipped media bytes", deep: true, break_: func(t *testing.T, dir string) {
			p := filepath.Join(dir, frontFile)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			// In the second half of the media: past the frames ffprobe
			// decodes to probe the stream, so only decoding finds them.
			m := bytes.Index(b, []byte("mdat"))
			half := m + (len(b)-m)/2
			for k := 0; k < 40; k++ {
				b[half+k*(len(b)-half-64)/40] ^= 0xff
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: []string{frontFile, "decoding fails"}},
		{name: "one frame short", break_: func(t *testing.T, dir string) {
			ffmpegRewrite(t, dir, nil, "-vf", `select='not(eq(n\,5))',setpts=N/FRAME_RATE/TB`, "-c:v", "libx264", "-g", "2")
		}, want: []string{frontFile, "1 frame(s) short"}},
		{name: "timestamps scaled x2", break_: func(t *testing.T, dir string) {
			ffmpegRewrite(t, dir, []string{"-itsscale", "2"}, "-c", "copy")
		}, want: []string{frontFile, "is not info.json's fps 30"}},
		{name: "episode range moved by a frame", break_: spanEdit(func(s []shard.VideoSpan, fps float64) tamper.Edit {
			return tamper.Chain(tamper.SetFloat64(from, 0, s[0].From+1/fps), tamper.SetFloat64(to, 0, s[0].To+1/fps))
		}), want: []string{"episode", "overlaps episode 0's", frontFile}},
		{name: "episode pointed at another's frames", break_: spanEdit(func(s []shard.VideoSpan, fps float64) tamper.Edit {
			return tamper.Chain(tamper.SetFloat64(from, 1, 0), tamper.SetFloat64(to, 1, s[1].To-s[1].From))
		}), want: []string{"episode", "overlaps episode", frontFile}},
		{name: "a video file absent, the camera's others present", break_: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, frontFile)); err != nil {
				t.Fatal(err)
			}
		}, want: []string{frontFile, "video file missing while"}},
	}
	sweep(t, videoBase(t), cases)
}

// imageBase generates the image sweep's dataset: the front camera an
// image feature (16x16 PNGs in the data files), no video.
func imageBase(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "base")
	o := datagen.Options{Episodes: 4, MinFrames: 10, MaxFrames: 20, FramesPerFile: 40, Density: datagen.DensityNone,
		Dim: 2, Tasks: 2, Cameras: []string{"front"}, VideoWidth: 16, VideoHeight: 16, Workers: 1}
	if _, err := datagen.Generate(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
	editInfo(t, dir, func(info map[string]any) {
		f := feature(info, frontKey)
		f["dtype"] = "image"
		delete(f, "info")
	})
	files, err := filepath.Glob(filepath.Join(dir, "data", "*", "*.parquet"))
	if err != nil || len(files) < 2 {
		t.Fatalf("data files %v (%v)", files, err)
	}
	for _, p := range files {
		if err := tamper.Parquet(p, tamper.SetImages(frontKey, func(row int) []byte { return testPNG(t, 16, 16, row) })); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func testPNG(t *testing.T, w, h, seed int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i*13 + seed)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// setImage sets row 3 of the first data file's image to img.
func setImage(img func(t *testing.T) []byte) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		p := filepath.Join(dir, "data/chunk-000/file-000.parquet")
		b := img(t)
		err := tamper.Parquet(p, tamper.SetImages(frontKey, func(row int) []byte {
			if row == 3 {
				return b
			}
			return testPNG(t, 16, 16, row)
		}))
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestValidatePredictsStreamImage: every image-feature corruption that
// makes stream fail is an error of validate (issue 25 item 11: it had no
// image checks).
func TestValidatePredictsStreamImage(t *testing.T) {
	good := func(t *testing.T) []byte { return testPNG(t, 16, 16, 3) }
	at := []string{"data/chunk-000/file-000.parquet", "index 3", frontKey}
	cases := []corruption{
		{name: "column dropped", break_: func(t *testing.T, dir string) {
			if err := tamper.Parquet(filepath.Join(dir, "data/chunk-000/file-001.parquet"), tamper.Drop(frontKey)); err != nil {
				t.Fatal(err)
			}
		}, want: []string{"data/chunk-000/file-001.parquet", frontKey}},
		{name: "truncated PNG", break_: setImage(func(t *testing.T) []byte { b := good(t); return b[:len(b)/2] }), want: append(at, "PNG truncated")},
		{name: "garbage", break_: setImage(func(*testing.T) []byte { return []byte("garbage, not an image") }), want: append(at, "decoding image header")},
		{name: "empty", break_: setImage(func(*testing.T) []byte { return []byte{} }), want: append(at, "decoding image header")},
		{name: "null", break_: setImage(func(*testing.T) []byte { return nil }), want: append(at, "no image (null)")},
		{name: "wrong size", break_: setImage(func(t *testing.T) []byte { return testPNG(t, 17, 16, 0) }), want: append(at, "info.json says 16x16")},
		{name: "flipped byte", break_: setImage(func(t *testing.T) []byte {
			b := good(t)
			b[len(b)-20] ^= 0x40
			return b
		}), want: append(at, "CRC mismatch")},
	}
	sweep(t, imageBase(t), cases)
}

// TestValidateExtraFrames: a video with a frame duplicated (the others
// re-timed) streams — its timestamps match — but validate warns that
// the file holds frames its episodes do not account for.
func TestValidateExtraFrames(t *testing.T) {
	ff := needFFmpeg(t)
	dir := videoBase(t)
	ffmpegRewrite(t, dir, nil, "-vf", `loop=loop=1:size=1:start=5,setpts=N/FRAME_RATE/TB`, "-c:v", "libx264", "-g", "2")
	rep := runDir(t, dir, Options{Video: ff})
	if !has(rep, Warning, CheckVideo, frontFile, "holds 1 frame(s) past the end of its last episode") {
		t.Fatalf("no warning:%s", dump(rep))
	}
}

// TestValidateVideoPathTemplate: a dataset whose video_path is not the
// default, which stream decodes, has no "video file missing" finding.
func TestValidateVideoPathTemplate(t *testing.T) {
	ff := needFFmpeg(t)
	dir := videoBase(t)
	const def = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
	if err := os.Rename(filepath.Join(dir, "videos"), filepath.Join(dir, "media")); err != nil {
		t.Fatal(err)
	}
	if err := tamper.Replace(filepath.Join(dir, shard.InfoPath), def, "media/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"); err != nil {
		t.Fatal(err)
	}
	if err := streamAll(t, dir); err != nil {
		t.Fatalf("stream: %v", err)
	}
	rep := runDir(t, dir, Options{Video: ff, Deep: true})
	for _, f := range rep.Findings {
		if f.Check == CheckVideo && f.Severity != Info {
			t.Errorf("finding %s", f)
		}
	}
	if !rep.Clean() {
		t.Fatalf("validate:%s", dump(rep))
	}
}

// TestValidateHubVideos: with --deep a Hub dataset's videos are fetched
// and checked as a local dataset's are (stream fetches them too).
func TestValidateHubVideos(t *testing.T) {
	ff := needFFmpeg(t)
	dir := videoBase(t)
	ffmpegRewrite(t, dir, nil, "-vf", `select='not(eq(n\,5))',setpts=N/FRAME_RATE/TB`, "-c:v", "libx264", "-g", "2")
	hub := fakehub.New(t, dir, fakehub.Options{ID: "org/videos"})
	src, err := fetch.OpenDataset(context.Background(), "org/videos", fetch.HubOptions{Endpoint: hub.URL(), CacheDir: t.TempDir(), Cache: fetch.CacheFull})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), src, Options{Video: ff, Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	if !has(rep, Error, CheckVideo, frontFile, "1 frame(s) short") {
		t.Fatalf("the short video is not reported:%s", dump(rep))
	}
}

// TestValidateNotesBackends: a camera whose video LeRobot's two backends
// decode differently (tagged BT.709, or 10-bit) gets one info finding; the
// generator's untagged 8-bit videos none.
func TestValidateNotesBackends(t *testing.T) {
	ff, err := video.NewFFmpeg()
	if err != nil {
		t.Skip(err)
	}
	note := "torchcodec and pyav backends decode its frames to different pixels"
	for _, tc := range []struct {
		name string
		args []string
		want string // "" when no note is due
	}{
		{"untagged 8-bit", nil, ""},
		{"bt709", []string{"-c:v", "libx264", "-g", "2", "-colorspace", "bt709"}, "tagged bt709"},
		{"10-bit", []string{"-c:v", "libx264", "-g", "2", "-pix_fmt", "yuv420p10le"}, "a yuv420p10le video"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := videoBase(t)
			if tc.args != nil {
				ffmpegRewrite(t, dir, nil, tc.args...)
			}
			rep := runDir(t, dir, Options{Video: ff})
			got := has(rep, Info, CheckVideo, frontKey, note)
			if got != (tc.want != "") || (got && !has(rep, Info, CheckVideo, frontKey, tc.want, "--video-backend pyav")) {
				t.Errorf("note %v, want %q:%s", got, tc.want, dump(rep))
			}
			if !rep.Clean() {
				t.Errorf("not clean:%s", dump(rep))
			}
		})
	}
}
