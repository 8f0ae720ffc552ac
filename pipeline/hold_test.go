package pipeline

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/order"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// maxUnit is the most frames a unit group of cfg's selection holds.
func maxUnit(t *testing.T, cfg *Config) int64 {
	idx, err := buildKeepIndex(context.Background(), []Mix{{Config: cfg, Weight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for i := range idx.units {
		n = max(n, idx.unitStart[i+1]-idx.unitStart[i])
	}
	return n
}

// TestTrainHoldsBufferNotChunks checks the training order's memory: it
// holds the frames waiting in the shuffle buffer (plus the episode being
// read and the batch being collated), not the row groups they came from, whatever the consumer count.
func TestTrainHoldsBufferNotChunks(t *testing.T) {
	cfg := demoConfig(t, render.ModeFallback)
	// A unit group (a row group: an episode here) is read whole, and the
	// batch being collated is held too.
	L := maxUnit(t, cfg) + 8
	so := StreamOptions{BatchSize: 8}
	for _, tc := range []struct {
		name string
		to   TrainOptions
		max  int64 // held frames at most
	}{
		// One consumer: the buffer plus the episode entering it.
		{"global C=1", TrainOptions{Shuffle: true, Seed: 4, BufferSize: 64, Epochs: 1}, 64 + L},
		{"global C=1 big buffer", TrainOptions{Shuffle: true, Seed: 4, BufferSize: 400, Epochs: 1}, 400 + L},
		// A consumer of three holds its own frames only.
		{"global C=3", TrainOptions{Shuffle: true, Seed: 4, BufferSize: 400, Epochs: 1, Consumers: 3, Consumer: 1}, 400/2 + L},
		// Unshuffled: the episode being read.
		{"plain", TrainOptions{Epochs: 1}, L},
		// Partitioned: per partition its buffer share and its open
		// episodes.
		{"partitioned", TrainOptions{Shuffle: true, Seed: 4, BufferSize: 60, Epochs: 1, Order: OrderPartitioned, Partitions: 3, PartitionOpen: 1}, 3 * (20 + L)},
		{"partitioned, 2 open", TrainOptions{Shuffle: true, Seed: 4, BufferSize: 60, Epochs: 1, Order: OrderPartitioned, Partitions: 3, PartitionOpen: 2}, 3 * (20 + 2*L)},
		// Stratified: per partition a wave of fewer than 2 × open
		// episodes, no buffer.
		{"stratified, 2 open", TrainOptions{Shuffle: true, Seed: 4, Epochs: 1, Order: OrderStratified, Partitions: 3, PartitionOpen: 2}, 3 * 3 * L},
	} {
		st, err := Train(context.Background(), cfg, so, tc.to, sink.Discard())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		t.Logf("%s: held at most %d frames (bound %d; %d frames served)", tc.name, st.HeldPeak, tc.max, st.Frames)
		if st.HeldPeak > tc.max || st.HeldPeak == 0 {
			t.Fatalf("%s: held %d frames at once, want 1..%d", tc.name, st.HeldPeak, tc.max)
		}
		if est, got := HeldBytes([]Mix{{Config: cfg, Weight: 1}}, tc.to), st.HeldPeak*SampleBytes(cfg); est < got {
			t.Fatalf("%s: HeldBytes estimates %d bytes, %d were held", tc.name, est, got)
		}
		if tc.to.Shuffle && tc.to.Order == "" && tc.to.Consumers <= 1 && st.HeldPeak < int64(tc.to.BufferSize) {
			t.Fatalf("%s: held %d frames, fewer than the %d-frame buffer: is the buffer used?", tc.name, st.HeldPeak, tc.to.BufferSize)
		}
	}
}

// TestShuffleBufferByteBudget checks that the byte budget lowers the
// buffer to the frames that fit, exactly as asking for that many frames.
func TestShuffleBufferByteBudget(t *testing.T) {
	cfg := demoConfig(t, render.ModeFallback)
	so := StreamOptions{BatchSize: 16}
	sample := SampleBytes(cfg)
	if sample <= heldFrameOverhead {
		t.Fatalf("SampleBytes %d: no feature bytes counted", sample)
	}
	want, _ := trainBatches(t, cfg, so, TrainOptions{Shuffle: true, Seed: 5, Epochs: 1, BufferSize: 37})
	got, _ := trainBatches(t, cfg, so, TrainOptions{Shuffle: true, Seed: 5, Epochs: 1, BufferSize: 5000, BufferBytes: 37*sample + sample/2})
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs from a 37-frame buffer", i)
		}
	}
	// No budget: the frames asked for.
	big, _ := trainBatches(t, cfg, so, TrainOptions{Shuffle: true, Seed: 5, Epochs: 1, BufferSize: 5000, BufferBytes: -1})
	if bytes.Equal(big[0], want[0]) {
		t.Fatal("without a budget the 5000-frame buffer gave the 37-frame order")
	}
	// Deltas count their windows.
	c := *cfg
	c.Deltas = []Delta{{Key: "action", Seconds: []float64{0, 0.1, 0.2, 0.3}}}
	if d := SampleBytes(&c); d <= sample {
		t.Fatalf("SampleBytes with a 4-step action window %d, without %d", d, sample)
	}
}

// episodesConfig is the demo dataset's config with its episodes index
// replaced by n episodes of length frames (metadata only: for estimates).
func episodesConfig(t *testing.T, n, length int64) Config {
	cfg := *demoConfig(t, render.ModeFallback)
	ds := *cfg.Dataset
	ds.Episodes = nil
	for i := range n {
		ds.Episodes = append(ds.Episodes, schema.Episode{Index: i, Length: length})
	}
	cfg.Dataset = &ds
	return cfg
}

// twoCameraConfig is episodesConfig of 500 episodes of 300 frames with two
// 480×640 cameras and 2 workers, the camera memory tests' stream.
func twoCameraConfig(t *testing.T) Config {
	cfg := episodesConfig(t, 500, 300)
	cfg.Workers = 2
	cfg.Cameras = &video.Set{Cameras: []video.Camera{{Key: "front", C: 3, H: 480, W: 640}, {Key: "wrist", C: 3, H: 480, W: 640}}}
	return cfg
}

// TestTrainBytes checks the training stream's memory estimate: the held
// frames plus 13 bytes a frame indexed, the whole selection in the global
// order and 1/C of it per consumer in the partitioned one (a 10M-frame
// episodes index, metadata only).
func TestTrainBytes(t *testing.T) {
	cfg := episodesConfig(t, 16000, 625)
	const frames = 16000 * 625
	srcs := []Mix{{Config: &cfg, Weight: 1}}
	for _, tc := range []struct {
		name    string
		to      TrainOptions
		indexed int64
	}{
		{"global, 1 consumer", TrainOptions{Shuffle: true}, frames},
		{"global, 8 consumers", TrainOptions{Shuffle: true, Consumers: 8}, frames},
		{"partitioned, 1 consumer", TrainOptions{Shuffle: true, Order: OrderPartitioned}, frames},
		{"partitioned, 8 consumers", TrainOptions{Shuffle: true, Order: OrderPartitioned, Consumers: 8}, frames / 8},
	} {
		held := HeldBytes(srcs, tc.to)
		got := TrainBytes(srcs, tc.to)
		if want := held + tc.indexed*indexBytesPerFrame; got != want {
			t.Errorf("%s: TrainBytes %d, want %d held + %d indexed frames × %d", tc.name, got, held, tc.indexed, indexBytesPerFrame)
		}
		t.Logf("%s: %d MB (%d MB held)", tc.name, got>>20, held>>20)
	}
}

// TestHeldCameraFramesFreedWhenServed: frames of perFrameStride bytes or
// more (camera frames) are held in an array each, dropped once served, so
// a chunk whose other frames still wait in the shuffle buffer does not
// keep the served ones alive; smaller frames share their chunk's array.
func TestHeldCameraFramesFreedWhenServed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes int
		own   bool
	}{
		{"numeric", 56, false},
		{"camera", 2 * 480 * 640 * 3, true},
	} {
		h := newHolder([]Mix{{Config: &Config{}, Weight: 1}}, false, "")
		hc := h.chunk(3)
		h.sizeChunk(hc, [][]byte{make([]byte, tc.bytes)}, nil)
		if (hc.own != nil) != tc.own {
			t.Fatalf("%s: per-frame arrays %v, want %v", tc.name, hc.own != nil, tc.own)
		}
		if !tc.own {
			continue
		}
		for n := range hc.recs {
			hc.recs[n] = heldFrame{chunk: hc, n: int32(n)}
			hc.own[n] = bytes.Repeat([]byte{byte(n + 1)}, tc.bytes)
		}
		var f collate.Frame
		hc.recs[1].frame(&f, nil)
		if len(f.Features) != 1 || len(f.Features[0]) != tc.bytes || f.Features[0][0] != 2 {
			t.Fatalf("%s: frame 1 reads the wrong bytes", tc.name)
		}
		a0 := &hc.own[0][0]
		h.served([]*heldFrame{&hc.recs[0], &hc.recs[2]})
		if hc.own[0] != nil || hc.own[2] != nil || hc.own[1] == nil {
			t.Fatalf("%s: after serving frames 0 and 2, arrays held: %v %v %v", tc.name, hc.own[0] != nil, hc.own[1] != nil, hc.own[2] != nil)
		}
		// The served arrays are reused for the next held frames (at most
		// maxFreeFrames kept), empty.
		if h.freeCount() != 2 {
			t.Fatalf("%s: %d arrays kept for reuse, want 2", tc.name, h.freeCount())
		}
		h.frameBuffer(hc.stride) // served frame 2's array
		b := h.frameBuffer(hc.stride)
		if len(b) != 0 || cap(b) != tc.bytes || &b[:1][0] != a0 || h.freeCount() != 0 {
			t.Fatalf("%s: frameBuffer does not reuse the served frame 0's array", tc.name)
		}
		if b := h.frameBuffer(hc.stride); cap(b) != tc.bytes {
			t.Fatalf("%s: a new array of %d bytes, want %d", tc.name, cap(b), tc.bytes)
		}
		for range maxFreeFrames + 5 {
			hc.own[0] = make([]byte, tc.bytes)
			h.served([]*heldFrame{&hc.recs[0]})
		}
		if h.freeCount() != maxFreeFrames {
			t.Fatalf("%s: %d arrays kept, want at most %d", tc.name, h.freeCount(), maxFreeFrames)
		}
	}
}

