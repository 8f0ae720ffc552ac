package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/internal/testtmpfs"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// TestSpillBudget: the spill's disk budget lowers the buffer (and, when
// a 1-frame buffer does not fit, the partitioned orders' open episodes)
// to the largest that fits one consumer's worst case, the same for any
// number of consumers, never below what fits; it leaves alone what fits,
// what never spills and runs without a budget, and refuses a budget
// nothing fits.
func TestSpillBudget(t *testing.T) {
	cams := twoCameraConfig(t) // 500 × 300 frames, two 480×640 cameras
	small := episodesConfig(t, 10, 300)
	small.Cameras = cams.Cameras
	tiny := cams
	tiny.Cameras = &video.Set{Cameras: []video.Camera{{Key: "front", C: 3, H: 32, W: 32}}}
	const GB = 1_000_000_000
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		cfg      *Config
		to       TrainOptions
		frames   int  // the buffer wanted; 0: lowered (checked below)
		openLess bool // PartitionOpen lowered below the byte budget's
		err      string
	}{
		{name: "global, default budget keeps 16,384", cfg: &cams, to: TrainOptions{}, frames: DefaultBufferSize},
		{name: "global, 30 GB", cfg: &cams, to: TrainOptions{SpillBytes: 30 * GB}},
		{name: "global, 30 GB, 8 consumers", cfg: &cams, to: TrainOptions{SpillBytes: 30 * GB, Consumers: 8, Consumer: 3}},
		{name: "global, 2 GB", cfg: &cams, to: TrainOptions{SpillBytes: 2 * GB}},
		{name: "no budget", cfg: &cams, to: TrainOptions{SpillBytes: -1}, frames: DefaultBufferSize},
		{name: "no spill directory", cfg: &cams, to: TrainOptions{SpillBytes: 1, BufferBytes: -1}, frames: DefaultBufferSize},
		{name: "the selection fits", cfg: &small, to: TrainOptions{SpillBytes: 6 * GB}, frames: DefaultBufferSize},
		{name: "samples that never spill", cfg: &tiny, to: TrainOptions{SpillBytes: 1}, frames: DefaultBufferSize},
		{name: "partitioned, default budget", cfg: &cams, to: TrainOptions{Order: OrderPartitioned}, openLess: true},
		{name: "partitioned, 20 GB", cfg: &cams, to: TrainOptions{Order: OrderPartitioned, SpillBytes: 20 * GB}, openLess: true},
		{name: "partitioned, 200 GB", cfg: &cams, to: TrainOptions{Order: OrderPartitioned, SpillBytes: 200 * GB}, frames: DefaultBufferSize},
		{name: "stratified, default budget", cfg: &cams, to: TrainOptions{Order: OrderStratified}, openLess: true},
		{name: "nothing fits", cfg: &cams, to: TrainOptions{SpillBytes: GB / 10}, err: "--shuffle-spill-gb 0.1: one consumer's spill needs at least"},
		{name: "nothing fits, partitioned", cfg: &cams, to: TrainOptions{Order: OrderPartitioned, SpillBytes: GB / 10}, err: "and one open episode a partition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcs := []Mix{{Config: tc.cfg, Weight: 1}}
			to := tc.to
			to.Shuffle, to.Spill = true, dir
			if tc.name == "no spill directory" {
				to.Spill = ""
			}
			z, err := completeTrain(srcs, to)
			got, sample := z.to, z.sample
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			asked := got
			asked.BufferSize, asked.PartitionOpen = DefaultBufferSize, to.PartitionOpen
			mem, _ := memorySize(srcs, asked)
			if tc.frames > 0 && got.BufferSize != tc.frames {
				t.Fatalf("buffer %d frames, want %d", got.BufferSize, tc.frames)
			}
			if (got.PartitionOpen < mem.PartitionOpen) != tc.openLess {
				t.Errorf("open %d, %d by the byte budget: lowered %t, want %t", got.PartitionOpen, mem.PartitionOpen, got.PartitionOpen < mem.PartitionOpen, tc.openLess)
			}
			if to.Spill == "" || spilledSample(srcs) == 0 {
				return
			}
			budget := spillBudget(to)
			one := got
			one.Consumer, one.Consumers = 0, 1
			need := spillBytesAt(srcs, one, sample)
			if budget > 0 && need > budget {
				t.Fatalf("one consumer's spill %d bytes, over the budget %d", need, budget)
			}
			if mine := SpillBytes(srcs, to); mine > need {
				t.Errorf("this consumer's spill %d bytes, more than one consumer's %d", mine, need)
			}
			if got.BufferSize < DefaultBufferSize {
				one.BufferSize++
				if more := spillBytesAt(srcs, one, sample); more <= budget {
					t.Errorf("buffer %d frames: %d more would fit the budget too (%d ≤ %d)", got.BufferSize, 1, more, budget)
				}
			}
			alone := to
			alone.Consumer, alone.Consumers = 0, 1
			if a, _ := completeTrain(srcs, alone); a.to.BufferSize != got.BufferSize || a.to.PartitionOpen != got.PartitionOpen {
				t.Errorf("one consumer: buffer %d, open %d; with %d: %d, %d (the order would depend on the cluster)", a.to.BufferSize, a.to.PartitionOpen, to.Consumers, got.BufferSize, got.PartitionOpen)
			}
			t.Logf("buffer %d frames (byte budget's %d), open %d (%d), spill of one consumer %.2f GB", got.BufferSize, mem.BufferSize, got.PartitionOpen, mem.PartitionOpen, float64(need)/GB)
		})
	}
}

