package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

func TestPieceRanges(t *testing.T) {
	tests := []struct{ total, rows, n int }{
		{0, 8, 1}, {5, 0, 1}, {8, 8, 1}, {9, 8, 2}, {100, 7, 15}, {31, 10, 4},
	}
	for _, tc := range tests {
		n := pieceCount(tc.total, tc.rows)
		if n != tc.n {
			t.Fatalf("pieceCount(%d, %d) = %d, want %d", tc.total, tc.rows, n, tc.n)
		}
		next := 0
		for k := 0; k < n; k++ {
			lo, hi := pieceRange(tc.total, n, k)
			if lo != next || hi < lo || (tc.rows > 0 && hi-lo > tc.rows) {
				t.Fatalf("total %d rows %d: piece %d is [%d, %d), after %d", tc.total, tc.rows, k, lo, hi, next)
			}
			for r := lo; r < hi; r++ {
				if got := pieceOf(tc.total, n, r); got != k {
					t.Fatalf("pieceOf(%d, %d, %d) = %d, want %d", tc.total, n, r, got, k)
				}
			}
			next = hi
		}
		if next != tc.total {
			t.Fatalf("total %d: pieces end at %d", tc.total, next)
		}
	}
}

// piecesDataset is a two-episode-per-file video dataset whose episodes
// are several pieces long at 7 rows a piece.
func piecesDataset(t *testing.T) string {
	return videoDataset(t, func(o *datagen.Options) {
		o.Episodes, o.MinFrames, o.MaxFrames, o.FramesPerFile = 3, 30, 45, 80
		o.Cameras = []string{"front"}
	})
}