// TestHolderKeepsBufferShare: a shuffled stream's holder keeps up to its
// buffer's share of served arrays (keepFree), by size, so a piece decoded
// after a burst of served batches reuses their arrays instead of growing
// the heap; without keepFree it keeps maxFreeFrames.
func TestHolderKeepsBufferShare(t *testing.T) {
	const stride, small = 4096, 1024
	for _, tc := range []struct {
		name   string
		frames int // keepFree's argument; 0: not called
		want   int
	}{
		{"default", 0, maxFreeFrames},
		{"smaller share", maxFreeFrames / 2, maxFreeFrames},
		{"buffer share", 200, 200},
	} {
		h := newHolder([]Mix{{Config: &Config{}, Weight: 1}}, false, "")
		if tc.frames > 0 {
			h.keepFree(tc.frames)
		}
		h.sizeChunk(h.chunk(1), [][]byte{make([]byte, stride)}, nil)
		for range tc.want + 50 {
			h.recycle(make([]byte, stride))
		}
		if n := h.freeCount(); n != tc.want {
			t.Fatalf("%s: %d arrays kept, want %d", tc.name, n, tc.want)
		}
		// Arrays of another size (a mixture's other frames) are kept apart:
		// each size gets back its own, whichever was recycled last.
		h = newHolder([]Mix{{Config: &Config{}, Weight: 1}}, false, "")
		h.keepFree(tc.frames)
		h.sizeChunk(h.chunk(1), [][]byte{make([]byte, stride)}, nil)
		big, little := make([]byte, stride), make([]byte, small)
		h.recycle(big)
		h.recycle(little)
		if b := h.frameBuffer(stride); cap(b) != stride || &b[:1][0] != &big[0] {
			t.Fatalf("%s: frameBuffer(%d) does not reuse the kept array of its size", tc.name, stride)
		}
		if b := h.frameBuffer(small); cap(b) != small || &b[:1][0] != &little[0] {
			t.Fatalf("%s: frameBuffer(%d) does not reuse the kept array of its size", tc.name, small)
		}
		if h.freeCount() != 0 || h.freeBytes != 0 {
			t.Fatalf("%s: %d arrays (%d bytes) still kept after both were reused", tc.name, h.freeCount(), h.freeBytes)
		}
	}
}

