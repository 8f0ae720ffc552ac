package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/sink"
)

// TestSampleBytesCameraWindow: a camera with a --delta-timestamps window
// of k timestamps holds k frames a sample (and a k-byte pad mask), so the
// byte budget's buffer of two 480×640 cameras with 3-timestamp windows is
// a third of the buffer without windows (the numeric features' share
// aside), and its frames fit the budget; with a spill the windows' frames
// wait on disk and only their pad masks stay in memory.
func TestSampleBytesCameraWindow(t *testing.T) {
	plain := twoCameraConfig(t)
	win := plain
	var err error
	if win.Deltas, err = ParseDeltaTimestamps("front=-2/30,0,1/30;wrist=-1/30,0,1/30"); err != nil {
		t.Fatal(err)
	}
	cam := CameraBytesPerSample(&plain)
	if got, want := SampleBytes(&win)-SampleBytes(&plain), 2*cam+6; got != want {
		t.Errorf("3-timestamp windows on both cameras add %d bytes a sample, want %d (2 more frames a camera, 3 pad bytes each)", got, want)
	}
	if got, want := SpilledSampleBytes(&win)-SpilledSampleBytes(&plain), int64(6); got != want {
		t.Errorf("spilled: the windows add %d bytes in memory, want %d (pad masks)", got, want)
	}
	for _, budget := range []int64{DefaultBufferBytes, 4 << 30} {
		frames := func(cfg *Config) (int, int64) {
			to := TrainOptions{Shuffle: true, BufferSize: DefaultBufferSize, BufferBytes: budget}
			return bufferFrames([]Mix{{Config: cfg, Weight: 1}}, to)
		}
		n, _ := frames(&plain)
		w, sample := frames(&win)
		if r := float64(w) / float64(n); math.Abs(r-1.0/3) > 0.01 {
			t.Errorf("budget %d: %d frames with windows, %d without: ratio %.4f, want 1/3 ± 0.01", budget, w, n, r)
		}
		if int64(w)*sample > budget {
			t.Errorf("budget %d: %d frames × %d bytes exceed it", budget, w, sample)
		}
	}
}

// TestCameraWindowBufferWithinBudget: on a camera stream with a
// 3-timestamp window the budget's buffer holds its frames within the
// budget, measured on the batches (a held sample is at most its batch
// bytes), where counting one frame a camera (the earlier builds) exceeded
// it; the lowered buffer streams as an explicit buffer of that size.
func TestCameraWindowBufferWithinBudget(t *testing.T) {
	dir := videoDataset(t, nil)
	cfg, err := cameraConfig(t, dir, "all")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Deltas, err = ParseDeltaTimestamps("observation.images.front=-2/30,0,1/30"); err != nil {
		t.Fatal(err)
	}
	const want = 12
	budget := want*SampleBytes(cfg) + SampleBytes(cfg)/2
	so := StreamOptions{BatchSize: 4}
	to := TrainOptions{Shuffle: true, Seed: 3, Epochs: 1, BufferSize: 5000, BufferBytes: budget, Log: slog.New(slog.DiscardHandler)}
	srcs := []Mix{{Config: cfg, Weight: 1}}
	got, bs := trainBatches(t, cfg, so, to)
	explicit := to
	explicit.BufferSize, explicit.BufferBytes = want, -1
	if wantRaw, _ := trainBatches(t, cfg, so, explicit); !equalRaw(got, wantRaw) {
		t.Fatalf("the budget's buffer streams other batches than --shuffle-buffer %d", want)
	}
	if n, _ := bufferFrames(srcs, to); n != want {
		t.Fatalf("buffer of %d frames, want %d", n, want)
	}
	measured := heldFrameOverhead + batchSampleBytes(t, bs[0])
	if held := want * measured; held > budget {
		t.Errorf("%d frames × %d measured bytes = %d, over the budget %d", want, measured, held, budget)
	}
	old := to
	old.oneFramePerWindow = true
	if n, _ := bufferFrames(srcs, old); int64(n)*measured <= budget {
		t.Errorf("one frame a camera: %d frames × %d bytes fit the budget %d: the test shows nothing", n, measured, budget)
	}
}

