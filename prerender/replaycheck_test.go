package prerender

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/sink"
)

// TestReplayRefusesWhatVerifyRefuses: index tamperings verify refuses
// (issue 25 item 12's ten, and a few more), replay refuses too: those of
// the index alone before the stream starts (a lone error message), those
// only the shard content shows before the shard's batch that shows them
// (or at the shard's end), never completing the stream.
func TestReplayRefusesWhatVerifyRefuses(t *testing.T) {
	cfg := demoConfig(t)
	ref := t.TempDir()
	if _, err := Run(context.Background(), cfg, demoOptions(8), Options{Dir: ref, ShardSize: 10_000}); err != nil {
		t.Fatal(err)
	}
	files := dirFiles(t, ref)
	x := mustIndex(t, ref)
	if len(x.Shards) < 3 || x.Shards[1].Batches < 2 {
		t.Fatalf("want at least 3 shards of several batches, got %d", len(x.Shards))
	}
	header := func(t *testing.T, f func(h *sink.Header)) []byte {
		m, err := decodeOne(x.Ranks[0].Header)
		if err != nil || m.Header == nil {
			t.Fatalf("header: %v", err)
		}
		h := *m.Header
		f(&h)
		b, err := sink.AppendHeader(nil, h)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	end := func(f func(e *sink.End)) []byte {
		m, err := decodeOne(x.Ranks[0].End)
		if err != nil || m.End == nil {
			t.Fatalf("end: %v", err)
		}
		e := *m.End
		f(&e)
		return sink.AppendEnd(nil, e)
	}
	tests := []struct {
		name   string
		edit   func(t *testing.T, y *Index)
		want   string
		inBand bool // refused only once shard content shows it (a header may precede)
	}{
		{"wire_format", func(t *testing.T, y *Index) { y.WireFormat = "lrstream-msgpack/v0" }, "header has format", false},
		{"batch_size", func(t *testing.T, y *Index) { y.BatchSize = 99 }, "header has batch_size", false},
		{"header swapped to batch size 99", func(t *testing.T, y *Index) {
			y.BatchSize = 99
			y.Ranks[0].Header = header(t, func(h *sink.Header) { h.BatchSize = 99 })
		}, "fewer than 99 samples but is not the last", true},
		{"header replaced by an end message", func(t *testing.T, y *Index) { y.Ranks[0].Header = y.Ranks[0].End }, "header message is a", false},
		{"shard samples", func(t *testing.T, y *Index) { y.Shards[1].Samples++ }, "rank 0 counts", false},
		{"shard, rank and total samples", func(t *testing.T, y *Index) {
			y.Shards[1].Samples++
			y.Ranks[0].Samples++
			y.Totals.Samples++
		}, "end message counts", false},
		{"shard, rank, total and end samples", func(t *testing.T, y *Index) {
			y.Shards[1].Samples++
			y.Ranks[0].Samples++
			y.Totals.Samples++
			y.Ranks[0].End = end(func(e *sink.End) { e.Samples++ })
		}, "samples; the index says", true},
		{"raw_bytes", func(t *testing.T, y *Index) { y.Shards[1].RawBytes++ }, "do not add up", false},
		{"raw_bytes and totals, larger", func(t *testing.T, y *Index) { y.Shards[1].RawBytes++; y.Totals.RawBytes++ }, "bytes decompressed, the index says", true},
		{"raw_bytes and totals, smaller", func(t *testing.T, y *Index) { y.Shards[1].RawBytes--; y.Totals.RawBytes-- }, "the index says", true},
		{"first_episode", func(t *testing.T, y *Index) { y.Shards[1].FirstEpisode-- }, "episodes", true},
		{"last_episode", func(t *testing.T, y *Index) { y.Shards[1].LastEpisode++ }, "episodes", true},
		{"end batches", func(t *testing.T, y *Index) { y.Ranks[0].End = end(func(e *sink.End) { e.Batches++ }) }, "end message counts", false},
		{"totals", func(t *testing.T, y *Index) { y.Totals.Frames++ }, "do not add up", false},
		{"rank batches", func(t *testing.T, y *Index) { y.Ranks[0].Batches++ }, "rank 0 counts", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, b := range files {
				os.WriteFile(filepath.Join(dir, n), b, 0o644)
			}
			y := mustIndex(t, dir)
			tc.edit(t, y)
			data, err := y.encode()
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, IndexFile), data, 0o644)
			rep, verr := Verify(context.Background(), dir)
			if verr == nil {
				t.Fatalf("verify accepts the tampering")
			}
			if !strings.Contains(strings.Join(rep.Problems, "\n"), tc.want) {
				t.Errorf("verify problems:\n%s\nwant one containing %q", strings.Join(rep.Problems, "\n"), tc.want)
			}
			for _, run := range []struct {
				name string
				f    func(w *bytes.Buffer) error
			}{
				{"replay", func(w *bytes.Buffer) error { return Replay(context.Background(), dir, pipeline.Share{}, w) }},
				{"training replay", func(w *bytes.Buffer) error {
					return ReplayWith(context.Background(), dir, pipeline.Share{}, w, ReplayOptions{Train: &TrainOptions{Epochs: 1}})
				}},
			} {
				var b bytes.Buffer
				err := run.f(&b)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s: %v, want an error containing %q", run.name, err, tc.want)
				}
				st, derr := sink.Decode(&b)
				var se *sink.StreamError
				if !errors.As(derr, &se) || st.End != nil {
					t.Fatalf("%s: the stream does not end with the error (%v)", run.name, derr)
				}
				if !tc.inBand && (st.Header != nil || len(st.Batches) > 0) {
					t.Fatalf("%s: a header and %d batches before refusing an index verify refuses", run.name, len(st.Batches))
				}
			}
		})
	}
}