// TestKeepDecoders: the stratified order keeps an FFmpeg process per
// camera of each episode a consumer reads at once (at most
// maxKeptDecoders); other orders keep SetupCameras' count.
func TestKeepDecoders(t *testing.T) {
	ds := &schema.Dataset{}
	for e := int64(0); e < 40; e++ {
		ds.Episodes = append(ds.Episodes, schema.Episode{Index: e, Length: 100})
	}
	for _, tc := range []struct {
		name string
		to   TrainOptions
		want int
	}{
		// 2 partitions of 20 episodes, open 4: waves of up to 7
		// episodes, 2 partitions a consumer, 2 cameras.
		{"stratified, one consumer", TrainOptions{Order: OrderStratified, Shuffle: true, Partitions: 2, PartitionOpen: 4, Consumers: 1}, 28},
		{"stratified, one of two", TrainOptions{Order: OrderStratified, Shuffle: true, Partitions: 2, PartitionOpen: 4, Consumers: 2}, 14},
		{"stratified, capped", TrainOptions{Order: OrderStratified, Shuffle: true, Partitions: 2, PartitionOpen: 24, Consumers: 1}, maxKeptDecoders},
		{"partitioned", TrainOptions{Order: OrderPartitioned, Shuffle: true, Partitions: 2, PartitionOpen: 4, Consumers: 1}, 4},
		{"stratified, unshuffled", TrainOptions{Order: OrderStratified, Partitions: 2, PartitionOpen: 4, Consumers: 1}, 4},
	} {
		ff := &video.FFmpeg{MaxIdle: 4}
		cfg := &Config{Dataset: ds, Cameras: &video.Set{Decoder: ff, Cameras: make([]video.Camera, 2)}}
		keepDecoders([]Mix{{Config: cfg, Weight: 1}}, tc.to)
		if ff.MaxIdle != tc.want {
			t.Errorf("%s: MaxIdle %d, want %d", tc.name, ff.MaxIdle, tc.want)
		}
	}
}

