package video

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseShowinfo(t *testing.T) {
	tests := []struct {
		line string
		kind lineKind
		pts  int64
		w, h int
		tb   [2]int64
	}{
		{line: "[Parsed_showinfo_0 @ 0x55bd0043e000] config in time_base: 1/15360, frame_rate: 30/1\n", kind: lineTimeBase, tb: [2]int64{1, 15360}},
		{line: "[Parsed_showinfo_1 @ 0x5] n:   1 pts:  15872 pts_time:1.03333 pos:     3216 fmt:yuv420p sar:1/1 s:64x48 i:P iskey:0 type:B checksum:7388CACF\n", kind: lineFrame, pts: 15872, w: 64, h: 48},
		{line: "[Parsed_showinfo_0 @ 0x5] n:   0 pts:      0 pts_time:0 pos: 48 fmt:yuv420p sar:0/1 s:640x480 i:P\n", kind: lineFrame, pts: 0, w: 640, h: 480},
		{line: "[Parsed_showinfo_0 @ 0x5] color_range:unknown color_space:unknown\n", kind: lineShowinfo},
		{line: "[Parsed_showinfo_0 @ 0x5] config out time_base: 0/0, frame_rate: 0/0\n", kind: lineShowinfo},
		{line: "[Parsed_showinfo_0 @ 0x5] config in time_base: 0/0, frame_rate: 0/0\n", kind: lineShowinfo},
		{line: "[Parsed_showinfo_0 @ 0x5] n: 3 pts: NOPTS pts_time:NOPTS s:64x48\n", kind: lineShowinfo},
		{line: "[Parsed_showinfo_0 @ 0x5] n: 3 pts: 12 s:0x48\n", kind: lineShowinfo},
		{line: "[mov,mp4,m4a,3gp,3g2,mj2 @ 0x5] moov atom not found\n", kind: lineOther},
		{line: "Stream mapping:\n", kind: lineOther},
	}
	for _, tc := range tests {
		f, tb, kind := parseShowinfo(tc.line)
		if kind != tc.kind {
			t.Errorf("%q: kind %d, want %d", tc.line, kind, tc.kind)
			continue
		}
		if kind == lineFrame && (f.ptsInt != tc.pts || f.w != tc.w || f.h != tc.h) {
			t.Errorf("%q: pts %d %dx%d, want %d %dx%d", tc.line, f.ptsInt, f.w, f.h, tc.pts, tc.w, tc.h)
		}
		if kind == lineTimeBase && tb != tc.tb {
			t.Errorf("%q: time base %v, want %v", tc.line, tb, tc.tb)
		}
	}
}

func FuzzParseShowinfo(f *testing.F) {
	f.Add("[Parsed_showinfo_0 @ 0x55bd0043e000] config in time_base: 1/15360, frame_rate: 30/1\n")
	f.Add("[Parsed_showinfo_1 @ 0x5] n:   1 pts:  15872 pts_time:1.03333 pos:     3216 fmt:yuv420p sar:1/1 s:64x48 i:P\n")
	f.Add("[Parsed_showinfo_0 @ 0x5] n: 3 pts: -9223372036854775808 s:99999x1\n")
	f.Fuzz(func(t *testing.T, line string) {
		fr, tb, kind := parseShowinfo(line)
		switch kind {
		case lineFrame:
			if fr.w <= 0 || fr.h <= 0 || fr.w > 1<<15 || fr.h > 1<<15 || fr.ptsInt > 1<<40 || fr.ptsInt < -(1<<40) {
				t.Fatalf("accepted frame %+v", fr)
			}
		case lineTimeBase:
			if tb[0] <= 0 || tb[1] <= 0 {
				t.Fatalf("accepted time base %v", tb)
			}
		}
		if kind != lineOther && !strings.Contains(line, "[Parsed_showinfo_") {
			t.Fatalf("kind %d for a line without showinfo", kind)
		}
	})
}