// TestResumeAcrossCameraWindowSizing: a resume token of a run whose
// buffer counted one frame per camera of a window (the earlier builds) is
// refused with an error saying so and naming the options that continue
// it, and those options continue it byte for byte.
func TestResumeAcrossCameraWindowSizing(t *testing.T) {
	dir := videoDataset(t, nil)
	cfg, err := cameraConfig(t, dir, "all")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Deltas, err = ParseDeltaTimestamps("observation.images.front=-1/30,0,1/30"); err != nil {
		t.Fatal(err)
	}
	so := StreamOptions{BatchSize: 4}
	budget := 10 * SampleBytes(cfg)
	to := TrainOptions{Shuffle: true, Seed: 7, Epochs: 1, BufferBytes: budget, Log: slog.New(slog.DiscardHandler)}
	old := to
	old.oneFramePerWindow = true
	was, bs := trainBatches(t, cfg, so, old)
	if len(bs) < 3 {
		t.Fatalf("%d batches: too few to resume", len(bs))
	}
	to.Resume = bs[1].Meta.Resume
	_, _, err = trainRaw(t, []Mix{{Config: cfg, Weight: 1}}, so, to)
	if err == nil || !strings.Contains(err.Error(), "one frame per camera") || !strings.Contains(err.Error(), "--shuffle-buffer ") {
		t.Fatalf("resuming the earlier build's token: error %v, want one explaining the buffer and naming --shuffle-buffer", err)
	}
	t.Log(err)
	frames, _ := bufferFrames([]Mix{{Config: cfg, Weight: 1}}, TrainOptions{Shuffle: true, BufferSize: DefaultBufferSize, BufferBytes: budget, oneFramePerWindow: true})
	if !strings.Contains(err.Error(), fmt.Sprintf("--shuffle-buffer %d --shuffle-buffer-bytes 0", frames)) {
		t.Fatalf("error %q does not name --shuffle-buffer %d --shuffle-buffer-bytes 0", err, frames)
	}
	to.BufferSize, to.BufferBytes = frames, -1
	rest, _ := trainBatches(t, cfg, so, to)
	if !equalRaw(rest, was[2:]) {
		t.Fatalf("resumed with the named options: %d batches, not the earlier run's last %d", len(rest), len(was)-2)
	}
}

// batchSampleBytes is the bytes a sample of b carries in its numeric and
// camera columns (pad masks included; the core columns left out).
func batchSampleBytes(t *testing.T, b *sink.DecodedBatch) int64 {
	t.Helper()
	var n int64
	for _, f := range b.Columns {
		a, ok := f.Value.(*sink.Array)
		if !ok || isCore(f.Name) {
			continue
		}
		n += int64(len(a.Data))
	}
	if b.Size == 0 || n == 0 {
		t.Fatalf("batch of %d samples, %d feature bytes", b.Size, n)
	}
	return n / int64(b.Size)
}

func equalRaw(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, bytes.Equal)
}

// TestHeldSampleBytesMeasured: MeasureHeldFrames asks the decoder which
// form a camera's frames are held in — YUV 4:2:0 planes (1.5 bytes a
// pixel) for the generated H.264 videos, RGB24 rows (the batch's 3 bytes)
// when FFmpeg converts them (--resize) — and HeldSampleBytes then equals
// what a training stream holds a sample in, measured as the slot size of
// its spill file.
func TestHeldSampleBytesMeasured(t *testing.T) {
	dir := videoDataset(t, nil) // 96×64 cameras
	for _, tc := range []struct {
		name   string
		resize [2]int
		perPx  float64 // held bytes a pixel of a camera frame
	}{
		{"YUV 4:2:0", [2]int{}, 1.5},
		{"RGB24 (resized)", [2]int{96, 128}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := heldFormConfig(t, dir, tc.resize)
			srcs := []Mix{{Config: cfg, Weight: 1}}
			full := SampleBytes(cfg)
			if got := HeldSampleBytes(cfg); got != full {
				t.Fatalf("unmeasured: HeldSampleBytes %d, want the batch form's %d", got, full)
			}
			if err := MeasureHeldFrames(context.Background(), srcs); err != nil {
				t.Fatal(err)
			}
			var pixels int64
			for k, cam := range cfg.Cameras.Cameras {
				pixels += int64(cam.H * cam.W)
				if want := int64(tc.perPx * float64(cam.H*cam.W)); cfg.heldFrames[k] != want {
					t.Errorf("camera %s: held in %d bytes, want %d", cam.Key, cfg.heldFrames[k], want)
				}
			}
			est := HeldSampleBytes(cfg)
			if want := full - 3*pixels + int64(tc.perPx*float64(pixels)); est != want {
				t.Errorf("HeldSampleBytes %d, want %d", est, want)
			}
			var sp *spillFile
			to := TrainOptions{Shuffle: true, Seed: 1, Epochs: 1, BufferSize: 16, BufferBytes: -1, Spill: t.TempDir(),
				Log: slog.New(slog.DiscardHandler), spillOpened: func(s *spillFile) { sp = s }}
			if _, err := Train(context.Background(), cfg, StreamOptions{BatchSize: 4}, to, sink.NewMsgpack(&bytes.Buffer{})); err != nil {
				t.Fatal(err)
			}
			if sp == nil {
				t.Fatal("no spill file")
			}
			// Every slot is free again after the run: their sizes are
			// the held samples'.
			if slots := slices.Sorted(maps.Keys(sp.free)); len(slots) != 1 || int64(slots[0]) != est-heldFrameOverhead {
				t.Errorf("spill slots of %v bytes, want one size: HeldSampleBytes %d less the %d-byte record", slots, est, heldFrameOverhead)
			}
		})
	}
}