// TestSpillSpace: a stream is admitted when its worst case fits the free
// space less what the streams admitted before may still write (their
// worst case less what their file holds), and its release frees that.
func TestSpillSpace(t *testing.T) {
	var s SpillSpace
	free := int64(100)
	statfs := func(string) (int64, error) { return free, nil }
	a, err := s.reserve("/d", 60, statfs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.reserve("/d", 41, statfs); err == nil || !strings.Contains(err.Error(), "the 1 other streams spilling there may still write 60 bytes") {
		t.Fatalf("41 bytes beside 60 of 100: error %v, want a refusal naming the other stream's 60 bytes", err)
	}
	// a wrote 30 bytes: the disk has 70 free, a may write 30 more.
	a.size.Store(30)
	free = 70
	if _, err := s.reserve("/d", 41, statfs); err == nil {
		t.Fatal("41 bytes admitted with 70 free of which 30 are a's")
	}
	b, err := s.reserve("/d", 40, statfs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.reserve("/other", 70, statfs); err != nil {
		t.Errorf("another directory: %v (its space is not shared)", err)
	}
	a.release()
	b.release()
	if c, err := s.reserve("/d", 70, statfs); err != nil {
		t.Errorf("after the others' release: %v", err)
	} else {
		c.release()
	}
	var none *SpillSpace
	if _, err := none.reserve("/d", 71, statfs); err == nil || !strings.Contains(err.Error(), "/d has 70 bytes (0.00 GB) free, but this stream's spill file may grow to 71 bytes") {
		t.Errorf("no SpillSpace, 71 bytes of 70: error %v", err)
	}
	if _, err := none.reserve("/d", 1, func(string) (int64, error) { return 0, errors.New("statfs /d: boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("statfs failing: error %v", err)
	}
}

// TestSpillBudgetStream: a disk budget that lowers the buffer streams as
// an explicit --shuffle-buffer of that size, says so in a warning, and
// its spill file stays within the budget.
func TestSpillBudgetStream(t *testing.T) {
	dir := videoDataset(t, func(o *datagen.Options) { o.Episodes, o.MinFrames, o.MaxFrames = 6, 40, 80 })
	cfg, err := cameraConfig(t, dir, "all")
	if err != nil {
		t.Fatal(err)
	}
	cfg.PieceBytes = 1 << 20
	srcs := []Mix{{Config: cfg, Weight: 1}}
	so := StreamOptions{BatchSize: 4}
	var logs bytes.Buffer
	to := TrainOptions{Shuffle: true, Seed: 4, Epochs: 1, BufferSize: 64, BufferBytes: -1, Spill: t.TempDir(),
		Log: slog.New(slog.NewTextHandler(&logs, nil))}
	// A budget for 20 frames of the buffer (one consumer's worst case).
	o := to
	o.BufferSize, o.SpillBytes = 20, -1
	to.SpillBytes = SpillBytes(srcs, o)
	fz, err := completeTrain(srcs, to)
	full := fz.to
	if err != nil {
		t.Fatal(err)
	}
	if full.BufferSize != 20 {
		t.Fatalf("buffer %d frames, want 20", full.BufferSize)
	}
	var got bytes.Buffer
	st, err := Train(context.Background(), cfg, so, to, sink.NewMsgpack(&got))
	if err != nil {
		t.Fatal(err)
	}
	explicit := to
	explicit.BufferSize, explicit.SpillBytes, explicit.Log = 20, -1, slog.New(slog.DiscardHandler)
	var want bytes.Buffer
	if _, err := Train(context.Background(), cfg, so, explicit, sink.NewMsgpack(&want)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("the spill budget's 20-frame buffer streams other bytes than --shuffle-buffer 20")
	}
	if st.SpillPeak == 0 || st.SpillPeak > to.SpillBytes {
		t.Errorf("spill file peak %d bytes, budget %d", st.SpillPeak, to.SpillBytes)
	}
	if l := logs.String(); !strings.Contains(l, "spill's disk budget") || !strings.Contains(l, "frames=20 asked_frames=64") {
		t.Errorf("log %q: want the spill budget's warning with frames=20 asked_frames=64", l)
	}
}

// TestSpillFreeSpace: a stream whose spill's worst case does not fit its
// directory's free space is refused at its start, before any message,
// with an error naming the directory, the bytes needed and free (from an
// injected free space, and from a small tmpfs's statfs), as CheckStart
// refuses it; and a disk that fills mid-run anyway (the check bypassed)
// fails the stream with an error naming the spill file.
// spillCameraStream is the spill space tests' stream: two cameras of
// videoDataset, shuffled with a 64-frame buffer and no memory or disk
// budget, its options without a spill directory.
func spillCameraStream(t *testing.T) (*Config, []Mix, StreamOptions, TrainOptions) {
	t.Helper()
	cfg, err := cameraConfig(t, videoDataset(t, nil), "all")
	if err != nil {
		t.Fatal(err)
	}
	to := TrainOptions{Shuffle: true, Seed: 2, Epochs: 1, BufferSize: 64, BufferBytes: -1, SpillBytes: -1, Log: slog.New(slog.DiscardHandler)}
	return cfg, []Mix{{Config: cfg, Weight: 1}}, StreamOptions{BatchSize: 4}, to
}

func TestSpillFreeSpace(t *testing.T) {
	cfg, srcs, so, base := spillCameraStream(t)
	refused := func(t *testing.T, to TrainOptions, free int64) {
		t.Helper()
		need := SpillBytes(srcs, to)
		var out bytes.Buffer
		_, err := Train(context.Background(), cfg, so, to, sink.NewMsgpack(&out))
		for _, want := range []string{"shuffle spill directory " + to.Spill, fmt.Sprintf("has %d bytes", free), fmt.Sprintf("may grow to %d bytes", need)} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one containing %q", err, want)
			}
		}
		if _, msgs := decodeMessages(t, out.Bytes()); len(msgs) != 1 || msgs[0] != sink.TypeError {
			t.Fatalf("messages %v, want the error alone", msgs)
		}
		if cerr := CheckStart(srcs, so, &to); cerr == nil || cerr.Error() != err.Error() {
			t.Errorf("CheckStart: %v, want %v", cerr, err)
		}
		if left, _ := os.ReadDir(to.Spill); len(left) != 0 {
			t.Errorf("spill directory holds %v after the refusal", left)
		}
	}
	t.Run("injected free space", func(t *testing.T) {
		to := base
		to.Spill = t.TempDir()
		need := SpillBytes(srcs, to)
		to.freeSpace = func(string) (int64, error) { return need - 1, nil }
		refused(t, to, need-1)
		to.freeSpace = func(string) (int64, error) { return need, nil }
		if _, err := Train(context.Background(), cfg, so, to, sink.NewMsgpack(&bytes.Buffer{})); err != nil {
			t.Fatalf("exactly the worst case free: %v", err)
		}
	})
	t.Run("tmpfs", func(t *testing.T) {
		to := base
		to.Spill = t.TempDir()
		testtmpfs.Mount(t, to.Spill, "size=64k", "the injected free-space cases cover the check")
		free, err := freeBytes(to.Spill)
		if err != nil || free > 64<<10 || SpillBytes(srcs, to) <= free {
			t.Fatalf("tmpfs: %d bytes free (%v), spill %d: the case shows nothing", free, err, SpillBytes(srcs, to))
		}
		refused(t, to, free)
	})
	t.Run("disk full mid-run", func(t *testing.T) {
		to := base
		to.Spill = t.TempDir()
		testtmpfs.Mount(t, to.Spill, "size=64k", "the injected free-space cases cover the check")
		to.freeSpace = func(string) (int64, error) { return 1 << 50, nil }
		var out bytes.Buffer
		_, err := Train(context.Background(), cfg, so, to, sink.NewMsgpack(&out))
		if err == nil || !strings.Contains(err.Error(), "shuffle spill file "+to.Spill+"/.lrstream-spill-") || !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("error %v, want one naming the spill file and the full disk", err)
		}
		if _, msgs := decodeMessages(t, out.Bytes()); len(msgs) == 0 || msgs[len(msgs)-1] != sink.TypeError {
			t.Fatalf("messages %v, want an error last", msgs)
		}
	})
}

// TestSpillSpaceStreams: streams sharing a SpillSpace are admitted while
// their worst cases fit the directory: of two streams of a directory with
// room for one and a half, the second is refused while the first runs,
// and admitted once it is done.
func TestSpillSpaceStreams(t *testing.T) {
	cfg, srcs, so, to := spillCameraStream(t)
	to.Spill, to.SpillSpace = t.TempDir(), &SpillSpace{}
	need := SpillBytes(srcs, to)
	to.freeSpace = func(string) (int64, error) { return need + need/2, nil }
	// The first stream stalls on its first message until the second is
	// refused.
	first := &stallSink{Msgpack: sink.NewMsgpack(&bytes.Buffer{}), stalled: make(chan struct{}), resume: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := Train(context.Background(), cfg, so, to, first)
		done <- err
	}()
	<-first.stalled
	_, err := Train(context.Background(), cfg, so, to, sink.NewMsgpack(&bytes.Buffer{}))
	if err == nil || !strings.Contains(err.Error(), "the 1 other streams spilling there may still write") {
		t.Fatalf("second stream: error %v, want a refusal naming the running stream", err)
	}
	close(first.resume)
	if err := <-done; err != nil {
		t.Fatalf("first stream: %v", err)
	}
	if _, err := Train(context.Background(), cfg, so, to, sink.NewMsgpack(&bytes.Buffer{})); err != nil {
		t.Fatalf("after the first stream: %v", err)
	}
}

// stallSink is a sink whose first Header waits for resume, once stalled
// is closed.
type stallSink struct {
	*sink.Msgpack
	once            sync.Once
	stalled, resume chan struct{}
}

func (s *stallSink) Header(h sink.Header) error {
	s.once.Do(func() {
		close(s.stalled)
		<-s.resume
	})
	return s.Msgpack.Header(h)
}

// decodeMessages returns the message types of a msgpack stream.
func decodeMessages(t *testing.T, b []byte) (*sink.Header, []string) {
	t.Helper()
	d := sink.NewDecoder(bytes.NewReader(b))
	var h *sink.Header
	var types []string
	for {
		m, err := d.Next()
		if err != nil {
			return h, types
		}
		if m.Type == sink.TypeHeader {
			h = m.Header
		}
		types = append(types, m.Type)
	}
}
