package video

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/framecache"
)

// yuvDecoder hands out 4×2 YUV 4:2:0 frames at 30 fps whose bytes depend
// on the frame's number, from two alternating buffers.
type yuvDecoder struct {
	n     int
	calls int
	got   []Segment
}

func (d *yuvDecoder) Decode(ctx context.Context, seg Segment, fn func(Frame) error) error {
	d.calls++
	d.got = append(d.got, seg)
	conv := yuvByName("bt709 limited")
	var bufs [2][]byte
	for i := range d.n {
		pts := float64(i) / 30
		if pts < seg.Start || pts > seg.End {
			continue
		}
		b := bufs[i%2][:0]
		for k := range yuvSize(4, 2) {
			b = append(b, byte(i*7+k*13))
		}
		bufs[i%2] = b
		if err := fn(Frame{PTS: pts, Width: 4, Height: 2, Pix: b, YUV: conv}); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

// collect decodes seg with d and returns each frame as "pts:bytes", the
// CHW conversion included, checking that the previous frame is intact
// while the next is handed out (the Frame contract).
func collect(t *testing.T, d Decoder, seg Segment, stopAfter float64) []string {
	t.Helper()
	var out []string
	var prev Frame
	var prevCopy []byte
	err := d.Decode(context.Background(), seg, func(f Frame) error {
		if prevCopy != nil && string(prev.Pix) != string(prevCopy) {
			return fmt.Errorf("frame at %v overwritten while the next is handed out", prev.PTS)
		}
		chw := make([]byte, 3*f.Width*f.Height)
		ToCHW(chw, f)
		out = append(out, fmt.Sprintf("%.4f:%x:%x", f.PTS, f.Pix, chw))
		prev, prevCopy = f, append([]byte(nil), f.Pix...)
		if f.PTS > stopAfter {
			return ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCachedDecoderSegments: segments of other bounds than the entries
// stored are served from the entries that cover them and decoded beyond,
// frame for frame what the decoder gives; a second pass decodes nothing.
func TestCachedDecoderSegments(t *testing.T) {
	dir := t.TempDir()
	c, err := framecache.Open(framecache.Options{Dir: dir, Budget: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	inner := &yuvDecoder{n: 90}
	fr := &Frames{Cache: c, Group: "g"}
	cached := func() Decoder {
		return &cachedDecoder{c: fr, inner: inner, key: "file-1", open: func(context.Context) (string, error) { return "x.mp4", nil },
			same: func(context.Context) bool { return true }}
	}
	ref := &yuvDecoder{n: 90}
	type seg struct{ start, end, stop float64 }
	passes := [][]seg{
		{{0, 1, 0.9}, {0.95, 2, math.Inf(1)}},                  // first pass: two entries, the first stopped early
		{{0.5, 1.5, math.Inf(1)}, {0, 3, math.Inf(1)}},         // across the entries' boundary, and past the last
		{{0.2, 0.4, 0.3}, {1.9, 2.95, math.Inf(1)}, {0, 3, 2}}, // inside entries
	}
	for p, segs := range passes {
		c.Flush() // entries are published in the background
		for _, s := range segs {
			before := inner.calls
			want := collect(t, ref, Segment{Start: s.start, End: s.end}, s.stop)
			got := collect(t, cached(), Segment{Start: s.start, End: s.end}, s.stop)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("pass %d, segment %+v: cached frames differ:\n%v\nwant\n%v", p, s, got, want)
			}
			if p == 2 && inner.calls != before {
				t.Fatalf("pass %d, segment %+v: decoded %v although the cache covers it", p, s, inner.got[before:])
			}
		}
	}
}

// TestCachedDecoderNotStored: a file that changes while it is decoded,
// and a decode that fails, leave no entry.
func TestCachedDecoderNotStored(t *testing.T) {
	dir := t.TempDir()
	c, err := framecache.Open(framecache.Options{Dir: dir, Budget: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fr := &Frames{Cache: c, Group: "g"}
	changed := &cachedDecoder{c: fr, inner: &yuvDecoder{n: 30}, key: "f", open: func(context.Context) (string, error) { return "x", nil },
		same: func(context.Context) bool { return false }}
	collect(t, changed, Segment{Start: 0, End: 1}, math.Inf(1))
	failing := &cachedDecoder{c: fr, inner: &fakeDecoder{pts: []float64{0, 0.1}, fail: errors.New("boom")}, key: "g",
		open: func(context.Context) (string, error) { return "x", nil }, same: func(context.Context) bool { return true }}
	if err := failing.Decode(context.Background(), Segment{Start: 0, End: 1}, func(Frame) error { return nil }); err == nil {
		t.Fatal("the decoder's error was not returned")
	}
	c.Flush()
	var n int
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".fc") {
			n++
		}
		return nil
	})
	if n != 0 {
		t.Fatalf("%d entries stored", n)
	}
}

// TestCachedDecoderUnreadableEntry: an entry whose frames cannot be used
// (meta that is not the decoder's) is decoded around, once, and gives the
// decoder's frames.
func TestCachedDecoderUnreadableEntry(t *testing.T) {
	c, err := framecache.Open(framecache.Options{Dir: t.TempDir(), Budget: 1 << 30, MaxPending: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := c.Create("g", "file-1", 0, []byte("not json"))
	w.Add(0, []byte{1, 2, 3})
	if err := w.Commit(2); err != nil {
		t.Fatal(err)
	}
	inner := &yuvDecoder{n: 60}
	d := &cachedDecoder{c: &Frames{Cache: c, Group: "g"}, inner: inner, key: "file-1",
		open: func(context.Context) (string, error) { return "x.mp4", nil }, same: func(context.Context) bool { return true }}
	want := collect(t, &yuvDecoder{n: 60}, Segment{Start: 0, End: 1}, math.Inf(1))
	got := collect(t, d, Segment{Start: 0, End: 1}, math.Inf(1))
	if strings.Join(got, "\n") != strings.Join(want, "\n") || inner.calls != 1 {
		t.Fatalf("%d decodes; frames equal: %v", inner.calls, strings.Join(got, "\n") == strings.Join(want, "\n"))
	}
}