// heldFormConfig is a camera config of the dataset at dir, its frames
// resized to resize (H, W) when set.
func heldFormConfig(t *testing.T, dir string, resize [2]int) *Config {
	t.Helper()
	cfg, err := cameraConfig(t, dir, "none")
	if err != nil {
		t.Fatal(err)
	}
	if err := SetupCameras(context.Background(), cfg, CameraOptions{Spec: "all", ResizeH: resize[0], ResizeW: resize[1]}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSpillPieceBytesHeldForm: with the frames being fed and collated
// counted in the form they are held in, two 480×640 YUV cameras get
// pieces of 128 MiB where the batch form gave 64 MiB, within the same
// memory; RGB24 frames keep 64 MiB. The measurement never changes the
// buffer, the open episodes, the fingerprint nor the spill's worst case,
// which come from metadata alone.
func TestSpillPieceBytesHeldForm(t *testing.T) {
	plain := twoCameraConfig(t)
	yuv, rgb := plain, plain
	yuv.heldFrames = []int64{460800, 460800}
	rgb.heldFrames = []int64{921600, 921600}
	for _, tc := range []struct {
		name string
		cfg  *Config
		want int64
	}{
		{"unmeasured", &plain, 64 << 20},
		{"YUV 4:2:0", &yuv, 128 << 20},
		{"RGB24", &rgb, 64 << 20},
	} {
		pb := spillPieceBytes(tc.cfg, DefaultPieceBytes)
		if pb != tc.want {
			t.Errorf("%s: pieces of %d MiB, want %d", tc.name, pb>>20, tc.want>>20)
		}
		rows, flight := camFlight(tc.cfg, pb)
		if used := flight + 3*rows*HeldSampleBytes(tc.cfg) + maxFreeFrames*SampleBytes(tc.cfg); used > DefaultCameraMemory-TrainRestBytes {
			t.Errorf("%s: %d bytes decoded, fed and collated, over %d", tc.name, used, DefaultCameraMemory-TrainRestBytes)
		}
		for _, order := range []string{OrderGlobal, OrderPartitioned, OrderStratified} {
			to := TrainOptions{Shuffle: true, Spill: "/spill", Order: order}
			mz, err1 := completeTrain([]Mix{{Config: tc.cfg, Weight: 1}}, to)
			uz, err2 := completeTrain([]Mix{{Config: &plain, Weight: 1}}, to)
			m, u := mz.to, uz.to
			if err1 != nil || err2 != nil || m.BufferSize != u.BufferSize || m.PartitionOpen != u.PartitionOpen {
				t.Errorf("%s, %s: buffer %d open %d (%v), unmeasured %d, %d (%v)", tc.name, order, m.BufferSize, m.PartitionOpen, err1, u.BufferSize, u.PartitionOpen, err2)
			}
			if a, b := SpillBytes([]Mix{{Config: tc.cfg, Weight: 1}}, to), SpillBytes([]Mix{{Config: &plain, Weight: 1}}, to); a != b {
				t.Errorf("%s, %s: spill worst case %d, unmeasured %d", tc.name, order, a, b)
			}
		}
		if total := TrainBytes([]Mix{{Config: tc.cfg, Weight: 1}}, TrainOptions{Shuffle: true, Spill: "/spill"}) + TrainRestBytes; total > DefaultCameraMemory {
			t.Errorf("%s: estimate + rest %d, over %d", tc.name, total, DefaultCameraMemory)
		}
	}
}