// pieceConfig is cameraConfig decoding the front camera through a
// counting decoder, with pieces of rows samples (0: whole groups).
func pieceConfig(t *testing.T, dir string, rows int, deltas string, wrap func(video.Decoder) video.Decoder) (*Config, *countingDecoder) {
	t.Helper()
	cfg, err := cameraConfig(t, dir, "none")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Deltas, err = ParseDeltaTimestamps(deltas); err != nil {
		t.Fatal(err)
	}
	cd := &countingDecoder{}
	err = SetupCameras(context.Background(), cfg, CameraOptions{Spec: "observation.images.front", NewDecoder: func() (video.Decoder, error) {
		d, err := video.NewFFmpeg()
		cd.Decoder = d
		if wrap != nil {
			cd.Decoder = wrap(d)
		}
		return cd, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.PieceBytes = 1 << 40
	if rows > 0 {
		cfg.PieceBytes, cfg.minPieceRows = 1, rows
	}
	return cfg, cd
}

// TestCameraPiecesSameBytes: decoding long episodes in bounded pieces
// (one segment per piece and camera, each a few rows long) gives the same
// bytes as decoding whole episodes, with and without --delta-timestamps
// windows (camera and numeric) crossing the piece boundaries, in plan
// order and in the training orders.
func TestCameraPiecesSameBytes(t *testing.T) {
	t.Parallel()
	dir := piecesDataset(t)
	const rows = 7
	deltas := []string{"", "observation.images.front=-2/30,0,1/30;observation.state=-3/30,0,2/30"}
	orders := []struct {
		name string
		run  func(cfg *Config) []byte
	}{
		{"stream", func(cfg *Config) []byte {
			raw, _, err := streamBytes(cfg, 8)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}},
		{"global shuffle", func(cfg *Config) []byte {
			var buf bytes.Buffer
			to := TrainOptions{Shuffle: true, Seed: 5, BufferSize: 40, Epochs: 1}
			if _, err := Train(context.Background(), cfg, StreamOptions{BatchSize: 8}, to, sink.NewMsgpack(&buf)); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}},
		{"partitioned", func(cfg *Config) []byte {
			var buf bytes.Buffer
			to := TrainOptions{Shuffle: true, Seed: 5, BufferSize: 40, Epochs: 1, Order: OrderPartitioned, Partitions: 1, Consumers: 1}
			if _, err := Train(context.Background(), cfg, StreamOptions{BatchSize: 8}, to, sink.NewMsgpack(&buf)); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}},
	}
	for _, d := range deltas {
		for _, o := range orders {
			if d == "" && o.name != "stream" {
				continue // the windows' case covers the training orders' paths
			}
			t.Run(fmt.Sprintf("%s/%q", o.name, d), func(t *testing.T) {
				whole, wd := pieceConfig(t, dir, 0, d, nil)
				want := o.run(whole)
				cut, cd := pieceConfig(t, dir, rows, d, nil)
				got := o.run(cut)
				if !bytes.Equal(got, want) {
					t.Fatalf("pieces of %d rows: %d bytes, whole episodes: %d bytes; they differ", rows, len(got), len(want))
				}
				if len(wd.segs) != len(cut.Dataset.Episodes) {
					t.Fatalf("whole episodes: %d segments decoded, want %d", len(wd.segs), len(cut.Dataset.Episodes))
				}
				var pieces int
				for _, e := range cut.Dataset.Episodes {
					pieces += pieceCount(int(e.Length), rows)
				}
				if len(cd.segs) != pieces {
					t.Fatalf("pieces: %d segments decoded, want %d (one per piece)", len(cd.segs), pieces)
				}
				// Each segment spans at most the piece, its halo and the
				// one-frame margins.
				before, after := cameraHalo(cut)
				for _, s := range cd.segs {
					if frames := (s.End - s.Start) * 30; frames > float64(rows+before+after+2)+1e-6 {
						t.Fatalf("segment [%g, %g] spans %.1f frames, more than %d rows + halo %d+%d + margins", s.Start, s.End, frames, rows, before, after)
					}
				}
			})
		}
	}
}

// TestCameraPiecesBounded: with pieces, no chunk Run hands on holds more
// than a piece's rows of frames, and every sample is emitted once.
func TestCameraPiecesBounded(t *testing.T) {
	t.Parallel()
	dir := piecesDataset(t)
	cfg, _ := pieceConfig(t, dir, 9, "", nil)
	seen := map[int64]bool{}
	err := Run(context.Background(), cfg, func(c *Chunk) error {
		if n := c.Batch.Len(); n > 9 || n == 0 {
			return fmt.Errorf("chunk of %d samples", n)
		}
		for _, f := range c.Batch.Features {
			if f.Name == "observation.images.front" && len(f.Data) != c.Batch.Len()*3*64*96 {
				return fmt.Errorf("camera column of %d bytes for %d samples", len(f.Data), c.Batch.Len())
			}
		}
		for _, i := range c.Batch.Index {
			if seen[i] {
				return fmt.Errorf("index %d twice", i)
			}
			seen[i] = true
		}
		c.releaseFrames(cfg)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(seen)) != cfg.Dataset.Info.TotalFrames {
		t.Fatalf("%d samples of %d", len(seen), cfg.Dataset.Info.TotalFrames)
	}
}

// dropDecoder drops the decoded frames at the given timestamps of files
// whose path contains match (a video missing frames).
type dropDecoder struct {
	video.Decoder
	match string
	drop  []float64
}

// Close ends the wrapped decoder's kept processes.
func (d dropDecoder) Close() error {
	if c, ok := d.Decoder.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

func (d dropDecoder) Decode(ctx context.Context, seg video.Segment, fn func(video.Frame) error) error {
	return d.Decoder.Decode(ctx, seg, func(f video.Frame) error {
		if strings.Contains(seg.Path, d.match) {
			for _, x := range d.drop {
				if math.Abs(f.PTS-x) < 1e-6 {
					return nil
				}
			}
		}
		return fn(f)
	})
}

// TestCameraWindowFailure: a frame that cannot be produced fails its own
// sample and every sample whose camera window reaches it — also across a
// piece boundary, where the next piece decodes it in its halo — with an
// error naming the frame; nothing gets a blank frame.
func TestCameraWindowFailure(t *testing.T) {
	t.Parallel()
	dir := piecesDataset(t)
	const rows = 7
	const deltas = "observation.images.front=-2/30,0,1/30"
	for _, pieces := range []int{0, rows} {
		t.Run(fmt.Sprintf("rows=%d", pieces), func(t *testing.T) {
			cfg, _ := pieceConfig(t, dir, pieces, deltas, nil)
			// Episode 0 starts file 0 at timestamp 0: drop the frame of
			// the last row of its first piece.
			L0 := int(cfg.Dataset.Episodes[0].Length)
			lo1, _ := pieceRange(L0, pieceCount(L0, rows), 1)
			r := lo1 - 1
			cfg, _ = pieceConfig(t, dir, pieces, deltas, func(d video.Decoder) video.Decoder {
				return dropDecoder{Decoder: d, match: "file-000", drop: []float64{float64(r) / 30}}
			})
			cfg.SkipErrors = true
			raw, st, err := streamBytes(cfg, 8)
			if err != nil {
				t.Fatal(err)
			}
			// Rows r-1 (offset +1), r and r+2 (offset -2) need frame r.
			failed := map[int64]bool{int64(r - 1): true, int64(r): true, int64(r + 2): true}
			if st.Errors != int64(len(failed)) {
				t.Fatalf("%d errors, want %d (rows %v)", st.Errors, len(failed), failed)
			}
			_, bs := decodeAll(t, raw)
			for _, b := range bs {
				for _, i := range batchIndexes(t, b) {
					if failed[i] {
						t.Fatalf("index %d streamed; its window holds the missing frame", i)
					}
				}
			}
			cfg.SkipErrors = false
			_, _, err = streamBytes(cfg, 8)
			if err == nil || !strings.Contains(err.Error(), "--delta-timestamps offset +1") || !strings.Contains(err.Error(), fmt.Sprintf("index %d (timestamp", r)) {
				t.Fatalf("error %v, want the window's missing frame (index %d)", err, r)
			}
		})
	}
}

// TestCameraPiecesGroupReadOnce: the pieces of a group share one read of
// its data files: streaming in pieces reads as many data bytes as
// streaming whole episodes (plan order and the shuffled training order).
func TestCameraPiecesGroupReadOnce(t *testing.T) {
	t.Parallel()
	dir := piecesDataset(t)
	read := func(rows int, train bool) int64 {
		cfg, _ := pieceConfig(t, dir, rows, "", nil)
		var n atomic.Int64
		cfg.Source = countingSource{cfg.Source, &n}
		if train {
			to := TrainOptions{Shuffle: true, Seed: 5, BufferSize: 40, Epochs: 1}
			if _, err := Train(context.Background(), cfg, StreamOptions{BatchSize: 8}, to, sink.Discard()); err != nil {
				t.Fatal(err)
			}
		} else if _, _, err := streamBytes(cfg, 8); err != nil {
			t.Fatal(err)
		}
		return n.Load()
	}
	for _, train := range []bool{false, true} {
		whole, cut := read(0, train), read(12, train)
		if whole == 0 || cut != whole {
			t.Fatalf("train=%t: %d data bytes read in pieces, %d whole", train, cut, whole)
		}
	}
}

// TestCameraLocality counts the segments each of two consumers decodes:
// with --order partitioned a consumer decodes only the episodes of its
// own partitions (the two together decode each episode once, but for the
// one their edge splits); with the
// global shuffled order each decodes the pieces holding its batches'
// frames — here every episode.
func TestCameraLocality(t *testing.T) {
	t.Parallel()
	dir := videoDataset(t, func(o *datagen.Options) {
		o.Episodes, o.MinFrames, o.MaxFrames, o.FramesPerFile = 6, 16, 24, 60
		o.Cameras = []string{"front"}
	})
	for _, order := range []string{OrderPartitioned, OrderGlobal} {
		t.Run(order, func(t *testing.T) {
			var total int
			seen := map[int64]int{}
			for c := 0; c < 2; c++ {
				cfg, cd := pieceConfig(t, dir, 0, "", nil)
				spans, err := shardEpisodeVideos(cfg)
				if err != nil {
					t.Fatal(err)
				}
				to := TrainOptions{Shuffle: true, Seed: 2, BufferSize: 32, Epochs: 1, Order: order, Partitions: 2, Consumer: c, Consumers: 2}
				if _, err := Train(context.Background(), cfg, StreamOptions{BatchSize: 4}, to, sink.Discard()); err != nil {
					t.Fatal(err)
				}
				mine := map[int64]bool{}
				if order == OrderPartitioned {
					parts, _ := partitionEpisodes(cfg, 2, 0, 2, 4)
					for _, e := range parts[c] {
						mine[e] = true
					}
				}
				eps := map[int64]bool{}
				for _, s := range cd.segs {
					e, ok := spans(s)
					if !ok {
						t.Fatalf("consumer %d: segment [%g, %g] of %s is in no episode", c, s.Start, s.End, s.Path)
					}
					if order == OrderPartitioned && !mine[e] {
						t.Fatalf("consumer %d decoded episode %d of another partition", c, e)
					}
					eps[e] = true
				}
				for e := range eps {
					seen[e]++
				}
				total += len(cd.segs)
				t.Logf("%s: consumer %d decoded %d segments of episodes %d", order, c, len(cd.segs), len(eps))
			}
			n := len(seen)
			switch order {
			case OrderPartitioned:
				// Two partitions: the episode at their edge is split,
				// each consumer decoding its part.
				shared := 0
				for e, k := range seen {
					if k > 2 {
						t.Fatalf("episode %d decoded by %d consumers", e, k)
					}
					if k == 2 {
						shared++
					}
				}
				if shared > 1 || total > n+1 {
					t.Fatalf("%d segments for %d episodes, %d decoded by both consumers: one each expected, but for the episode the partitions split", total, n, shared)
				}
			case OrderGlobal:
				if total <= n {
					t.Fatalf("global order: %d segments for %d episodes; every consumer reads most episodes", total, n)
				}
			}
		})
	}
}

// shardEpisodeVideos returns a function giving the episode whose span of
// its camera's file holds a segment.
func shardEpisodeVideos(cfg *Config) (func(video.Segment) (int64, bool), error) {
	spans, err := shard.EpisodeVideos(context.Background(), cfg.Source, cfg.Dataset)
	if err != nil {
		return nil, err
	}
	return func(s video.Segment) (int64, bool) {
		mid := (s.Start + s.End) / 2
		for _, sp := range spans {
			name, err := cfg.Dataset.Info.VideoFile(sp.Key, sp.Chunk, sp.File)
			if err == nil && strings.HasSuffix(s.Path, name) && mid >= sp.From && mid <= sp.To {
				return sp.Episode, true
			}
		}
		return 0, false
	}, nil
}

// TestCameraPiecesRechunked: pieces of unit groups that hold several
// episodes (one row group per data file) or whose episodes span row
// groups (groups of several units), with a selection that keeps part of
// a row group, give the same bytes as whole groups.
func TestCameraPiecesRechunked(t *testing.T) {
	t.Parallel()
	src := piecesDataset(t)
	const deltas = "observation.images.front=-2/30,0,1/30;observation.state=-3/30,0,2/30"
	for _, tc := range []struct {
		rows int64
		sel  []int64
	}{{17, nil}, {1000, []int64{1, 2}}} {
		rows, sel := tc.rows, tc.sel
		dir := t.TempDir()
		rechunk(t, src, dir, rows)
		t.Run(fmt.Sprintf("rowgroups=%d/episodes=%v", rows, sel), func(t *testing.T) {
			var out [2][]byte
			var segs [2]int
			for i, pr := range []int{0, 7} {
				cfg, cd := pieceConfig(t, dir, pr, deltas, nil)
				if sel != nil {
					cfg.Selection = episodeSelection(sel)
				}
				raw, st, err := streamBytes(cfg, 8)
				if err != nil {
					t.Fatal(err)
				}
				if st.Frames == 0 || len(cd.segs) == 0 {
					t.Fatalf("pieces of %d: %d frames, %d segments", pr, st.Frames, len(cd.segs))
				}
				out[i], segs[i] = raw, len(cd.segs)
			}
			if !bytes.Equal(out[0], out[1]) {
				t.Fatal("pieces and whole groups differ")
			}
			if segs[1] <= segs[0] {
				t.Fatalf("%d segments in pieces, %d whole: the pieces were not cut", segs[1], segs[0])
			}
		})
	}
}

// TestCameraPiecesShareProcesses: consecutive pieces of a camera's file
// continue in the ffmpeg process that decoded the previous piece — with
// and without --delta-timestamps camera windows overlapping the pieces —
// instead of one process per piece, and give the bytes of whole episodes.
func TestCameraPiecesShareProcesses(t *testing.T) {
	t.Parallel()
	dir := piecesDataset(t)
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip(err) // TestMain requires it under CI
	}
	const rows = 7
	for _, d := range []string{"", "observation.images.front=-2/30,0,1/30"} {
		t.Run(fmt.Sprintf("%q", d), func(t *testing.T) {
			// An ffmpeg that logs each start.
			bin := t.TempDir()
			log := filepath.Join(bin, "starts")
			script := "#!/bin/sh\necho start >> '" + log + "'\nexec '" + ffmpeg + "' \"$@\"\n"
			if err := os.WriteFile(filepath.Join(bin, "ffmpeg"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg, err := cameraConfig(t, dir, "none")
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Deltas, err = ParseDeltaTimestamps(d); err != nil {
				t.Fatal(err)
			}
			err = SetupCameras(context.Background(), cfg, CameraOptions{Spec: "observation.images.front", NewDecoder: func() (video.Decoder, error) {
				probe, _ := exec.LookPath("ffprobe") // each file's check
				return &video.FFmpeg{Path: filepath.Join(bin, "ffmpeg"), Probe: probe, Threads: 1}, nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			cfg.PieceBytes, cfg.minPieceRows = 1, rows
			got, _, err := streamBytes(cfg, 8)
			if err != nil {
				t.Fatal(err)
			}
			whole, _ := pieceConfig(t, dir, 0, d, nil)
			want, _, err := streamBytes(whole, 8)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("pieces sharing processes: %d bytes, whole episodes: %d bytes; they differ", len(got), len(want))
			}
			files, _, err := cfg.Cameras.Files(nil)
			if err != nil {
				t.Fatal(err)
			}
			var pieces int
			for _, e := range cfg.Dataset.Episodes {
				pieces += pieceCount(int(e.Length), rows)
			}
			b, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			// One process per file, plus one when a worker's piece
			// overtook its predecessor's.
			starts := strings.Count(string(b), "start")
			if starts > 2*len(files) || starts >= pieces {
				t.Fatalf("%d ffmpeg processes for %d pieces of %d files", starts, pieces, len(files))
			}
			t.Logf("%d ffmpeg processes for %d pieces of %d files", starts, pieces, len(files))
		})
	}
}

// noPrestart hides a decoder's Prestart (and keeps its Close).
type noPrestart struct{ video.Decoder }

func (d noPrestart) Close() error {
	if c, ok := d.Decoder.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// TestTrainPrestartSameBytes: the training orders prestart the decoder
// for the pieces the workers take next (pieceIndex.prestart); the bytes
// are those of a run without prestarts, with --delta-timestamps camera
// windows crossing the pieces.
func TestTrainPrestartSameBytes(t *testing.T) {
	t.Parallel()
	dir := videoDataset(t, func(o *datagen.Options) {
		o.Episodes, o.MinFrames, o.MaxFrames, o.FramesPerFile = 6, 30, 45, 100
		o.Cameras = []string{"front"}
	})
	const rows = 8
	const deltas = "observation.images.front=-2/30,0,1/30"
	for name, to := range map[string]TrainOptions{
		"global, 2 epochs": {Shuffle: true, Seed: 5, BufferSize: 40, Epochs: 2},
		"stratified":       {Shuffle: true, Seed: 5, BufferSize: 40, Epochs: 1, Order: OrderStratified, Partitions: 2, PartitionOpen: 2, Consumers: 1},
	} {
		run := func(wrap func(video.Decoder) video.Decoder) ([]byte, *video.FFmpeg) {
			var ff *video.FFmpeg
			cfg, _ := pieceConfig(t, dir, rows, deltas, func(d video.Decoder) video.Decoder {
				ff = d.(*video.FFmpeg)
				if wrap != nil {
					return wrap(d)
				}
				return d
			})
			var buf bytes.Buffer
			if _, err := Train(context.Background(), cfg, StreamOptions{BatchSize: 8}, to, sink.NewMsgpack(&buf)); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes(), ff
		}
		want, plain := run(func(d video.Decoder) video.Decoder { return noPrestart{d} })
		got, ff := run(nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes with prestarts, %d without; they differ", name, len(got), len(want))
		}
		if pre, _ := plain.Prestarts(); pre != 0 {
			t.Fatalf("%d processes prestarted through a decoder that hides Prestart", pre)
		}
		pre, used := ff.Prestarts()
		if used > pre {
			t.Fatalf("%d prestarted processes used, %d prestarted", used, pre)
		}
		t.Logf("%s: %d processes with prestarts (%d prestarted, %d used), %d without", name, ff.ProcessesStarted(), pre, used, plain.ProcessesStarted())
	}
}

// TestPieceTurn: piece k's turn comes once the pieces before it had
// theirs (in any order of finishing), and a cancelled wait returns.
func TestPieceTurn(t *testing.T) {
	var turn pieceTurn
	if err := turn.wait(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 3)
	for _, k := range []int{2, 1} {
		go func() {
			if err := turn.wait(context.Background(), k); err == nil {
				got <- k
			}
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() { cancelled <- turn.wait(ctx, 5) }()
	turn.finish(0)
	if k := <-got; k != 1 {
		t.Fatalf("piece %d's turn came first, want 1", k)
	}
	turn.finish(1)
	if k := <-got; k != 2 {
		t.Fatalf("piece %d's turn came, want 2", k)
	}
	turn.finish(0) // finishing again changes nothing
	cancel()
	if err := <-cancelled; err == nil {
		t.Fatal("a cancelled wait returned no error")
	}
}