// TestHoistPieces: a piece first used after its successor in the same
// episode is decoded just before it (so the FFmpeg process that decodes
// the episode continues), when its first use is within a piece's rows;
// never across episodes or groups, nor from further away. With a spill
// (successors), the pieces after it in its episode follow it too.
func TestHoistPieces(t *testing.T) {
	// Two groups: group 0 is episode 0 (positions 0-99) then episode 1
	// (100-199), in pieces 0-3 of 50; group 1 is episode 2 (200-299),
	// pieces 4-5 of 50.
	idx := &keepIndex{
		unitStart: []int64{0, 200, 300},
		src:       []int{0, 0},
		runs:      [][]order.Run{{{Episode: 0, Start: 0, Len: 100}, {Episode: 1, Start: 100, Len: 100}, {Episode: 2, Start: 200, Len: 100}}},
	}
	pi := &pieceIndex{idx: idx, base: []int{0, 4, 6}}
	rows := func(int) int32 { return 50 }
	for _, tc := range []struct {
		name  string
		units []int
		first map[int]int32
		want  []int
		succ  bool
	}{
		{"in order", []int{0, 1, 2, 3, 4, 5}, map[int]int32{0: 0, 1: 10, 2: 20, 3: 30, 4: 40, 5: 50}, []int{0, 1, 2, 3, 4, 5}, false},
		{"piece 0 after 1: hoisted", []int{1, 0, 2}, map[int]int32{1: 0, 0: 5, 2: 9}, []int{0, 1, 2}, false},
		{"too far: not hoisted", []int{1, 0}, map[int]int32{1: 0, 0: 51}, []int{1, 0}, false},
		{"another episode: not hoisted", []int{2, 1}, map[int]int32{2: 0, 1: 3}, []int{2, 1}, false},
		{"another group: not hoisted", []int{4, 3}, map[int]int32{4: 0, 3: 3}, []int{4, 3}, false},
		{"an unused piece between", []int{3, 0}, map[int]int32{3: 0, 0: 4}, []int{3, 0}, false},
		{"episode 1 pieces", []int{3, 2}, map[int]int32{3: 0, 2: 4}, []int{2, 3}, false},
		{"successor not hoisted without a spill", []int{0, 2, 1}, map[int]int32{0: 0, 2: 5, 1: 9}, []int{0, 2, 1}, false},
		{"spill: successor follows", []int{0, 2, 1}, map[int]int32{0: 0, 2: 5, 1: 9}, []int{0, 1, 2}, true},
		{"spill: successor too far", []int{0, 2, 1}, map[int]int32{0: 0, 2: 5, 1: 51}, []int{0, 2, 1}, true},
		{"spill: successor in another episode", []int{1, 3, 2}, map[int]int32{1: 0, 3: 5, 2: 9}, []int{1, 2, 3}, true},
		{"spill: successor in another group", []int{3, 5, 4}, map[int]int32{3: 0, 5: 2, 4: 4}, []int{3, 4, 5}, true},
		{"spill: both ways", []int{1, 4, 0, 2, 3}, map[int]int32{1: 0, 4: 1, 0: 2, 2: 3, 3: 4}, []int{0, 1, 4, 2, 3}, true},
	} {
		used := make([]bool, 6)
		first := make([]int32, 6)
		for _, u := range tc.units {
			used[u] = true
			first[u] = tc.first[u]
		}
		got := hoistPieces(pi, slices.Clone(tc.units), used, first, rows, tc.succ)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCameraBudget: by default (BufferBytes 0) a camera stream's buffer
// gets what DefaultCameraMemory leaves beside its decoding, so that its
// estimate plus TrainRestBytes stays within DefaultCameraMemory (two
// 480×640 cameras, 2 workers: 275 frames); language-only streams keep
// DefaultBufferBytes, and a budget given is kept.
func TestCameraBudget(t *testing.T) {
	cfg := twoCameraConfig(t)
	cams := []Mix{{Config: &cfg, Weight: 1}}
	plain := []Mix{{Config: demoConfig(t, render.ModeFallback), Weight: 1}}
	to := TrainOptions{Shuffle: true, BufferSize: DefaultBufferSize}
	if got := bufferBudget(plain, to); got != DefaultBufferBytes {
		t.Errorf("language-only: budget %d, want %d", got, DefaultBufferBytes)
	}
	b := bufferBudget(cams, to)
	to.BufferBytes = b
	frames, sample := bufferFrames(cams, to)
	total := TrainBytes(cams, TrainOptions{Shuffle: true, BufferSize: DefaultBufferSize}) + TrainRestBytes
	t.Logf("two 480×640 cameras, 2 workers: budget %d MB, %d frames of %d bytes; estimate + rest %d MB", b>>20, frames, sample, total>>20)
	// Pieces sized as at the 1 GiB default (36 samples) leave the
	// budget; the stream's own pieces are smaller (32), so its estimate
	// is a little under.
	if total > DefaultCameraMemory || total < DefaultCameraMemory-(100<<20) {
		t.Errorf("estimate + rest %d, want at most %d, within 100 MiB", total, DefaultCameraMemory)
	}
	if frames < 250 || frames > 300 {
		t.Errorf("%d frames in the default camera buffer, want about 275", frames)
	}
	if got := bufferBudget(cams, TrainOptions{BufferBytes: 1 << 30}); got != 1<<30 {
		t.Errorf("a budget given: %d", got)
	}
	// Many workers: the floor.
	cfg.Workers = 64
	if got := bufferBudget(cams, TrainOptions{}); got != minCameraBudget {
		t.Errorf("64 workers: budget %d, want the floor %d", got, minCameraBudget)
	}
}

// pairConv is a test collate.Conv: each stored byte b becomes b, b+1.
type pairConv struct{ n int }

func (c pairConv) Sizes() (int, int) { return c.n, 2 * c.n }

func (c pairConv) Convert(dst, src []byte) {
	for i, v := range src[:c.n] {
		dst[2*i], dst[2*i+1] = v, v+1
	}
}

// TestHeldStoredFrames: camera frames stored as decoded (a collate.Conv
// with them, Config.StoredFrames) are held in their stored form — an
// array of their stored bytes — and lent to the batch with their
// conversion; small frames are converted as they are held. Either way the
// batch's bytes are the converted ones, and the held sizes are checked
// against the chunk's first frame's converted sizes.
func TestHeldStoredFrames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stored int  // a camera frame's stored bytes (converted: twice)
		own    bool // held in an array of its own, as stored
	}{
		{"camera", collate.BorrowMin, true},
		{"small", 64, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHolder([]Mix{{Config: &Config{}, Weight: 1}}, false, "")
			const recs = 3
			hc := h.chunk(recs)
			num := func(n int) []byte { return bytes.Repeat([]byte{byte(10 + n)}, 8) }
			cam := func(n int) []byte { return bytes.Repeat([]byte{byte(2 * n)}, tc.stored) }
			conv := pairConv{tc.stored}
			c := &Chunk{Unit: shard.Unit{File: "f.parquet"}}
			var want []byte
			for n := range recs {
				hc.recs[n] = heldFrame{chunk: hc, n: int32(n), index: int64(n)}
				h.tmp.Features = [][]byte{num(n), cam(n)}
				h.tmp.Conv = []collate.Conv{nil, conv}
				if !hc.sized {
					h.sizeChunk(hc, h.tmp.Features, h.tmp.Conv)
				}
				var err error
				if hc.own != nil {
					err = h.holdOwn(hc, n, c, &hc.recs[n])
				} else {
					err = h.holdShared(hc, n, c, &hc.recs[n])
				}
				if err != nil {
					t.Fatal(err)
				}
				out := make([]byte, 2*tc.stored)
				conv.Convert(out, cam(n))
				want = append(want, out...)
			}
			if (hc.own != nil) != tc.own || !slices.Equal(hc.sizes, []int{8, 2 * tc.stored}) {
				t.Fatalf("own arrays %v, sizes %v; want %v, [8 %d]", hc.own != nil, hc.sizes, tc.own, 2*tc.stored)
			}
			if tc.own && len(hc.own[1]) != 8+tc.stored {
				t.Fatalf("a held frame takes %d bytes, want its stored %d", len(hc.own[1]), 8+tc.stored)
			}
			b, err := collate.NewBatcher(collate.Config{BatchSize: recs, Features: []collate.Feature{
				{Name: "state", DType: "|u1", Shape: []int{8}}, {Name: "cam", DType: "|u1", Shape: []int{2 * tc.stored}}}})
			if err != nil {
				t.Fatal(err)
			}
			frames := []*heldFrame{&hc.recs[0], &hc.recs[1], &hc.recs[2]}
			bt, err := h.batchOf(b, frames)
			if err != nil {
				t.Fatal(err)
			}
			col := bt.Column("cam")
			if !bytes.Equal(col.Bytes(), want) {
				t.Fatal("the batch's camera bytes are not the converted frames")
			}
			if tc.own && len(col.Parts) != recs {
				t.Fatalf("%d parts, want the %d stored frames lent", len(col.Parts), recs)
			}
			h.served(frames)
			b.Recycle(bt)
			if tc.own {
				// Served arrays are kept up to maxFreeFrames frames of the
				// batch form: about twice as many stored ones.
				for range 3 * maxFreeFrames {
					h.recycle(make([]byte, 8+tc.stored))
				}
				if n := h.freeCount(); n <= maxFreeFrames || n*(8+tc.stored) > maxFreeFrames*hc.stride {
					t.Fatalf("%d stored arrays kept for reuse, want more than %d within %d frames' batch bytes", n, maxFreeFrames, maxFreeFrames)
				}
			}
			// A frame whose converted size differs from the first's.
			n := 0
			hc.own, hc.data = nil, hc.data[:0]
			if tc.own {
				hc.own = make([][]byte, recs)
			}
			h.tmp.Features = [][]byte{num(n), cam(n)[:tc.stored/2]}
			h.tmp.Conv = []collate.Conv{nil, pairConv{tc.stored / 2}}
			if tc.own {
				err = h.holdOwn(hc, n, c, &hc.recs[n])
			} else {
				err = h.holdShared(hc, n, c, &hc.recs[n])
			}
			if err == nil {
				t.Fatal("a frame of another converted size held")
			}
		})
	}
}