// TestFFmpegDecode decodes segments of H.264 (with B-frames) and AV1 files
// and checks the frames' timestamps are the file's, from one seek, and that
// the pixels equal a full decode's.
func TestFFmpegDecode(t *testing.T) {
	d := needFFmpeg(t)
	dir := t.TempDir()
	for _, codec := range []string{"libx264", "libsvtav1"} {
		t.Run(codec, func(t *testing.T) {
			p := makeVideo(t, dir, codec+".mp4", codec, 96, 64, 30, 90, 20)
			var all []Frame
			err := d.Decode(context.Background(), Segment{Path: p, Start: 0, End: 100}, func(f Frame) error {
				f.Pix = append([]byte(nil), f.Pix...)
				all = append(all, f)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != 90 {
				t.Fatalf("%d frames, want 90", len(all))
			}
			for i, f := range all {
				if want := float64(i) / 30; math.Abs(f.PTS-want) > 1e-9 {
					t.Fatalf("frame %d at %.9f, want %.9f", i, f.PTS, want)
				}
				if f.Width != 96 || f.Height != 64 {
					t.Fatalf("frame %d is %dx%d", i, f.Width, f.Height)
				}
			}
			// A segment starting mid-GOP: frames 37..52 only, same pixels.
			var got []Frame
			err = d.Decode(context.Background(), Segment{Path: p, Start: 37.0/30 - 1e-4, End: 52.0/30 + 1e-4}, func(f Frame) error {
				f.Pix = append([]byte(nil), f.Pix...)
				got = append(got, f)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 16 {
				t.Fatalf("segment: %d frames, want 16", len(got))
			}
			for k, f := range got {
				want := all[37+k]
				if f.PTS != want.PTS || string(f.Pix) != string(want.Pix) {
					t.Fatalf("segment frame %d (pts %.6f) differs from the full decode's frame %d (pts %.6f)", k, f.PTS, 37+k, want.PTS)
				}
			}
			// Resize.
			err = d.Decode(context.Background(), Segment{Path: p, Start: 0, End: 0.01, Width: 32, Height: 16}, func(f Frame) error {
				if f.Width != 32 || f.Height != 16 || len(f.Pix) != 32*16*3 {
					t.Fatalf("resized frame %dx%d, %d bytes", f.Width, f.Height, len(f.Pix))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFFmpegBadInput: every broken file is an error (never a panic, never
// a hang, never frames that look complete).
func TestFFmpegBadInput(t *testing.T) {
	d := needFFmpeg(t)
	dir := t.TempDir()
	good := makeVideo(t, dir, "good.mp4", "libx264", 64, 48, 30, 60, 10)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	corrupt := append([]byte(nil), data...)
	for i := len(corrupt) / 3; i < len(corrupt)-64; i += 7 {
		corrupt[i] ^= 0x5a
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"missing file", filepath.Join(dir, "absent.mp4"), "no such file"},
		{"empty file", write("empty.mp4", nil), "ffmpeg"},
		{"not a video", write("text.mp4", []byte("hello, this is not an mp4 file at all")), "ffmpeg"},
		{"truncated", write("trunc.mp4", data[:len(data)/2]), "ffmpeg"},
		{"corrupt", write("corrupt.mp4", corrupt), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			n := 0
			err := d.Decode(ctx, Segment{Path: tc.path, Start: 0, End: 10}, func(f Frame) error {
				n++
				return nil
			})
			if ctx.Err() != nil {
				t.Fatal("decode hung")
			}
			if tc.name == "corrupt" {
				// Corrupt data may still decode some frames; it must
				// not decode all 60 silently unless FFmpeg reports no
				// error (then the frames are what the file holds).
				if err == nil && n == 60 {
					t.Log("corrupt file decoded fully without error")
				}
				return
			}
			if err == nil {
				t.Fatalf("no error (%d frames)", n)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	t.Run("missing ffmpeg", func(t *testing.T) {
		bad := &FFmpeg{Path: filepath.Join(dir, "no-ffmpeg-here")}
		err := bad.Decode(context.Background(), Segment{Path: good, End: 1}, func(Frame) error { return nil })
		if !errors.Is(err, ErrNoFFmpeg) || !strings.Contains(err.Error(), "apt-get install ffmpeg") || !strings.Contains(err.Error(), "--cameras none") {
			t.Fatalf("error %v, want ErrNoFFmpeg with install and skip hints", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		err := d.Decode(ctx, Segment{Path: good, End: 10}, func(Frame) error { cancel(); return nil })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
	})
}

// decodeAll decodes seg with d and returns copies of its frames; stop,
// when positive, returns ErrStop at that frame (as Select does once its
// queries are decided).
func decodeAll(t *testing.T, d Decoder, seg Segment, stop int) []Frame {
	t.Helper()
	var got []Frame
	err := d.Decode(context.Background(), seg, func(f Frame) error {
		f.Pix = append([]byte(nil), f.Pix...)
		got = append(got, f)
		if len(got) == stop {
			return ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sameFrames(t *testing.T, what string, got, want []Frame) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frames, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].PTS != want[i].PTS || string(got[i].Pix) != string(want[i].Pix) {
			t.Fatalf("%s: frame %d at %.6f differs from a new process's frame at %.6f", what, i, got[i].PTS, want[i].PTS)
		}
	}
}

// TestFFmpegKeep: a process kept between segments gives every segment
// exactly the frames (timestamps and pixels) a new process per segment
// gives — consecutive, overlapping, backwards, far ahead, resized, stopped
// early — and consecutive segments of a file share one process.
func TestFFmpegKeep(t *testing.T) {
	needFFmpeg(t)
	dir := t.TempDir()
	const fps = 30.0
	at := func(i int) float64 { return float64(i) / fps }
	for _, codec := range []string{"libx264", "libsvtav1"} {
		t.Run(codec, func(t *testing.T) {
			p := makeVideo(t, dir, codec+".mp4", codec, 96, 64, 30, 240, 20)
			seg := func(first, last int) Segment {
				return Segment{Path: p, Start: at(first) - 1/fps, End: at(last) + 1/fps}
			}
			steps := []struct {
				name string
				seg  Segment
				stop int // ErrStop at this frame (0: none)
				// started and startedHeld: processes started so far
				// by the kept decoders holding 2 and 12 frames.
				started, startedHeld int
			}{
				{"first piece, stopped after the frame past it", seg(0, 29), 31, 1, 1},
				{"next piece", seg(30, 59), 32, 1, 1},
				{"next piece, to its end", seg(60, 89), 0, 1, 1},
				{"overlapping its predecessor's last frame", seg(91, 100), 0, 1, 1},
				{"overlapping by five frames: within Hold 12", seg(97, 110), 0, 2, 1},
				{"overlapping further back: new process", seg(80, 85), 0, 3, 2},
				{"after a gap within MaxSkip", seg(140, 150), 0, 3, 2},
				{"backwards: new process", seg(10, 12), 0, 4, 3},
				{"far ahead: new process", seg(225, 228), 0, 5, 4},
				{"resized: new process", Segment{Path: p, Start: at(211), End: at(215), Width: 32, Height: 16}, 0, 6, 5},
				{"on to past the end of the file", seg(231, 260), 0, 6, 5},
			}
			kept := &FFmpeg{Path: "ffmpeg", Threads: 1}
			held := &FFmpeg{Path: "ffmpeg", Threads: 1, Hold: 12}
			fresh := &FFmpeg{Path: "ffmpeg", Threads: 1, MaxIdle: -1}
			defer kept.Close()
			defer held.Close()
			for _, st := range steps {
				want := decodeAll(t, fresh, st.seg, st.stop)
				if len(want) == 0 {
					t.Fatalf("%s: no frames", st.name)
				}
				sameFrames(t, st.name, decodeAll(t, kept, st.seg, st.stop), want)
				sameFrames(t, st.name+" (Hold 12)", decodeAll(t, held, st.seg, st.stop), want)
				if kept.started != st.started || held.started != st.startedHeld {
					t.Fatalf("%s: %d and %d processes started, want %d and %d", st.name, kept.started, held.started, st.started, st.startedHeld)
				}
			}
			if fresh.started != len(steps) || len(fresh.live) != 0 {
				t.Fatalf("MaxIdle -1: %d processes started, %d kept; want %d, 0", fresh.started, len(fresh.live), len(steps))
			}
			kept.Close()
			if len(kept.live) != 0 {
				t.Fatalf("%d processes after Close", len(kept.live))
			}
		})
	}
}

// TestFFmpegKeepConcurrent: workers decoding consecutive pieces of two
// files at once, as the pipeline does (each worker a piece of both
// cameras), get a new process's frames. With one lane a file is decoded
// by about one process (a piece waits for the process decoding its
// predecessor); with two, pieces may also start their own.
func TestFFmpegKeepConcurrent(t *testing.T) {
	needFFmpeg(t)
	dir := t.TempDir()
	files := []string{
		makeVideo(t, dir, "a.mp4", "libsvtav1", 96, 64, 30, 150, 2),
		makeVideo(t, dir, "b.mp4", "libx264", 64, 48, 30, 150, 30),
	}
	const pieces, rows = 5, 30
	seg := func(f, k int) Segment {
		return Segment{Path: files[f], Start: float64(k*rows-1) / 30, End: float64(k*rows+rows) / 30}
	}
	fresh := &FFmpeg{Path: "ffmpeg", Threads: 1, MaxIdle: -1}
	want := make([][][]Frame, len(files))
	for f := range files {
		for k := range pieces {
			want[f] = append(want[f], decodeAll(t, fresh, seg(f, k), rows+1))
		}
	}
	for _, tc := range []struct {
		lanes int
		most  int // processes at most
	}{
		// One per file, plus one whenever a piece overtook its
		// predecessor (it then seeks on its own).
		{1, 2 * len(files)},
		{2, pieces * len(files)},
	} {
		t.Run(fmt.Sprintf("lanes %d", tc.lanes), func(t *testing.T) {
			kept := &FFmpeg{Path: "ffmpeg", Threads: 1, Lanes: tc.lanes}
			defer kept.Close()
			got := make([][][]Frame, len(files))
			for f := range got {
				got[f] = make([][]Frame, pieces)
			}
			jobs := make(chan int)
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := range jobs {
						for f := range files {
							got[f][k] = decodeAll(t, kept, seg(f, k), rows+1)
						}
					}
				}()
			}
			for k := range pieces {
				jobs <- k
			}
			close(jobs)
			wg.Wait()
			for f := range files {
				for k := range pieces {
					sameFrames(t, fmt.Sprintf("file %d piece %d", f, k), got[f][k], want[f][k])
				}
			}
			if kept.started > tc.most {
				t.Fatalf("%d processes for %d pieces of %d files, want at most %d", kept.started, pieces, len(files), tc.most)
			}
			t.Logf("%d processes for %d pieces of %d files", kept.started, pieces, len(files))
		})
	}
}

func TestReadY4MHeader(t *testing.T) {
	for _, tc := range []struct {
		in, rest string
		ok       bool
	}{
		{"YUV4MPEG2 W640 H480 F30:1 Ip A1:1 C420jpeg XYSCSS=420JPEG\nFRAME\n", "FRAME\n", true},
		{"YUV4MPEG2 W2 H2\n", "", true},
		{"YUV4MPEG W2 H2\nFRAME\n", "", false},
		{"YUV4MPEG2 W2 H2", "", false},
		{"", "", false},
		{"YUV4MPEG2 " + strings.Repeat("x", 2000) + "\n", "", false},
	} {
		r := strings.NewReader(tc.in)
		err := readY4MHeader(r)
		if (err == nil) != tc.ok {
			t.Errorf("%.40q: error %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if rest, _ := io.ReadAll(r); tc.ok && string(rest) != tc.rest {
			t.Errorf("%.40q: left %q, want %q", tc.in, rest, tc.rest)
		}
	}
}

func FuzzReadY4MHeader(f *testing.F) {
	f.Add("YUV4MPEG2 W640 H480 F30:1\nFRAME\n")
	f.Add("\n")
	f.Fuzz(func(t *testing.T, in string) {
		r := strings.NewReader(in)
		if err := readY4MHeader(r); err == nil {
			consumed := len(in) - r.Len()
			if !strings.HasPrefix(in, "YUV4MPEG2 ") || in[consumed-1] != '\n' || strings.Contains(in[:consumed-1], "\n") {
				t.Fatalf("accepted %q (consumed %d)", in, consumed)
			}
		}
	})
}

// TestFFmpegPrestart: a segment finds the process Prestart started for it
// and gets exactly a new process's frames; Prestart starts nothing when a
// process can continue to the segment; beyond MaxIdle waiting the first
// prestarted ends; a prestart never ends a kept process; a prestarted
// process that died is replaced; Close ends the waiting ones; the file
// reference given to Prestart is released exactly once whatever happens.
func TestFFmpegPrestart(t *testing.T) {
	needFFmpeg(t)
	dir := t.TempDir()
	const fps = 30.0
	p := makeVideo(t, dir, "v.mp4", "libx264", 96, 64, 30, 240, 15)
	seg := func(first, last int) Segment {
		return Segment{Path: p, Start: float64(first) / fps, End: float64(last) / fps}
	}
	type op struct {
		do  string // "pre", "dec", "kill" (the waiting prestarted processes), "close"
		seg Segment
	}
	fresh := &FFmpeg{Path: "ffmpeg", Probe: "ffprobe", Threads: 1, MaxIdle: -1} // YUV frames, as d
	for _, tc := range []struct {
		name      string
		maxIdle   int
		ops       []op
		started   int // processes started
		pre, used int // Prestarts
	}{
		{"prestarted, then used", 0, []op{{"pre", seg(90, 119)}, {"dec", seg(90, 119)}}, 1, 1, 1},
		{"a kept process continues: none", 0, []op{{"dec", seg(0, 29)}, {"pre", seg(30, 59)}, {"dec", seg(30, 59)}}, 1, 0, 0},
		{"beyond a kept process's reach", 0, []op{{"dec", seg(0, 29)}, {"pre", seg(150, 179)}, {"dec", seg(150, 179)}, {"dec", seg(30, 59)}}, 2, 1, 1},
		{"twice for one segment: once", 0, []op{{"pre", seg(60, 89)}, {"pre", seg(60, 89)}, {"dec", seg(60, 89)}}, 1, 1, 1},
		{"died before used: replaced", 0, []op{{"pre", seg(60, 89)}, {"kill", Segment{}}, {"dec", seg(60, 89)}}, 2, 1, 1},
		{"at most MaxIdle waiting: the first prestarted ends", 2, []op{{"pre", seg(0, 9)}, {"pre", seg(100, 109)}, {"pre", seg(200, 209)},
			{"dec", seg(200, 209)}, {"dec", seg(100, 109)}, {"dec", seg(0, 9)}}, 4, 3, 2},
		{"a prestart makes no kept process end", 1, []op{{"dec", seg(0, 29)}, {"pre", seg(200, 209)}, {"dec", seg(30, 59)}, {"dec", seg(200, 209)}}, 2, 1, 1},
		{"ended by Close", 0, []op{{"pre", seg(0, 9)}, {"close", Segment{}}, {"dec", seg(0, 9)}}, 2, 1, 0},
		{"missing file: none", 0, []op{{"pre", Segment{Path: filepath.Join(dir, "absent.mp4"), End: 1}}}, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &FFmpeg{Path: "ffmpeg", Probe: "ffprobe", Threads: 1, MaxIdle: tc.maxIdle}
			var holds, released atomic.Int32
			for _, o := range tc.ops {
				switch o.do {
				case "pre":
					holds.Add(1)
					d.Prestart(context.Background(), o.seg, func() { released.Add(1) })
				case "dec":
					sameFrames(t, fmt.Sprintf("segment at %.3f", o.seg.Start), decodeAll(t, d, o.seg, 0), decodeAll(t, fresh, o.seg, 0))
				case "kill":
					d.mu.Lock()
					for _, s := range d.live {
						if s.pre {
							_ = s.cmd.Process.Kill()
						}
					}
					d.mu.Unlock()
				case "close":
					d.Close()
				}
			}
			d.Close()
			if len(d.live) != 0 {
				t.Fatalf("%d processes after Close", len(d.live))
			}
			if pre, used := d.Prestarts(); d.ProcessesStarted() != tc.started || pre != tc.pre || used != tc.used {
				t.Fatalf("%d processes started, %d prestarted, %d of them used; want %d, %d, %d", d.ProcessesStarted(), pre, used, tc.started, tc.pre, tc.used)
			}
			if holds.Load() != released.Load() {
				t.Fatalf("%d file references given to Prestart, %d released", holds.Load(), released.Load())
			}
		})
	}
}
