package main

import (
	"errors"
	"io"
	"testing"

	"github.com/lrstream/lrstream/sink"
)

// servedFrames reads a stream and returns each batch's frame indices by
// epoch and the batches' seq numbers.
func servedFrames(t *testing.T, r io.Reader) (map[int64][]int64, []int64) {
	t.Helper()
	d := sink.NewDecoder(r)
	out := map[int64][]int64{}
	var seqs []int64
	for {
		m, err := d.Next()
		if errors.Is(err, io.EOF) {
			return out, seqs
		}
		if err != nil {
			t.Fatal(err)
		}
		switch m.Type {
		case sink.TypeBatch:
			a := m.Batch.Column("index").(*sink.Array)
			for i := 0; i < m.Batch.Size; i++ {
				var v int64
				for k := 0; k < 8; k++ {
					v |= int64(a.Data[8*i+k]) << (8 * k)
				}
				out[m.Batch.Meta.Epoch] = append(out[m.Batch.Meta.Epoch], v)
			}
			seqs = append(seqs, m.Batch.Meta.Seq)
		case sink.TypeError:
			t.Fatalf("stream error: %s", m.Error)
		}
	}
}

// TestServePartitionedNode: one server per node under --order
// partitioned; its clients (2 ranks × 3 workers) get disjoint consumers
// whose frames cover what one consumer serves (but for the last global
// batches that cannot go to each of them alike), per epoch; a hello
// position resumes a worker exactly.
func TestServePartitionedNode(t *testing.T) {
	args := []string{"--order", "partitioned", "--partitions", "6", "--shuffle", "--seed", "2", "--epochs", "2", "--batch-size", "8", "--shuffle-buffer", "60"}
	_, sock, _ := startServer(t, args...)
	fetch := func(h sink.Hello) (map[int64][]int64, []int64) {
		c := dialHello(t, sock, h)
		defer c.Close()
		return servedFrames(t, c)
	}
	one, _ := fetch(sink.Hello{WorldSize: 1, NumWorkers: 1})
	if len(one[0]) == 0 || len(one[1]) == 0 {
		t.Fatalf("one consumer served %d and %d frames", len(one[0]), len(one[1]))
	}
	seen := map[int64]map[int64]int{0: {}, 1: {}}
	for r := 0; r < 2; r++ {
		for w := 0; w < 3; w++ {
			got, _ := fetch(sink.Hello{Rank: r, WorldSize: 2, Worker: w, NumWorkers: 3})
			for e, ix := range got {
				// One consumer serves nb batches of 8, each of six
				// floor(nb / 6).
				if want := len(one[e]) / 8 / 6 * 8; len(ix) != want {
					t.Fatalf("rank %d worker %d epoch %d: %d frames, want %d (a sixth)", r, w, e, len(ix), want)
				}
				for _, i := range ix {
					seen[e][i]++
				}
			}
		}
	}
	for e := int64(0); e < 2; e++ {
		// The same global sequence less its last nb mod 6 batches: fewer
		// than 6 × 8 frames.
		if n := len(seen[e]); n > len(one[e]) || n <= len(one[e])-6*8 {
			t.Fatalf("epoch %d: the clients served %d distinct frames, one consumer %d", e, len(seen[e]), len(one[e]))
		}
		in := map[int64]bool{}
		for _, i := range one[e] {
			in[i] = true
		}
		for i, n := range seen[e] {
			if n != 1 || !in[i] {
				t.Fatalf("epoch %d: frame %d served %d times (by one consumer: %v)", e, i, n, in[i])
			}
		}
	}
	// A hello position (the Python client's exact checkpoints): rank 1's
	// worker 2 resuming at rank index 4 serves indices 6, 9, ...
	pos := sink.Hello{Rank: 1, WorldSize: 2, Worker: 2, NumWorkers: 3, Position: &sink.Position{Epoch: 1, Next: 4 + 2}}
	_, seqs := fetch(pos)
	if len(seqs) == 0 || seqs[0] != 6 || (len(seqs) > 1 && seqs[1] != 9) {
		t.Fatalf("position: seqs %v, want 6, 9, ...", seqs)
	}
}

// TestTrainMemoryLimit: a language-only training stream sets the soft
// memory limit (its estimate, pipeline.TrainBytes, plus 224 MiB, at least
// 448 MiB: 448 MiB for the small demo) unless GOMEMLIMIT is set; a plain
// pass sets none.
func TestTrainMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		env      string
		min, max int64 // 0, 0: no limit set
	}{
		// --cameras none: the limit without camera frames (the demo has cameras).
		{"shuffled", []string{"stream", "--shuffle", "-q", "--cameras", "none"}, "", trainMemoryLimit, trainMemoryLimit},
		{"partitioned", []string{"stream", "--shuffle", "--order", "partitioned", "--partitions", "4", "--batch-size", "8", "-q", "--cameras", "none"}, "", trainMemoryLimit, trainMemoryLimit},
		{"GOMEMLIMIT set", []string{"stream", "--shuffle", "-q", "--cameras", "none"}, "1GiB", 0, 0},
		{"plain pass", []string{"stream", "-q", "--cameras", "none"}, "", 0, 0},
	} {
		e, _, errb := genEnv()
		e.getenv = func(k string) string {
			if k == "GOMEMLIMIT" {
				return tc.env
			}
			return ""
		}
		var got int64
		e.memoryLimit = func(n int64) int64 { got = n; return 0 }
		if code := run(t.Context(), e, tc.args); code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.name, code, errb)
		}
		if got < tc.min || got > tc.max {
			t.Fatalf("%s: memory limit %d, want %d..%d", tc.name, got, tc.min, tc.max)
		}
	}
}
