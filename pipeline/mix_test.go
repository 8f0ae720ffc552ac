package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

func datasetConfig(t *testing.T, dir string, rec *render.Recipe) *Config {
	t.Helper()
	src, err := fetch.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return &Config{Source: src, Dataset: ds, Recipe: rec, Mode: render.ModeFallback, SkipErrors: true, Workers: 2}
}

func TestMixDatasets(t *testing.T) {
	rec, _ := render.LoadFile(filepath.Join(sharedDir(t), "recipes", "subtask.yaml"))
	a := datasetConfig(t, filepath.Join(conformanceDatasets(t), "pub_inferred_front_wrist"), rec)
	b := datasetConfig(t, filepath.Join(conformanceDatasets(t), "pub_jsonext_front_wrist"), rec)
	mix := []Mix{{Config: a, Weight: 0.7, Name: "a"}, {Config: b, Weight: 0.3, Name: "b"}}
	for _, shuffle := range []bool{false, true} {
		var buf bytes.Buffer
		to := TrainOptions{Shuffle: shuffle, Seed: 5, Epochs: 1}
		if _, err := TrainMix(context.Background(), mix, StreamOptions{BatchSize: 20}, to, sink.NewMsgpack(&buf)); err != nil {
			t.Fatal(err)
		}
		first := append([]byte(nil), buf.Bytes()...)
		st, err := sink.Decode(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(st.Header.Dataset, ",") || len(st.Header.Strings) != 1 || st.Header.Strings[0] != "dataset" {
			t.Fatalf("header %q strings %v", st.Header.Dataset, st.Header.Strings)
		}
		// Local datasets have no revision: nor has their mixture (issue 24
		// item 17: it was ",").
		if st.Header.Revision != "" {
			t.Fatalf("header revision %q for a mixture of local datasets", st.Header.Revision)
		}
		count := map[string]int{}
		seen := map[string]bool{}
		total := 0
		for _, bt := range st.Batches {
			names := bt.Column("dataset").([]any)
			idx := batchIndexes(t, bt)
			for i, n := range names {
				key := fmt.Sprint(n, ":", idx[i])
				if seen[key] {
					t.Fatalf("sample %s twice", key)
				}
				seen[key] = true
				count[n.(string)]++
				total++
			}
		}
		// Interleaving stops when the first dataset runs out: a (1121
		// kept frames at weight 0.7) runs out first, after ~1121/0.7
		// samples (when b has given ~480 of its 569).
		fa := float64(count["a"]) / float64(total)
		if fa < 0.66 || fa > 0.74 || count["a"] < 1100 || count["b"] > 569 {
			t.Fatalf("shuffle %v: mix %v of %d", shuffle, count, total)
		}
		var again bytes.Buffer
		TrainMix(context.Background(), mix, StreamOptions{BatchSize: 20}, to, sink.NewMsgpack(&again))
		if !bytes.Equal(first, again.Bytes()) {
			t.Fatal("mixing is not deterministic")
		}
	}
	// Incompatible features are refused with both datasets named.
	c := datasetConfig(t, filepath.Join(sharedDir(t), "datasets", "real", "yipiandanxinxiangyangkai__open_50"), rec)
	_, err := TrainMix(context.Background(), []Mix{{Config: a, Weight: 1, Name: "a"}, {Config: c, Weight: 1, Name: "c"}}, StreamOptions{BatchSize: 8}, TrainOptions{Epochs: 1}, sink.Discard())
	if err == nil || !strings.Contains(err.Error(), "cannot be mixed") || !strings.Contains(err.Error(), "open_50") {
		t.Fatalf("incompatible mix: %v", err)
	}
	// The partitioned order streams one dataset: a mixture is refused,
	// saying what to use instead.
	_, err = TrainMix(context.Background(), mix, StreamOptions{BatchSize: 8}, TrainOptions{Epochs: 1, Shuffle: true, Order: OrderPartitioned, Partitions: 2}, sink.Discard())
	if err == nil || !strings.Contains(err.Error(), "--order global") || !strings.Contains(err.Error(), "Mixtures and the partitioned order") {
		t.Fatalf("a mixture under --order partitioned: %v", err)
	}
}

func TestMixRevision(t *testing.T) {
	for _, tc := range []struct {
		revs []string
		want string
	}{
		{[]string{"", ""}, ""},
		{[]string{"", "", ""}, ""},
		{[]string{"abc", ""}, "abc,"},
		{[]string{"", "def"}, ",def"},
		{[]string{"abc", "def"}, "abc,def"},
	} {
		if got := mixRevision(tc.revs); got != tc.want {
			t.Errorf("mixRevision(%q) = %q, want %q", tc.revs, got, tc.want)
		}
	}
}
