package video

import (
	"context"
	"github.com/lrstream/lrstream/framecache"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
)

func TestParseProbe(t *testing.T) {
	tests := []struct {
		name string
		out  string
		key  yuvKey
		ok   bool
	}{
		{"untagged", `{"streams": [{"pix_fmt": "yuv420p", "width": 640, "height": 480}]}`, yuvKey{w: 640, h: 480}, true},
		{"tagged 709", `{"streams": [{"pix_fmt": "yuv420p", "width": 64, "height": 48, "color_space": "bt709", "color_range": "tv"}]}`, yuvKey{64, 48, "bt709", "tv"}, true},
		{"unknown", `{"streams": [{"pix_fmt": "yuv420p", "width": 64, "height": 48, "color_space": "unknown", "color_range": "unknown"}]}`, yuvKey{64, 48, "unknown", "unknown"}, true},
		{"full range", `{"streams": [{"pix_fmt": "yuv420p", "width": 64, "height": 48, "color_range": "pc"}]}`, yuvKey{64, 48, "", "pc"}, false},
		{"yuvj", `{"streams": [{"pix_fmt": "yuvj420p", "width": 64, "height": 48}]}`, yuvKey{w: 64, h: 48}, false},
		{"10 bit", `{"streams": [{"pix_fmt": "yuv420p10le", "width": 64, "height": 48}]}`, yuvKey{w: 64, h: 48}, false},
		{"444", `{"streams": [{"pix_fmt": "yuv444p", "width": 64, "height": 48}]}`, yuvKey{w: 64, h: 48}, false},
		{"bt2020", `{"streams": [{"pix_fmt": "yuv420p", "width": 64, "height": 48, "color_space": "bt2020nc"}]}`, yuvKey{64, 48, "bt2020nc", ""}, false},
		{"odd width", `{"streams": [{"pix_fmt": "yuv420p", "width": 63, "height": 48}]}`, yuvKey{w: 63, h: 48}, false},
		{"no stream", `{"streams": []}`, yuvKey{}, false},
		{"not json", `moov atom not found`, yuvKey{}, false},
		{"huge", `{"streams": [{"pix_fmt": "yuv420p", "width": 65536, "height": 2}]}`, yuvKey{w: 65536, h: 2}, false},
	}
	for _, tc := range tests {
		key, ok := parseProbe([]byte(tc.out))
		if ok != tc.ok || (tc.ok && key != tc.key) {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, key, ok, tc.key, tc.ok)
		}
	}
}

func FuzzParseProbe(f *testing.F) {
	f.Add([]byte(`{"streams": [{"pix_fmt": "yuv420p", "width": 640, "height": 480, "color_space": "bt709", "color_range": "tv"}]}`))
	f.Add([]byte(`{"streams": [{"pix_fmt": "yuv420p", "width": -2, "height": 480}]}`))
	f.Fuzz(func(t *testing.T, out []byte) {
		key, ok := parseProbe(out)
		if ok && (key.w <= 0 || key.h <= 0 || key.w%2 != 0 || key.h%2 != 0 || key.w > 1<<15 || key.h > 1<<15 || yuvFor(key.space, key.rng) == nil) {
			t.Fatalf("accepted %+v", key)
		}
	})
}

func TestSetparams(t *testing.T) {
	for _, tc := range []struct{ space, rng, want string }{
		{"", "", ""}, {"unknown", "unknown", ""}, {"bt709", "", "setparams=colorspace=bt709"},
		{"", "tv", "setparams=range=tv"}, {"bt709", "tv", "setparams=colorspace=bt709:range=tv"},
	} {
		if got := setparams(tc.space, tc.rng); got != tc.want {
			t.Errorf("setparams(%q, %q) = %q, want %q", tc.space, tc.rng, got, tc.want)
		}
	}
}

// TestYUVCheck checks that the runtime check accepts the conversion that
// matches FFmpeg and refuses one that does not (the wrong matrix), for a
// size with a partial vector block.
func TestYUVCheck(t *testing.T) {
	d := needFFmpeg(t)
	ctx := context.Background()
	for _, key := range []yuvKey{{w: 640, h: 480}, {w: 34, h: 22, space: "bt709", rng: "tv"}} {
		if !d.matches(ctx, key, yuvFor(key.space, key.rng)) {
			t.Errorf("%+v: the matching conversion was refused", key)
		}
		wrong := limitedYUV("wrong", matrixBT709)
		if key.space == "bt709" {
			wrong = limitedYUV("wrong", matrixBT601)
		}
		if d.matches(ctx, key, wrong) {
			t.Errorf("%+v: the wrong matrix was accepted", key)
		}
	}
	if d.Probe == "" {
		t.Fatal("NewFFmpeg found no ffprobe beside ffmpeg")
	}
}

