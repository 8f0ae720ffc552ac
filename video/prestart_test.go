package video

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lrstream/lrstream/framecache"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
)

// recordingFFmpeg is FFmpeg recording the segments asked of Prestart and
// Decode.
type recordingFFmpeg struct {
	*FFmpeg
	mu        sync.Mutex
	pre, decs []Segment
}

func (r *recordingFFmpeg) Prestart(ctx context.Context, seg Segment, hold func()) {
	r.mu.Lock()
	r.pre = append(r.pre, seg)
	r.mu.Unlock()
	r.FFmpeg.Prestart(ctx, seg, hold)
}

func (r *recordingFFmpeg) Decode(ctx context.Context, seg Segment, fn func(Frame) error) error {
	r.mu.Lock()
	r.decs = append(r.decs, seg)
	r.mu.Unlock()
	return r.FFmpeg.Decode(ctx, seg, fn)
}

// TestSetPrestart: Set.Prestart hands the decoder the very segment that
// Fill then decodes for the same samples (so the prestarted process is
// the one used, and the frames are Fill's without it), and nothing for a
// file no segment has located and checked yet, a file Held does not hold,
// or a segment the frame cache holds.
func TestSetPrestart(t *testing.T) {
	needFFmpeg(t)
	dir := t.TempDir()
	const key = "cam.a"
	makeVideo(t, dir, "videos/"+key+"/chunk-000/file-000.mp4", "libx264", 64, 48, 30, 120, 10)
	info := &schema.Info{FPS: 30, VideoPath: "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
		Features: []schema.Feature{{Name: key, DType: schema.DTypeVideo, Shape: []int{48, 64, 3}}}}
	// Four episodes of 30 frames in one file.
	var spans []shard.VideoSpan
	for e := range int64(4) {
		spans = append(spans, shard.VideoSpan{Episode: e, Key: key, From: float64(e), To: float64(e + 1), Length: 30})
	}
	loc := func(ctx context.Context, name string) (string, func(), error) {
		return filepath.Join(dir, name), func() {}, nil
	}
	samples := func(ep int64, from, to int) (eps, index []int64, ts []float32) {
		for f := from; f < to; f++ {
			eps, index, ts = append(eps, ep), append(index, ep*30+int64(f)), append(ts, float32(f)/30)
		}
		return
	}
	newSet := func(d Decoder, held bool) (*Set, *atomic.Int32) {
		set, err := NewSet(d, info, spans, []string{key}, 0, 0, 0, loc)
		if err != nil {
			t.Fatal(err)
		}
		var refs atomic.Int32
		if held {
			set.Held = func(name string) (string, func(), bool) {
				refs.Add(1)
				return filepath.Join(dir, name), func() { refs.Add(-1) }, true
			}
		}
		return set, &refs
	}
	fill := func(set *Set, ep int64, from, to int) []byte {
		t.Helper()
		eps, index, ts := samples(ep, from, to)
		buf := make([]byte, len(eps)*set.Cameras[0].FrameBytes())
		if err := set.Fill(context.Background(), 0, eps, index, ts, buf, func(i int, err error) { t.Fatal(err) }, nil); err != nil {
			t.Fatal(err)
		}
		return buf
	}
	prestart := func(set *Set, ep int64, from, to int) {
		eps, _, ts := samples(ep, from, to)
		set.Prestart(context.Background(), 0, eps, ts)
	}
	plain, _ := newSet(&FFmpeg{Path: "ffmpeg", Probe: "ffprobe", Threads: 1}, false)

	d := &recordingFFmpeg{FFmpeg: &FFmpeg{Path: "ffmpeg", Probe: "ffprobe", Threads: 1}}
	set, refs := newSet(d, true)
	prestart(set, 3, 10, 20)
	if len(d.pre) != 0 {
		t.Fatalf("prestarted %v before any segment checked the file", d.pre)
	}
	if string(fill(set, 0, 0, 10)) != string(fill(plain, 0, 0, 10)) {
		t.Fatal("episode 0: frames differ")
	}
	prestart(set, 1, 10, 20) // the process kept at the end of episode 0's frames continues to it
	if pre, _ := d.Prestarts(); len(d.pre) != 1 || pre != 0 {
		t.Fatalf("%d prestarts asked, %d processes prestarted; want 1, 0 (a kept process reaches it)", len(d.pre), pre)
	}
	prestart(set, 3, 10, 20) // beyond it (FFmpeg.MaxSkip)
	if len(d.pre) != 2 {
		t.Fatalf("%d prestarts, want 2", len(d.pre))
	}
	if string(fill(set, 3, 10, 20)) != string(fill(plain, 3, 10, 20)) {
		t.Fatal("episode 3: frames differ from a Set's without prestarts")
	}
	if got, pre := d.decs[len(d.decs)-1], d.pre[1]; got != pre {
		t.Fatalf("Fill decoded %+v, the prestart was %+v", got, pre)
	}
	if pre, used := d.Prestarts(); pre != 1 || used != 1 || d.ProcessesStarted() != 2 {
		t.Fatalf("%d processes, %d prestarted, %d used; want 2, 1, 1", d.ProcessesStarted(), pre, used)
	}
	if n := refs.Load(); n != 0 {
		t.Fatalf("%d file references held after the prestarted process was used", n)
	}

	// Without Held: none.
	d2 := &recordingFFmpeg{FFmpeg: &FFmpeg{Path: "ffmpeg", Probe: "ffprobe", Threads: 1}}
	set2, _ := newSet(d2, false)
	fill(set2, 0, 0, 10)
	prestart(set2, 3, 0, 10)
	if len(d2.pre) != 0 {
		t.Fatalf("prestarted %v without Held", d2.pre)
	}

	// A segment the frame cache holds: none.
	c, err := framecache.Open(framecache.Options{Dir: t.TempDir(), Budget: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d3 := &recordingFFmpeg{FFmpeg: &FFmpeg{Path: "ffmpeg", Probe: "ffprobe", Threads: 1}}
	set3, _ := newSet(d3, true)
	set3.Frames = &Frames{Cache: c, Group: "g", Identify: func(context.Context, string) (string, bool, error) { return "v1", true, nil }}
	fill(set3, 3, 0, 10)
	c.Flush()
	prestart(set3, 3, 0, 10)
	if len(d3.pre) != 0 {
		t.Fatalf("prestarted %v for a segment the cache holds", d3.pre)
	}
	prestart(set3, 0, 5, 10)
	if len(d3.pre) != 1 {
		t.Fatalf("%d prestarts for a segment the cache does not hold, want 1", len(d3.pre))
	}
	for _, x := range []*FFmpeg{plain.Decoder.(*FFmpeg), d.FFmpeg, d2.FFmpeg, d3.FFmpeg} {
		x.Close()
	}
}
