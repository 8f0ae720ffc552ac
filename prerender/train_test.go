package prerender

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/sink"
)

// trainReplay replays dir as a training iteration and returns its batch
// messages and end.
func trainReplay(t *testing.T, dir string, sh pipeline.Share, to TrainOptions) ([]*sink.Message, *sink.End) {
	t.Helper()
	var b bytes.Buffer
	if err := ReplayWith(context.Background(), dir, sh, &b, ReplayOptions{Train: &to}); err != nil {
		t.Fatal(err)
	}
	d := sink.NewDecoder(&b)
	var out []*sink.Message
	for {
		m, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch m.Type {
		case sink.TypeBatch:
			out = append(out, m)
		case sink.TypeEnd:
			return out, m.End
		}
	}
}

// batchKey identifies a batch by its frame indices.
func batchKey(m *sink.Message) string {
	return fmt.Sprintf("%x", m.Batch.Column("index").(*sink.Array).Data)
}

func TestReplayTrain(t *testing.T) {
	cfg := demoConfig(t)
	dir := t.TempDir()
	if _, err := Run(context.Background(), cfg, demoOptions(8), Options{Dir: dir, ShardSize: 10_000}); err != nil {
		t.Fatal(err)
	}
	x := mustIndex(t, dir)
	total := x.Totals.Batches
	stored, _ := trainReplay(t, dir, pipeline.Share{}, TrainOptions{Epochs: 1})
	if int64(len(stored)) != total {
		t.Fatalf("one epoch: %d batches, want %d", len(stored), total)
	}
	var storedKeys []string
	for _, m := range stored {
		storedKeys = append(storedKeys, batchKey(m))
	}
	sortedKeys := slices.Sorted(slices.Values(storedKeys))

	t.Run("epochs", func(t *testing.T) {
		got, end := trainReplay(t, dir, pipeline.Share{}, TrainOptions{Epochs: 3})
		if int64(len(got)) != 3*total || end.Batches != 3*total {
			t.Fatalf("3 epochs: %d batches (end %d), want %d", len(got), end.Batches, 3*total)
		}
		if end.Frames != 3*x.Totals.Frames {
			t.Fatalf("end frames %d, want 3 × %d", end.Frames, x.Totals.Frames)
		}
		for i, m := range got {
			if m.Batch.Meta.Seq != int64(i) || m.Batch.Meta.Epoch != int64(i)/total || batchKey(m) != storedKeys[int64(i)%total] {
				t.Fatalf("batch %d: seq %d epoch %d, not the stored order", i, m.Batch.Meta.Seq, m.Batch.Meta.Epoch)
			}
		}
	})
	shuffled := TrainOptions{Epochs: 2, Shuffle: true, Seed: 7, BufferBatches: 4}
	t.Run("shuffle", func(t *testing.T) {
		a, _ := trainReplay(t, dir, pipeline.Share{}, shuffled)
		b, _ := trainReplay(t, dir, pipeline.Share{}, shuffled)
		var epochs [2][]string
		for i, m := range a {
			if !bytes.Equal(m.Raw, b[i].Raw) {
				t.Fatalf("batch %d differs between two runs with one seed", i)
			}
			epochs[m.Batch.Meta.Epoch] = append(epochs[m.Batch.Meta.Epoch], batchKey(m))
		}
		for e, keys := range epochs {
			if !slices.Equal(slices.Sorted(slices.Values(keys)), sortedKeys) {
				t.Fatalf("epoch %d is not a permutation of the stored batches", e)
			}
		}
		if slices.Equal(epochs[0], storedKeys) || slices.Equal(epochs[0], epochs[1]) {
			t.Fatal("epoch order not shuffled, or the same in both epochs")
		}
		o := shuffled
		o.Seed = 8
		c, _ := trainReplay(t, dir, pipeline.Share{}, o)
		if bytes.Equal(c[0].Raw, a[0].Raw) && bytes.Equal(c[1].Raw, a[1].Raw) && bytes.Equal(c[2].Raw, a[2].Raw) {
			t.Fatal("seed does not change the order")
		}
	})
	t.Run("consumers cover each epoch once", func(t *testing.T) {
		seen := map[string]int{}
		for w := 0; w < 3; w++ {
			got, _ := trainReplay(t, dir, pipeline.Share{Worker: w, NumWorkers: 3}, shuffled)
			for _, m := range got {
				seen[fmt.Sprint(m.Batch.Meta.Epoch, batchKey(m))]++
			}
		}
		if int64(len(seen)) != 2*total {
			t.Fatalf("3 consumers got %d distinct (epoch, batch), want %d", len(seen), 2*total)
		}
		for k, n := range seen {
			if n != 1 {
				t.Fatalf("%s served %d times", k, n)
			}
		}
	})
	t.Run("resume", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			share pipeline.Share
			opts  TrainOptions
		}{
			{"plain", pipeline.Share{}, TrainOptions{Epochs: 2}},
			{"shuffled consumer 1 of 2", pipeline.Share{Worker: 1, NumWorkers: 2}, shuffled},
			{"contiguous worker 0 of 2", pipeline.Share{Worker: 0, NumWorkers: 2}, TrainOptions{Epochs: 3}},
		} {
			full, _ := trainReplay(t, dir, tc.share, tc.opts)
			for _, cut := range []int{0, 1, len(full) / 2, len(full)/2 + 1, len(full) - 2} {
				o := tc.opts
				o.Resume = full[cut].Batch.Meta.Resume
				rest, _ := trainReplay(t, dir, tc.share, o)
				if len(rest) != len(full)-cut-1 {
					t.Fatalf("%s: resumed after batch %d: %d batches, want %d", tc.name, cut, len(rest), len(full)-cut-1)
				}
				for i, m := range rest {
					if !bytes.Equal(m.Raw, full[cut+1+i].Raw) {
						t.Fatalf("%s: resumed after batch %d: batch %d differs from the uninterrupted stream", tc.name, cut, i)
					}
				}
			}
		}
	})
	t.Run("resume refused", func(t *testing.T) {
		full, _ := trainReplay(t, dir, pipeline.Share{}, shuffled)
		tok := full[3].Batch.Meta.Resume
		for _, tc := range []struct {
			name  string
			share pipeline.Share
			opts  TrainOptions
			want  string
		}{
			{"other seed", pipeline.Share{}, TrainOptions{Epochs: 2, Shuffle: true, Seed: 8, BufferBatches: 4, Resume: tok}, "another replay"},
			{"other share", pipeline.Share{Worker: 0, NumWorkers: 2}, TrainOptions{Epochs: 2, Shuffle: true, Seed: 7, BufferBatches: 4, Resume: tok}, "another replay"},
			{"live token", pipeline.Share{}, TrainOptions{Epochs: 2, Resume: "abc"}, "not a replay resume token"},
			{"damaged", pipeline.Share{}, TrainOptions{Epochs: 2, Resume: replayTokenPrefix + "!!"}, "damaged"},
		} {
			var b bytes.Buffer
			err := ReplayWith(context.Background(), dir, tc.share, &b, ReplayOptions{Train: &tc.opts})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: %v, want %q", tc.name, err, tc.want)
			}
			st, derr := sink.Decode(&b)
			var se *sink.StreamError
			if !errors.As(derr, &se) || st.Header != nil {
				t.Fatalf("%s: not a lone in-band error: %v", tc.name, derr)
			}
		}
	})
}