// TestFFmpegYUVFrames decodes videos with frames through the pipe as YUV
// (the default where it applies) and as RGB24 from FFmpeg, and checks that
// every frame's pixels are identical; a yuv444p video comes as RGB24.
func TestFFmpegYUVFrames(t *testing.T) {
	d := needFFmpeg(t)
	dir := t.TempDir()
	tests := []struct {
		name, codec, pixFmt string
		w, h                int
		yuv                 bool
		extra               []string
	}{
		{"h264", "libx264", "yuv420p", 64, 48, true, nil},
		{"av1", "libsvtav1", "yuv420p", 64, 64, true, nil},
		{"partial block", "libx264", "yuv420p", 34, 22, true, nil},
		{"bt709", "libx264", "yuv420p", 64, 48, true, []string{"-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709", "-color_range", "tv"}},
		{"full range", "libx264", "yuv420p", 64, 48, false, []string{"-color_range", "pc"}},
		{"444", "libx264", "yuv444p", 32, 16, false, nil},
		{"10-bit", "libsvtav1", "yuv420p10le", 64, 64, false, nil},
	}
	for _, tc := range tests {
		for _, backend := range []string{BackendTorchcodec, BackendPyAV} {
			t.Run(tc.name+"/"+backend, func(t *testing.T) {
				p := filepath.Join(dir, tc.name+"-"+backend+".mp4")
				args := []string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi",
					"-i", "testsrc2=size=" + itoa(tc.w) + "x" + itoa(tc.h) + ":rate=30", "-frames:v", "12",
					"-c:v", tc.codec, "-pix_fmt", tc.pixFmt, "-g", "5"}
				if tc.codec == "libsvtav1" {
					args = append(args, "-svtav1-params", "verbose=0")
				}
				args = append(args, tc.extra...)
				if out, err := exec.Command("ffmpeg", append(args, p)...).CombinedOutput(); err != nil {
					t.Fatalf("ffmpeg: %v: %s", err, out)
				}
				decode := func(rgb bool) (frames [][]byte, yuv int) {
					dec := &FFmpeg{Path: d.Path, Probe: d.Probe, RGB24: rgb, MaxIdle: -1, Backend: backend}
					err := dec.Decode(context.Background(), Segment{Path: p, Start: 0, End: 100}, func(f Frame) error {
						if f.YUV != nil {
							yuv++
						}
						chw := make([]byte, 3*f.Width*f.Height)
						ToCHW(chw, f)
						frames = append(frames, chw)
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					return frames, yuv
				}
				got, yuv := decode(false)
				want, rgbYUV := decode(true)
				if len(got) != 12 || len(want) != 12 {
					t.Fatalf("%d and %d frames, want 12", len(got), len(want))
				}
				if rgbYUV != 0 {
					t.Fatalf("RGB24 set: %d YUV frames", rgbYUV)
				}
				if tc.yuv != (yuv == 12) || (!tc.yuv && yuv != 0) {
					t.Fatalf("%d of 12 frames came as YUV, want yuv=%v", yuv, tc.yuv)
				}
				for i := range got {
					if string(got[i]) != string(want[i]) {
						t.Fatalf("frame %d: YUV-converted pixels differ from FFmpeg's RGB24", i)
					}
				}
			})
		}
	}
}

// TestFFmpegPrepareProbesOnce checks that Prepare and concurrent segments
// of one file run ffprobe once, and that the prepared file's frames come as
// YUV.
func TestFFmpegPrepareProbesOnce(t *testing.T) {
	d := needFFmpeg(t)
	dir := t.TempDir()
	p := makeVideo(t, dir, "a.mp4", "libx264", 64, 48, 30, 10, 5)
	count := filepath.Join(dir, "probes")
	wrapper := filepath.Join(dir, "ffprobe")
	script := "#!/bin/sh\necho x >> " + count + "\nexec " + d.Probe + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dec := &FFmpeg{Path: d.Path, Probe: wrapper}
	defer dec.Close()
	var wg sync.WaitGroup
	wg.Go(func() { dec.Prepare(context.Background(), p) })
	yuv := make([]int, 3)
	for i := range yuv {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := dec.Decode(context.Background(), Segment{Path: p, Start: float64(i) * 0.1, End: float64(i)*0.1 + 0.05}, func(f Frame) error {
				if f.YUV != nil {
					yuv[i]++
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	out, err := os.ReadFile(count)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "x"); n != 1 {
		t.Fatalf("ffprobe ran %d times, want 1", n)
	}
	for i, n := range yuv {
		if n == 0 {
			t.Errorf("segment %d: no frame came as YUV", i)
		}
	}
}

// preparer is a Decoder that records what it was asked to prepare; with
// block set, each Prepare waits for its context to end.
type preparer struct {
	Decoder
	block bool
	mu    sync.Mutex
	paths []string
}

func (p *preparer) Prepare(ctx context.Context, path string) {
	p.mu.Lock()
	p.paths = append(p.paths, path)
	p.mu.Unlock()
	if p.block {
		<-ctx.Done()
	}
}

// prepared returns what p prepared, sorted.
func (p *preparer) prepared() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := slices.Clone(p.paths)
	slices.Sort(got)
	p.paths = nil
	return got
}

// twoCameraSet is a Set of two cameras (cam.a, cam.b) with one 10-frame
// video each in dir, decoded by p; located counts Locate calls.
func twoCameraSet(t *testing.T, p *preparer, located *atomic.Int32) (*Set, string) {
	t.Helper()
	dir := t.TempDir()
	info := &schema.Info{FPS: 30, VideoPath: "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
		Features: []schema.Feature{
			{Name: "cam.a", DType: schema.DTypeVideo, Shape: []int{48, 64, 3}},
			{Name: "cam.b", DType: schema.DTypeVideo, Shape: []int{48, 64, 3}},
		}}
	var spans []shard.VideoSpan
	for _, k := range []string{"cam.a", "cam.b"} {
		makeVideo(t, dir, "videos/"+k+"/chunk-000/file-000.mp4", "libx264", 64, 48, 30, 10, 5)
		spans = append(spans, shard.VideoSpan{Episode: 0, Key: k, To: 10.0 / 30})
	}
	loc := func(ctx context.Context, name string) (string, func(), error) {
		located.Add(1)
		return filepath.Join(dir, name), func() {}, nil
	}
	set, err := NewSet(p, info, spans, []string{"cam.a", "cam.b"}, 0, 0, 0, loc)
	if err != nil {
		t.Fatal(err)
	}
	return set, dir
}

// TestSetPreparesOtherCameras checks that the first segment a Set decodes
// has the decoder prepare the other cameras' files of that episode, that
// Start prepares the PrepareFirst episode's files, and that nothing is
// located (fetched) before Start or the first segment.
func TestSetPreparesOtherCameras(t *testing.T) {
	d := needFFmpeg(t)
	p := &preparer{Decoder: d}
	var located atomic.Int32
	set, dir := twoCameraSet(t, p, &located)
	a, b := filepath.Join(dir, "videos/cam.a/chunk-000/file-000.mp4"), filepath.Join(dir, "videos/cam.b/chunk-000/file-000.mp4")
	set.PrepareFirst(0)
	if n := located.Load(); n != 0 {
		t.Fatalf("%d files located before Start", n)
	}
	buf := make([]byte, set.Cameras[0].FrameBytes())
	if err := set.Fill(context.Background(), 0, []int64{0}, []int64{0}, []float32{0}, buf, func(i int, err error) { t.Error(err) }, nil); err != nil {
		t.Fatal(err)
	}
	set.Release() // waits for the preparations
	if got := p.prepared(); !slices.Equal(got, []string{b}) {
		t.Fatalf("the first segment prepared %v, want %v", got, []string{b})
	}
	set.Start(context.Background())
	set.Release()
	if got := p.prepared(); !slices.Equal(got, []string{a, b}) {
		t.Fatalf("Start prepared %v, want %v", got, []string{a, b})
	}
}

// TestSetReleaseStopsPreparing: Release cancels preparations under way
// and returns once their goroutines have, then releases the files.
func TestSetReleaseStopsPreparing(t *testing.T) {
	p := &preparer{Decoder: needFFmpeg(t), block: true}
	var located atomic.Int32
	set, _ := twoCameraSet(t, p, &located)
	released := false
	set.ReleaseFiles = func() { released = true }
	set.PrepareFirst(0)
	set.Start(context.Background())
	done := make(chan struct{})
	go func() {
		set.Release()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Release did not stop the blocked preparations")
	}
	if !released {
		t.Fatal("Release did not call ReleaseFiles")
	}
	if n := len(p.prepared()); n != 2 {
		t.Fatalf("%d files prepared, want 2", n)
	}
}

// TestSetStartWithFrameCache: with a frame cache that holds nothing of the
// dataset, Start prepares the PrepareFirst episode's files as without one
// (they will be decoded); once it holds entries of the dataset, Start
// prepares nothing (a cached segment needs neither file nor FFmpeg).
func TestSetStartWithFrameCache(t *testing.T) {
	d := needFFmpeg(t)
	c, err := framecache.Open(framecache.Options{Dir: t.TempDir(), Budget: 1 << 30, MaxPending: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		name   string
		stored bool
		want   int
	}{{"empty", false, 2}, {"holds the dataset", true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.stored {
				w := c.Create("g", "some file", 0, nil)
				w.Add(0, []byte{1})
				if err := w.Commit(1); err != nil {
					t.Fatal(err)
				}
			}
			p := &preparer{Decoder: d}
			var located atomic.Int32
			set, _ := twoCameraSet(t, p, &located)
			set.Frames = &Frames{Cache: c, Group: "g"}
			set.PrepareFirst(0)
			set.Start(context.Background())
			set.Release()
			if got := p.prepared(); len(got) != tc.want {
				t.Fatalf("Start prepared %v, want %d files", got, tc.want)
			}
		})
	}
}