// TestLookahead: taking inputs in order prepares each later input once,
// in input order, up to width after the one taken, never one taken.
func TestLookahead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		width int
		takes []int
		want  []int
	}{
		{"every input", 2, []int{0, 1, 2, 3, 4, 5}, []int{1, 2, 3, 4, 5, 6, 7}},
		{"inputs taken before their turn are skipped", 2, []int{0, 5, 6}, []int{1, 2, 6, 7, 8}},
		{"to the last input", 3, []int{7, 8, 9}, []int{8, 9}},
		{"width 0: none", 0, []int{0, 1, 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l lookahead
			var mu sync.Mutex
			var got []int
			for _, i := range tc.takes {
				l.take(context.Background(), i, tc.width, 10, func(_ context.Context, j int) {
					time.Sleep(time.Duration(10-j) * time.Millisecond) // later inputs finish sooner if run at once
					mu.Lock()
					got = append(got, j)
					mu.Unlock()
				})
			}
			l.wait()
			if !slices.Equal(got, tc.want) {
				t.Fatalf("prepared %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPieceContinues: a piece needs no prestart when its group's previous
// piece is among the inputs just before it.
func TestPieceContinues(t *testing.T) {
	// Group 0: pieces 0-2; group 1: pieces 3-4.
	bs := &batchServer{pi: &pieceIndex{base: []int{0, 3, 5}}, units: []int{0, 1, 3, 2, 4}}
	for _, tc := range []struct {
		j, within int
		want      int
	}{
		{0, 3, -1}, // a group's first piece
		{1, 1, 0},  // piece 0 just before
		{2, 3, -1}, // piece 3: group 1's first
		{3, 2, 1},  // piece 2: piece 1 two inputs before
		{3, 1, -1}, // ... not within one
		{4, 2, 2},  // piece 4: piece 3 two before
	} {
		if got := bs.continues(tc.j, tc.within); got != tc.want {
			t.Errorf("continues(%d, %d) = %v, want %v", tc.j, tc.within, got, tc.want)
		}
	}
	// Their turns: each waits for the first camera of the input it
	// continues; the others wait for none.
	bs.linkTurns(3)
	waitsFor := []int{-1, 0, -1, 1, 2}
	for j, want := range waitsFor {
		turn, _ := bs.turns[j].(*pieceAfter)
		switch {
		case want < 0 && turn != nil && turn.prev != nil:
			t.Errorf("input %d waits", j)
		case want >= 0 && (turn == nil || turn.prev == nil || turn.prev != bs.turns[want].(*pieceAfter).done):
			t.Errorf("input %d does not wait for input %d", j, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := bs.turns[1].wait(ctx, 1); err == nil {
		t.Fatal("input 1 went before input 0's first camera")
	}
	bs.turns[0].finish(0)
	bs.turns[0].finish(0) // once
	if err := bs.turns[1].wait(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
}
