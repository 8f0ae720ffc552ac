package pipeline

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// TestSpillSameOutput: a spill directory changes where held camera
// frames wait, never the batches: for the same buffer size the output is
// byte-identical with and without it, in every order, with a camera
// window, and the spill file holds at most the held frames.
func TestSpillSameOutput(t *testing.T) {
	dir := videoDataset(t, func(o *datagen.Options) { o.Episodes, o.MinFrames, o.MaxFrames = 6, 40, 80 })
	cfg, err := cameraConfig(t, dir, "all")
	if err != nil {
		t.Fatal(err)
	}
	// Pieces of 1 MiB (the least): 28 samples of two 96×64 cameras, so
	// episodes are decoded in 2 or 3 pieces, hoisted with a spill.
	cfg.PieceBytes = 1 << 20
	run := func(cfg *Config, to TrainOptions) ([]byte, *Stats) {
		t.Helper()
		var buf bytes.Buffer
		st, err := Train(context.Background(), cfg, StreamOptions{BatchSize: 8}, to, sink.NewMsgpack(&buf))
		if err != nil {
			t.Fatalf("spill %q: %v", to.Spill, err)
		}
		return buf.Bytes(), st
	}
	cases := []struct {
		name   string
		to     TrainOptions
		deltas string
		window int // frames of the longest camera window
	}{
		{name: "plan order", to: TrainOptions{Epochs: 2}},
		{name: "shuffled, buffer 1", to: TrainOptions{Shuffle: true, Seed: 1, BufferSize: 1}},
		{name: "shuffled, buffer 7", to: TrainOptions{Shuffle: true, Seed: 2, BufferSize: 7}},
		{name: "shuffled, buffer 64, 2 epochs", to: TrainOptions{Shuffle: true, Seed: 3, BufferSize: 64, Epochs: 2}},
		{name: "shuffled, buffer 16384", to: TrainOptions{Shuffle: true, Seed: 4, BufferSize: 16384}},
		{name: "consumer 1 of 2", to: TrainOptions{Shuffle: true, Seed: 5, BufferSize: 32, Consumer: 1, Consumers: 2}},
		{name: "partitioned", to: TrainOptions{Shuffle: true, Seed: 6, BufferSize: 32, Order: OrderPartitioned, Partitions: 2}},
		{name: "stratified", to: TrainOptions{Shuffle: true, Seed: 7, BufferSize: 32, Order: OrderStratified, Partitions: 2}},
		{name: "camera window", to: TrainOptions{Shuffle: true, Seed: 8, BufferSize: 48}, deltas: "observation.images.front=-2/30,0,1/30", window: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := *cfg
			if tc.deltas != "" {
				if c.Deltas, err = ParseDeltaTimestamps(tc.deltas); err != nil {
					t.Fatal(err)
				}
			}
			// A budget that never lowers the buffer: the buffer size is
			// the same with and without the spill.
			tc.window = max(tc.window, 1)
			to := tc.to
			to.Epochs = max(to.Epochs, 1)
			to.BufferBytes = -1
			to.Log = slog.New(slog.DiscardHandler)
			want, _ := run(&c, to)
			spillDir := t.TempDir()
			to.Spill = spillDir
			got, st := run(&c, to)
			if !bytes.Equal(got, want) {
				t.Fatalf("output differs with a spill directory (%d bytes, %d without)", len(got), len(want))
			}
			per := CameraBytesPerSample(&c) / 2 // held as YUV 4:2:0: half of RGB
			if st.SpillPeak < per {
				t.Fatalf("the spill file held at most %d bytes: were the frames spilled? (a frame's cameras %d)", st.SpillPeak, per)
			}
			// A sample's stored bytes are at most its batch bytes,
			// SampleBytes, which counts one frame of a camera with a
			// window (window frames: the window's length).
			if bound := st.HeldPeak * SampleBytes(&c) * int64(tc.window); st.SpillPeak > bound {
				t.Fatalf("the spill file held %d bytes at once, more than the %d frames held (%d bytes)", st.SpillPeak, st.HeldPeak, bound)
			}
			if to.Shuffle && to.Order == "" {
				// Pieces are decoded up to spillAhead serve indices
				// early: the held frames stay within HeldBytes' count.
				C := max(to.Consumers, 1)
				rows := cameraHeld([]Mix{{Config: &c, Weight: 1}}, to).rows
				bound := int64(to.BufferSize/C+spillAhead(to.BufferSize, C)) + 4*rows + maxFreeFrames
				if st.HeldPeak > bound {
					t.Fatalf("held %d frames at once with the spill, more than %d", st.HeldPeak, bound)
				}
				if est := HeldBytes([]Mix{{Config: &c, Weight: 1}}, to); est < st.HeldPeak*SpilledSampleBytes(&c) {
					t.Fatalf("HeldBytes %d < %d frames held × %d", est, st.HeldPeak, SpilledSampleBytes(&c))
				}
			}
			if left, err := os.ReadDir(spillDir); err != nil || len(left) != 0 {
				t.Fatalf("spill directory after the run: %v, %v (want empty: the file is unlinked at once)", left, err)
			}
		})
	}
}

// TestSpillBufferFrames: with a spill directory the byte budget counts
// only what stays in memory, so a camera stream keeps its buffer; and the
// fingerprint follows the buffer size.
func TestSpillBufferFrames(t *testing.T) {
	dir := videoDataset(t, nil)
	cfg, err := cameraConfig(t, dir, "all")
	if err != nil {
		t.Fatal(err)
	}
	srcs := []Mix{{Config: cfg, Weight: 1}}
	budget := 1024 * SampleBytes(cfg)
	tests := []struct {
		spill string
		want  int
	}{
		{"", 1024},
		{t.TempDir(), 16384},
	}
	fps := map[string]bool{}
	for _, tc := range tests {
		to := TrainOptions{Shuffle: true, BufferSize: 16384, BufferBytes: budget, Spill: tc.spill}
		if got, _ := bufferFrames(srcs, to); got != tc.want {
			t.Errorf("spill %q: buffer of %d frames, want %d", tc.spill, got, tc.want)
		}
		ts, err := trainSetup(srcs, StreamOptions{BatchSize: 8}, to)
		if err != nil {
			t.Fatal(err)
		}
		if ts.to.BufferSize != tc.want {
			t.Errorf("spill %q: trainSetup's buffer %d frames, want %d", tc.spill, ts.to.BufferSize, tc.want)
		}
		fps[ts.fp] = true
	}
	if len(fps) != 2 {
		t.Errorf("the same fingerprint for buffers of different sizes")
	}
	if s, f := SpilledSampleBytes(cfg), SampleBytes(cfg); s >= f-CameraBytesPerSample(cfg)/2 {
		t.Errorf("SpilledSampleBytes %d, SampleBytes %d: the camera frames are still counted", s, f)
	}
}

// TestSpillErrors: a spill directory that cannot hold a file, and a file
// that fails, are errors naming the file and the frame.
func TestSpillErrors(t *testing.T) {
	dir := videoDataset(t, nil)
	cfg, err := cameraConfig(t, dir, "all")
	if err != nil {
		t.Fatal(err)
	}
	missing := t.TempDir() + "/missing"
	var buf bytes.Buffer
	_, err = Train(context.Background(), cfg, StreamOptions{BatchSize: 8}, TrainOptions{Shuffle: true, Epochs: 1, Spill: missing}, sink.NewMsgpack(&buf))
	if err == nil || !strings.Contains(err.Error(), "shuffle spill") || !strings.Contains(err.Error(), missing) {
		t.Fatalf("spill directory missing: error %v, want one naming it", err)
	}

	sp, err := openSpill(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hf := &heldFrame{episode: 3, index: 42, chunk: &heldChunk{file: "data/chunk-000/file-000.parquet", rowGroup: 1}}
	off, err := sp.put([][]byte{[]byte("abc"), []byte("defg")}, 7, hf)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 7)
	if err := sp.get(off, got, hf); err != nil || string(got) != "abcdefg" {
		t.Fatalf("read back %q, %v", got, err)
	}
	if off2 := sp.slot(7); off2 != off {
		t.Fatalf("freed slot not reused: %d, want %d", off2, off)
	}
	sp.release(off, 7)
	if err := sp.close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"write": func() error { _, err := sp.put([][]byte{[]byte("x")}, 1, hf); return err }(),
		"read":  sp.get(0, make([]byte, 1), hf),
	} {
		if err == nil {
			t.Fatalf("%s on a closed spill file: no error", name)
		}
		for _, want := range []string{sp.name, "episode 3", "index 42", "file-000.parquet row group 1"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s error %q does not name %q", name, err, want)
			}
		}
	}
}

// TestSpillCameraBound: two 480×640 cameras, 2 workers, 500 episodes of
// 300 frames: with a spill the default budget keeps the 16,384-frame
// buffer, the pieces are halved from --piece-mb until the decoding fits
// DefaultCameraMemory, and the stream's estimate plus TrainRestBytes
// stays within it.
func TestSpillCameraBound(t *testing.T) {
	cfg := twoCameraConfig(t)
	srcs := []Mix{{Config: &cfg, Weight: 1}}
	for _, C := range []int{1, 4} {
		to := TrainOptions{Shuffle: true, BufferSize: DefaultBufferSize, Spill: t.TempDir(), Consumers: C}
		to.BufferBytes = bufferBudget(srcs, to)
		frames, sample := bufferFrames(srcs, to)
		if frames != DefaultBufferSize {
			t.Errorf("C %d: %d frames with a spill, want %d", C, frames, DefaultBufferSize)
		}
		pb := trainPieceBytes(&cfg, to.BufferBytes, true)
		total := TrainBytes(srcs, to) + TrainRestBytes
		t.Logf("C %d: %d bytes a waiting sample, pieces %d MiB, estimate + rest %d MB", C, sample, pb>>20, total>>20)
		if total > DefaultCameraMemory {
			t.Errorf("C %d: estimate + rest %d, more than %d", C, total, DefaultCameraMemory)
		}
		if pb < trainPieceBytes(&cfg, to.BufferBytes, false) {
			t.Errorf("C %d: pieces of %d bytes with a spill, smaller than without", C, pb)
		}
	}
	// Samples under perFrameStride stay in their chunk's array: nothing
	// spills, so nothing is discounted and nothing decoded ahead.
	cfg.Cameras = &video.Set{Cameras: []video.Camera{{Key: "front", C: 3, H: 32, W: 32}, {Key: "wrist", C: 3, H: 32, W: 32}}}
	if s, f := SpilledSampleBytes(&cfg), SampleBytes(&cfg); s != f {
		t.Errorf("32×32 cameras: SpilledSampleBytes %d, want SampleBytes %d", s, f)
	}
	if spillsAhead(srcs, TrainOptions{Shuffle: true, Spill: t.TempDir()}) {
		t.Errorf("32×32 cameras: pieces decoded ahead though nothing spills")
	}
}
