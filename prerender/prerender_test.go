package prerender

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

// demoConfig opens the embedded demo dataset with its recipe.
func demoConfig(t testing.TB) *pipeline.Config {
	t.Helper()
	src := fetch.NewFS(lrstream.DemoName, lrstream.Demo())
	rec, err := render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return &pipeline.Config{Source: src, Dataset: ds, Recipe: rec, Workers: 2}
}

func demoOptions(batch int) pipeline.StreamOptions {
	return pipeline.StreamOptions{BatchSize: batch, Version: "test", Options: json.RawMessage(`{"batch_size":` + itoa(batch) + `}`)}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// live returns what `lrstream stream` writes for cfg and so.
func live(t *testing.T, cfg *pipeline.Config, so pipeline.StreamOptions) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := pipeline.Stream(context.Background(), cfg, so, sink.NewMsgpack(&b)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func replay(t *testing.T, dir string, sh pipeline.Share) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Replay(context.Background(), dir, sh, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// dirFiles reads every file of dir except lock files.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func sameFiles(t *testing.T, got, want map[string][]byte) {
	t.Helper()
	for n, b := range want {
		g, ok := got[n]
		if !ok {
			t.Errorf("missing %s", n)
		} else if !bytes.Equal(g, b) {
			t.Errorf("%s differs (%d bytes vs %d)", n, len(g), len(b))
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("extra file %s", n)
		}
	}
}

func indexes(t *testing.T, st *sink.Stream) []int64 {
	t.Helper()
	var out []int64
	for _, b := range st.Batches {
		a := b.Column("index").(*sink.Array)
		for i := 0; i+8 <= len(a.Data); i += 8 {
			out = append(out, int64(binary.LittleEndian.Uint64(a.Data[i:])))
		}
	}
	return out
}

func TestReplayEqualsLive(t *testing.T) {
	cfg := demoConfig(t)
	for _, tc := range []struct {
		batch int
		size  int64
	}{{32, 20_000}, {7, 1}, {64, 1 << 30}, {1000, 50_000}} {
		so := demoOptions(tc.batch)
		want := live(t, cfg, so)
		dir := t.TempDir()
		res, err := Run(context.Background(), cfg, so, Options{Dir: dir, ShardSize: tc.size})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Index.Complete || res.NewShards != len(res.Index.Shards) {
			t.Fatalf("result %+v", res)
		}
		if tc.size == 1 && int64(len(res.Index.Shards)) != res.Index.Totals.Batches {
			t.Fatalf("shard size 1: %d shards for %d batches", len(res.Index.Shards), res.Index.Totals.Batches)
		}
		if got := replay(t, dir, pipeline.Share{}); !bytes.Equal(got, want) {
			t.Fatalf("batch %d shard size %d: replay (%d bytes) differs from the live stream (%d bytes)", tc.batch, tc.size, len(got), len(want))
		}
		if got := replay(t, dir, pipeline.Share{Worker: 0, NumWorkers: 1}); !bytes.Equal(got, want) {
			t.Fatal("worker 0 of 1 differs from the live stream")
		}
		if _, err := Verify(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReplayShares(t *testing.T) {
	cfg := demoConfig(t)
	so := demoOptions(16)
	dir := t.TempDir()
	if _, err := Run(context.Background(), cfg, so, Options{Dir: dir, ShardSize: 30_000}); err != nil {
		t.Fatal(err)
	}
	whole, err := sink.Decode(bytes.NewReader(replay(t, dir, pipeline.Share{})))
	if err != nil {
		t.Fatal(err)
	}
	all := indexes(t, whole)
	for _, n := range []int{2, 3, 5, len(whole.Batches), len(whole.Batches) + 4} {
		var got []int64
		var e sink.End
		sizes := []int{}
		for w := 0; w < n; w++ {
			st, err := sink.Decode(bytes.NewReader(replay(t, dir, pipeline.Share{Worker: w, NumWorkers: n})))
			if err != nil {
				t.Fatalf("n=%d w=%d: %v", n, w, err)
			}
			if st.Header.Share.Worker != w || st.Header.Share.NumWorkers != n {
				t.Fatalf("header share %+v", st.Header.Share)
			}
			for i, b := range st.Batches {
				if b.Meta.Seq != int64(i) {
					t.Fatalf("n=%d w=%d: batch %d has seq %d", n, w, i, b.Meta.Seq)
				}
			}
			sizes = append(sizes, len(st.Batches))
			got = append(got, indexes(t, st)...)
			if st.End.Batches != int64(len(st.Batches)) {
				t.Fatalf("end batches %d, stream %d", st.End.Batches, len(st.Batches))
			}
			e.Batches += st.End.Batches
			e.Samples += st.End.Samples
			e.Frames += st.End.Frames
			e.Rendered += st.End.Rendered
			e.Dropped += st.End.Dropped
		}
		if !slices.Equal(got, all) {
			t.Fatalf("n=%d: the shares hold %d samples, not the %d of the whole, in order", n, len(got), len(all))
		}
		if e.Batches != whole.End.Batches || e.Samples != whole.End.Samples || e.Frames != whole.End.Frames ||
			e.Rendered != whole.End.Rendered || e.Dropped != whole.End.Dropped {
			t.Fatalf("n=%d: summed ends %+v, whole %+v", n, e, *whole.End)
		}
		if mn, mx := slices.Min(sizes), slices.Max(sizes); mx-mn > 1 {
			t.Fatalf("n=%d: unbalanced shares %v", n, sizes)
		}
	}
	var b bytes.Buffer
	if err := Replay(context.Background(), dir, pipeline.Share{Worker: 3, NumWorkers: 2}, &b); err == nil {
		t.Fatal("worker 3 of 2 accepted")
	}
	if _, err := sink.Decode(&b); err == nil || !strings.Contains(err.Error(), "invalid share") {
		t.Fatalf("want an in-band error, got %v", err)
	}
}

func TestResumeAfterInterrupt(t *testing.T) {
	cfg := demoConfig(t)
	so := demoOptions(8)
	ref := t.TempDir()
	if _, err := Run(context.Background(), cfg, so, Options{Dir: ref, ShardSize: 10_000}); err != nil {
		t.Fatal(err)
	}
	want := dirFiles(t, ref)
	nshards := len(mustIndex(t, ref).Shards)
	for _, stopAfter := range []int{0, 1, 3, nshards - 1, nshards} {
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		opts := Options{Dir: dir, ShardSize: 10_000, OnShard: func(Shard) {
			if n++; n >= stopAfter {
				cancel()
			}
		}}
		if stopAfter == 0 {
			cancel()
		}
		_, err := Run(ctx, cfg, so, opts)
		interrupted := err != nil
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("stop after %d: %v", stopAfter, err)
		}
		cancel()
		// Leftovers of a crash: a temporary shard and index.
		os.WriteFile(filepath.Join(dir, "shard-000999.msgpack.zst.tmp"), []byte("junk"), 0o644)
		os.WriteFile(filepath.Join(dir, "index.json.tmp"), []byte("{"), 0o644)
		res, err := Run(context.Background(), cfg, so, Options{Dir: dir, ShardSize: 10_000})
		if err != nil {
			t.Fatal(err)
		}
		if interrupted && res.KeptShards < stopAfter {
			t.Fatalf("stop after %d: kept %d shards", stopAfter, res.KeptShards)
		}
		sameFiles(t, dirFiles(t, dir), want)
	}
}

// TestResumeAfterCrashWindows recreates what a crash leaves between a
// shard's rename and the index update, and a damaged committed shard.
func TestResumeAfterCrashWindows(t *testing.T) {
	cfg := demoConfig(t)
	so := demoOptions(8)
	ref := t.TempDir()
	if _, err := Run(context.Background(), cfg, so, Options{Dir: ref, ShardSize: 10_000}); err != nil {
		t.Fatal(err)
	}
	want := dirFiles(t, ref)
	x := mustIndex(t, ref)
	for name, mutate := range map[string]func(dir string, x *Index){
		"renamed, not indexed": func(dir string, x *Index) {
			x.Shards = x.Shards[:3] // shards 3.. exist but are not in the index
		},
		"damaged shard": func(dir string, x *Index) {
			x.Shards = x.Shards[:5]
			os.WriteFile(filepath.Join(dir, x.Shards[2].File), []byte("garbage"), 0o644)
		},
		"missing shard": func(dir string, x *Index) {
			x.Shards = x.Shards[:5]
			os.Remove(filepath.Join(dir, x.Shards[4].File))
		},
	} {
		dir := t.TempDir()
		for n, b := range want {
			os.WriteFile(filepath.Join(dir, n), b, 0o644)
		}
		y := *x
		y.Complete, y.Ranks = false, slices.Clone(x.Ranks)
		y.Ranks[0].Complete, y.Ranks[0].End, y.Ranks[0].EndCounts = false, nil, nil
		mutate(dir, &y)
		y.recount()
		data, _ := y.encode()
		os.WriteFile(filepath.Join(dir, IndexFile), data, 0o644)
		if _, err := Run(context.Background(), cfg, so, Options{Dir: dir, ShardSize: 10_000}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Run(name, func(t *testing.T) { sameFiles(t, dirFiles(t, dir), want) })
	}
}

func mustIndex(t *testing.T, dir string) *Index {
	t.Helper()
	x, err := ReadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestMismatchRefusedAndOverwrite(t *testing.T) {
	cfg := demoConfig(t)
	dir := t.TempDir()
	if _, err := Run(context.Background(), cfg, demoOptions(8), Options{Dir: dir, ShardSize: 10_000}); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), cfg, demoOptions(8), Options{Dir: dir, ShardSize: 10_000})
	if err != nil || !res.AlreadyComplete {
		t.Fatalf("rerun of a complete run: %v %+v", err, res)
	}
	c2 := *cfg
	c2.Mode = render.Mode(1)
	for name, run := range map[string]func() error{
		"option batch_size": func() error {
			_, err := Run(context.Background(), cfg, demoOptions(16), Options{Dir: dir, ShardSize: 10_000})
			return err
		},
		"shard size": func() error {
			_, err := Run(context.Background(), cfg, demoOptions(8), Options{Dir: dir, ShardSize: 20_000})
			return err
		},
		"lrstream version": func() error {
			so := demoOptions(8)
			so.Version = "other"
			_, err := Run(context.Background(), cfg, so, Options{Dir: dir, ShardSize: 10_000})
			return err
		},
		"world size": func() error {
			_, err := Run(context.Background(), cfg, demoOptions(8), Options{Dir: dir, ShardSize: 10_000, Rank: 1, WorldSize: 2})
			return err
		},
		"mode": func() error {
			_, err := Run(context.Background(), &c2, demoOptions(8), Options{Dir: dir, ShardSize: 10_000})
			return err
		},
	} {
		err := run()
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "--overwrite") {
			t.Errorf("%s: want a refusal naming it, got %v", name, err)
		}
	}
	res, err = Run(context.Background(), cfg, demoOptions(16), Options{Dir: dir, ShardSize: 20_000, Overwrite: true})
	if err != nil || res.AlreadyComplete || res.KeptShards != 0 {
		t.Fatalf("overwrite: %v %+v", err, res)
	}
	if x := mustIndex(t, dir); x.BatchSize != 16 || x.ShardSize != 20_000 {
		t.Fatalf("overwritten index %+v", x)
	}
	if got, want := replay(t, dir, pipeline.Share{}), live(t, cfg, demoOptions(16)); !bytes.Equal(got, want) {
		t.Fatal("replay after --overwrite differs from the live stream")
	}
	ref := t.TempDir()
	if _, err := Run(context.Background(), cfg, demoOptions(16), Options{Dir: ref, ShardSize: 20_000}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, dirFiles(t, dir), dirFiles(t, ref))
}

func TestVerifyDetects(t *testing.T) {
	cfg := demoConfig(t)
	ref := t.TempDir()
	if _, err := Run(context.Background(), cfg, demoOptions(8), Options{Dir: ref, ShardSize: 10_000}); err != nil {
		t.Fatal(err)
	}
	files := dirFiles(t, ref)
	x := mustIndex(t, ref)
	s2 := x.Shards[2].File
	cases := map[string]struct {
		mutate func(dir string)
		want   string
	}{
		"flipped byte": {func(dir string) {
			b := slices.Clone(files[s2])
			b[len(b)/2] ^= 0x40
			os.WriteFile(filepath.Join(dir, s2), b, 0o644)
		}, s2},
		"truncated": {func(dir string) {
			os.WriteFile(filepath.Join(dir, s2), files[s2][:len(files[s2])-10], 0o644)
		}, s2},
		"missing": {func(dir string) { os.Remove(filepath.Join(dir, s2)) }, s2},
		"swapped shards": {func(dir string) {
			s3 := x.Shards[3].File
			os.WriteFile(filepath.Join(dir, s2), files[s3], 0o644)
			os.WriteFile(filepath.Join(dir, s3), files[s2], 0o644)
		}, s2},
		"index sample count": {func(dir string) {
			y := mustIndex(t, dir)
			y.Shards[2].Samples++
			data, _ := y.encode()
			os.WriteFile(filepath.Join(dir, IndexFile), data, 0o644)
		}, s2},
		"index sha": {func(dir string) {
			y := mustIndex(t, dir)
			y.Shards[2].SHA256 = strings.Repeat("0", 64)
			data, _ := y.encode()
			os.WriteFile(filepath.Join(dir, IndexFile), data, 0o644)
		}, s2},
		"index seq gap": {func(dir string) {
			y := mustIndex(t, dir)
			y.Shards[2].FirstSeq++
			data, _ := y.encode()
			os.WriteFile(filepath.Join(dir, IndexFile), data, 0o644)
		}, s2},
		"incomplete": {func(dir string) {
			y := mustIndex(t, dir)
			y.Complete = false
			data, _ := y.encode()
			os.WriteFile(filepath.Join(dir, IndexFile), data, 0o644)
		}, "incomplete"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for n, b := range files {
				os.WriteFile(filepath.Join(dir, n), b, 0o644)
			}
			if _, err := Verify(context.Background(), dir); err != nil {
				t.Fatalf("intact copy: %v", err)
			}
			tc.mutate(dir)
			rep, err := Verify(context.Background(), dir)
			if err == nil {
				t.Fatal("not detected")
			}
			if !strings.Contains(strings.Join(rep.Problems, "\n"), tc.want) {
				t.Fatalf("problems do not name %s:\n%s", tc.want, strings.Join(rep.Problems, "\n"))
			}
		})
	}
}

func TestRanksAndFinalize(t *testing.T) {
	cfg := demoConfig(t)
	so := demoOptions(8)
	whole, err := sink.Decode(bytes.NewReader(live(t, cfg, so)))
	if err != nil {
		t.Fatal(err)
	}
	wantIdx := indexes(t, whole)
	const w = 3
	dir := t.TempDir()
	errs := make(chan error, w)
	for r := 0; r < w; r++ {
		go func() {
			_, err := Run(context.Background(), cfg, so, Options{Dir: dir, ShardSize: 10_000, Rank: r, WorldSize: w})
			errs <- err
		}()
	}
	for r := 0; r < w; r++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadIndex(dir); err == nil || !strings.Contains(err.Error(), "--finalize") {
		t.Fatalf("unfinalized dir: %v", err)
	}
	rankFiles := dirFiles(t, dir)
	x, err := Finalize(dir)
	if err != nil {
		t.Fatal(err)
	}
	first := dirFiles(t, dir)[IndexFile]
	if _, err := Finalize(dir); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, dirFiles(t, dir)[IndexFile]) {
		t.Fatal("finalizing twice gives different indexes")
	}
	if x.WorldSize != w || len(x.Ranks) != w || !x.Complete {
		t.Fatalf("merged index %+v", x)
	}
	if _, err := Verify(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	st, err := sink.Decode(bytes.NewReader(replay(t, dir, pipeline.Share{})))
	if err != nil {
		t.Fatal(err)
	}
	got := indexes(t, st)
	if !slices.Equal(got, wantIdx) {
		t.Fatalf("replay of the ranks holds %d samples, the live stream %d", len(got), len(wantIdx))
	}
	if st.End.Frames != whole.End.Frames || st.End.Samples != whole.End.Samples || st.End.Rendered != whole.End.Rendered {
		t.Fatalf("end %+v, live %+v", st.End, whole.End)
	}
	// Shares of the merged directory.
	var all []int64
	for k := 0; k < 4; k++ {
		st, err := sink.Decode(bytes.NewReader(replay(t, dir, pipeline.Share{Worker: k, NumWorkers: 4})))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, indexes(t, st)...)
	}
	if !slices.Equal(all, wantIdx) {
		t.Fatal("4 shares of the merged directory do not cover it exactly once")
	}

	// Refusals.
	reset := func() string {
		d := t.TempDir()
		for n, b := range rankFiles {
			os.WriteFile(filepath.Join(d, n), b, 0o644)
		}
		return d
	}
	edit := func(dir string, rank int, f func(*Index)) {
		name := filepath.Join(dir, indexName(rankPrefix(rank, w)))
		y, err := readIndexFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f(y)
		data, _ := y.encode()
		os.WriteFile(name, data, 0o644)
	}
	for name, tc := range map[string]struct {
		mutate func(dir string)
		want   string
	}{
		"missing rank": {func(d string) { os.Remove(filepath.Join(d, "rank00001-index.json")) }, "rank(s) 1 of 3 missing"},
		"incomplete rank": {func(d string) {
			edit(d, 2, func(y *Index) { y.Complete = false; y.Ranks[0].Complete = false })
		}, "rank(s) 2 of 3 incomplete"},
		"different options": {func(d string) {
			edit(d, 1, func(y *Index) { y.Options = json.RawMessage(`{"batch_size":9}`) })
		}, "option batch_size: 8 in the directory, 9 now"},
		"different revision": {func(d string) {
			edit(d, 2, func(y *Index) { y.Revision = "abc" })
		}, "dataset revision"},
		"overlapping shares": {func(d string) {
			edit(d, 1, func(y *Index) {
				y.Ranks[0].Episodes[0][0]--
				y.Ranks[0].EpisodeCount++
			})
		}, "overlap"},
		"shares short of the selection": {func(d string) {
			for r := 0; r < w; r++ {
				edit(d, r, func(y *Index) { y.Selection.Episodes++ })
			}
		}, "the selection"},
		"shard outside its share": {func(d string) {
			edit(d, 1, func(y *Index) {
				y.Ranks[0].Episodes[0][0]++
				y.Ranks[0].EpisodeCount--
			})
		}, "outside its share"},
		"duplicated rank": {func(d string) {
			os.WriteFile(filepath.Join(d, "rank00001-index.json"), rankFiles["rank00002-index.json"], 0o644)
		}, "rank00001-index.json does not describe rank 1"},
		"missing shard": {func(d string) { os.Remove(filepath.Join(d, "rank00002-shard-000000.msgpack.zst")) }, "rank00002-shard-000000"},
		"wrong world size": {func(d string) {
			edit(d, 0, func(y *Index) { y.WorldSize = 4 })
		}, "world size"},
	} {
		d := reset()
		tc.mutate(d)
		_, err := Finalize(d)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error containing %q, got %v", name, tc.want, err)
		}
		if _, err := os.Stat(filepath.Join(d, IndexFile)); err == nil {
			t.Errorf("%s: index.json written despite the refusal", name)
		}
	}

	// A rank rerun into the finalized directory: nothing to do.
	res, err := Run(context.Background(), cfg, so, Options{Dir: dir, ShardSize: 10_000, Rank: 1, WorldSize: w})
	if err != nil || !res.AlreadyComplete {
		t.Fatalf("rank rerun: %v %+v", err, res)
	}
	// A single-process run into it is refused.
	if _, err := Run(context.Background(), cfg, so, Options{Dir: dir, ShardSize: 10_000}); err == nil || !strings.Contains(err.Error(), "world size") {
		t.Fatalf("single run into a multi-rank dir: %v", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"256MB": 256_000_000, "1GiB": 1 << 30, "20KB": 20_000, "20kb": 20_000, "4096": 4096, "1.5GB": 1_500_000_000,
		"2 MiB": 2 << 20, "10k": 10_000, "7B": 7,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MB", "12XB", "-5MB", "0", "1e3"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func TestRankFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env       map[string]string
		hint      int
		rank, ws  int
		errSubstr string
	}{
		{env: nil, rank: 0, ws: 1},
		{env: map[string]string{"RANK": "3", "WORLD_SIZE": "8"}, rank: 3, ws: 8},
		{env: map[string]string{"LRSTREAM_RANK": "1", "LRSTREAM_WORLD_SIZE": "2", "RANK": "3", "WORLD_SIZE": "8"}, rank: 1, ws: 2},
		{env: map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "6"}, rank: 5, ws: 6},
		{env: map[string]string{"SLURM_ARRAY_TASK_ID": "12", "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, rank: 2, ws: 4},
		{env: map[string]string{"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, rank: 7, ws: 8},
		{env: map[string]string{"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_STEP": "2", "SLURM_ARRAY_TASK_COUNT": "3"}, rank: 2, ws: 3},
		{env: map[string]string{"JOB_COMPLETION_INDEX": "2"}, hint: 5, rank: 2, ws: 5},
		{env: map[string]string{"JOB_COMPLETION_INDEX": "2", "LRSTREAM_WORLD_SIZE": "4"}, rank: 2, ws: 4},
		{env: map[string]string{"JOB_COMPLETION_INDEX": "2"}, errSubstr: "world size"},
		{env: map[string]string{"RANK": "3"}, errSubstr: "together"},
		{env: map[string]string{"RANK": "8", "WORLD_SIZE": "8"}, errSubstr: "rank 8"},
		{env: map[string]string{"RANK": "x", "WORLD_SIZE": "8"}, errSubstr: "RANK"},
	} {
		got, err := RankFromEnv(func(k string) string { return tc.env[k] }, tc.hint)
		if tc.errSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errSubstr) {
				t.Errorf("%v: want error %q, got %+v %v", tc.env, tc.errSubstr, got, err)
			}
			continue
		}
		if err != nil || got.Rank != tc.rank || got.WorldSize != tc.ws {
			t.Errorf("%v: got %+v %v, want rank %d of %d", tc.env, got, err, tc.rank, tc.ws)
		}
	}
}

// TestBatchMessages reads real streams message by message as replay does.
func TestBatchMessages(t *testing.T) {
	cfg := demoConfig(t)
	so := demoOptions(5)
	so.KeepLanguage = true
	data := live(t, cfg, so)
	d := sink.NewDecoder(bytes.NewReader(data))
	rd := sink.NewDecoder(shardData(bytes.NewReader(data), int64(len(data))))
	for i := 0; ; i++ {
		m, err := d.Next()
		_, raw, rerr := rd.NextRaw()
		if err != nil {
			if !errors.Is(err, io.EOF) || !errors.Is(rerr, io.EOF) {
				t.Fatalf("message %d: decoder %v, raw %v", i, err, rerr)
			}
			break
		}
		if rerr != nil || !bytes.Equal(raw, m.Raw) {
			t.Fatalf("message %d: raw %v, %d bytes vs %d", i, rerr, len(raw), len(m.Raw))
		}
		if m.Batch != nil {
			bi, err := parseBatch(raw)
			if err != nil || bi.seq != m.Batch.Meta.Seq || bi.size != int64(m.Batch.Size) {
				t.Fatalf("message %d: %+v %v", i, bi, err)
			}
			// Renumbering round-trips through the decoder.
			re := splice(nil, raw, bi.seqStart, bi.seqEnd, sink.AppendInt(nil, 70000))
			m2, err := sink.NewDecoder(bytes.NewReader(re)).Next()
			if err != nil || m2.Batch.Meta.Seq != 70000 || m2.Batch.Size != m.Batch.Size {
				t.Fatalf("message %d renumbered: %v", i, err)
			}
			if _, err := parseBatch(raw[:bi.seqEnd-1]); !errors.Is(err, sink.ErrMalformed) {
				t.Fatalf("message %d cut inside seq: %v", i, err)
			}
		}
		if m.Header != nil {
			h, err := headerWithShare(raw, sink.Share{Rank: 2, WorldSize: 3, Worker: 1, NumWorkers: 300})
			if err != nil {
				t.Fatal(err)
			}
			m2, err := sink.NewDecoder(bytes.NewReader(h)).Next()
			if err != nil || m2.Header.Share != (sink.Share{Rank: 2, WorldSize: 3, Worker: 1, NumWorkers: 300}) || m2.Header.Dataset != m.Header.Dataset {
				t.Fatalf("header with share: %+v %v", m2, err)
			}
			if _, err := parseBatch(raw); err == nil || !strings.Contains(err.Error(), "without seq") {
				t.Fatalf("header as a batch: %v", err)
			}
		}
	}
	// Truncated input.
	rd = sink.NewDecoder(shardData(bytes.NewReader(data[:len(data)-3]), int64(len(data))))
	var err error
	for err == nil {
		_, _, err = rd.NextRaw()
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated stream: %v", err)
	}
	// More data than the index says.
	rd = sink.NewDecoder(shardData(bytes.NewReader(data), int64(len(data)-1)))
	for err = nil; err == nil; {
		_, _, err = rd.NextRaw()
	}
	if !strings.Contains(err.Error(), "more than the") {
		t.Fatalf("stream past its size: %v", err)
	}
}

// TestEmptyStreams covers runs without any batch: a drop-last batch
// larger than the selection, and ranks with no episode at all.
func TestEmptyStreams(t *testing.T) {
	cfg := demoConfig(t)
	so := demoOptions(100000)
	so.DropLast = true
	dir := t.TempDir()
	if _, err := Run(context.Background(), cfg, so, Options{Dir: dir, ShardSize: 10_000}); err != nil {
		t.Fatal(err)
	}
	if x := mustIndex(t, dir); len(x.Shards) != 0 || !x.Complete {
		t.Fatalf("index %+v", x)
	}
	if got, want := replay(t, dir, pipeline.Share{}), live(t, cfg, so); !bytes.Equal(got, want) {
		t.Fatal("empty replay differs from the live stream")
	}
	if _, err := Verify(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	st, err := sink.Decode(bytes.NewReader(replay(t, dir, pipeline.Share{Worker: 1, NumWorkers: 3})))
	if err != nil || len(st.Batches) != 0 || st.End.Frames != 0 {
		t.Fatalf("share of an empty dir: %v %+v", err, st)
	}

	// 20 ranks for 12 episodes: some ranks get nothing.
	so = demoOptions(8)
	dir = t.TempDir()
	for r := 0; r < 20; r++ {
		if _, err := Run(context.Background(), cfg, so, Options{Dir: dir, ShardSize: 10_000, Rank: r, WorldSize: 20}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Finalize(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	whole, err := sink.Decode(bytes.NewReader(live(t, cfg, so)))
	if err != nil {
		t.Fatal(err)
	}
	st, err = sink.Decode(bytes.NewReader(replay(t, dir, pipeline.Share{})))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(indexes(t, st), indexes(t, whole)) || st.End.Frames != whole.End.Frames {
		t.Fatal("20-rank replay does not hold the live stream's samples")
	}
}

// TestReplayInterleaved: with Interleave, reading the workers' streams
// round-robin gives the stored order.
func TestReplayInterleaved(t *testing.T) {
	cfg := demoConfig(t)
	so := demoOptions(8)
	dir := t.TempDir()
	if _, err := Run(context.Background(), cfg, so, Options{Dir: dir, ShardSize: 3_000}); err != nil {
		t.Fatal(err)
	}
	whole, err := sink.Decode(bytes.NewReader(replay(t, dir, pipeline.Share{})))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 3, 7, len(whole.Batches) + 2} {
		streams := make([]*sink.Stream, n)
		var samples int64
		for w := range streams {
			var b bytes.Buffer
			if err := ReplayWith(context.Background(), dir, pipeline.Share{Worker: w, NumWorkers: n}, &b,
				ReplayOptions{Interleave: true, HeaderShare: &sink.Share{Rank: 1, WorldSize: 2, Worker: w, NumWorkers: n}}); err != nil {
				t.Fatal(err)
			}
			if streams[w], err = sink.Decode(&b); err != nil {
				t.Fatalf("n=%d w=%d: %v", n, w, err)
			}
			if h := streams[w].Header.Share; h.Rank != 1 || h.WorldSize != 2 || h.Worker != w {
				t.Fatalf("header share %+v", h)
			}
			samples += streams[w].End.Samples
		}
		for i, b := range whole.Batches {
			got := streams[i%n].Batches[i/n]
			if got.Meta.Seq != int64(i/n) {
				t.Fatalf("n=%d: batch %d has seq %d in worker %d", n, i, got.Meta.Seq, i%n)
			}
			a, c := got.Column("index").(*sink.Array), b.Column("index").(*sink.Array)
			if !bytes.Equal(a.Data, c.Data) {
				t.Fatalf("n=%d: batch %d differs", n, i)
			}
		}
		total := 0
		for _, st := range streams {
			total += len(st.Batches)
		}
		if total != len(whole.Batches) || samples != whole.End.Samples {
			t.Fatalf("n=%d: %d batches, %d samples; want %d, %d", n, total, samples, len(whole.Batches), whole.End.Samples)
		}
	}
}

// TestReplayRefusesBrokenDirs: incomplete directories and missing shards
// give a lone in-band error, damaged shards an error after the header.
func TestReplayRefusesBrokenDirs(t *testing.T) {
	cfg := demoConfig(t)
	dir := t.TempDir()
	if _, err := Run(context.Background(), cfg, demoOptions(8), Options{Dir: dir, ShardSize: 10_000}); err != nil {
		t.Fatal(err)
	}
	x := mustIndex(t, dir)
	check := func(what, want string, lone bool) {
		t.Helper()
		var b bytes.Buffer
		err := Replay(context.Background(), dir, pipeline.Share{}, &b)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: error %v, want %q", what, err, want)
		}
		st, derr := sink.Decode(&b)
		var se *sink.StreamError
		if !errors.As(derr, &se) || !strings.Contains(se.Message, want) || (st.Header == nil) != lone {
			t.Fatalf("%s: stream %+v, %v", what, st, derr)
		}
	}
	// Shards that hold fewer or more batches or bytes than the index says.
	for _, tc := range []struct {
		what, want string
		mutate     func(s *Shard)
	}{
		{"fewer batches", "ends after", func(s *Shard) { s.Batches++; s.LastSeq++ }},
		{"more batches", "more than the", func(s *Shard) { s.Batches--; s.LastSeq-- }},
		{"more bytes", "more than the", func(s *Shard) { s.RawBytes-- }},
	} {
		y := *x
		y.Shards = slices.Clone(x.Shards)
		tc.mutate(&y.Shards[1])
		// Keep the index consistent (seq continuous) so that the shard's
		// content, not checkIndex, is what disagrees.
		d := y.Shards[1].LastSeq - x.Shards[1].LastSeq
		for i := 2; i < len(y.Shards); i++ {
			y.Shards[i].FirstSeq += d
			y.Shards[i].LastSeq += d
		}
		// And the counts and end message (replay runs verify's index
		// checks first).
		y.Ranks = slices.Clone(x.Ranks)
		y.recount()
		if m, err := decodeOne(x.Ranks[0].End); err == nil && m.End != nil {
			e := *m.End
			e.Batches = y.Ranks[0].Batches
			y.Ranks[0].End = sink.AppendEnd(nil, e)
		}
		b, _ := y.encode()
		os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644)
		check(tc.what, x.Shards[1].File, false)
		check(tc.what, tc.want, false)
	}
	b, _ := x.encode()
	os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644)
	data, _ := os.ReadFile(filepath.Join(dir, x.Shards[1].File))
	os.WriteFile(filepath.Join(dir, x.Shards[1].File), append(slices.Clone(data[:len(data)-9]), make([]byte, 9)...), 0o644)
	check("damaged shard", x.Shards[1].File, false)
	os.Remove(filepath.Join(dir, x.Shards[1].File))
	check("missing shard", x.Shards[1].File, true)
	y := *x
	y.Complete = false
	b, _ = y.encode()
	os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644)
	check("incomplete", "incomplete", true)
	os.Remove(filepath.Join(dir, IndexFile))
	check("no index", "index.json", true)
}

// TestResumeShuffled: a shuffled multi-epoch pre-render (pipeline.Train)
// interrupted and resumed gives the uninterrupted files, and replays as
// the live stream.
func TestResumeShuffled(t *testing.T) {
	cfg := demoConfig(t)
	so := demoOptions(8)
	to := pipeline.TrainOptions{Shuffle: true, Seed: 3, BufferSize: 64, Epochs: 2, Consumers: 1}
	train := func(ctx context.Context, cfg *pipeline.Config, so pipeline.StreamOptions, s sink.Sink) (*pipeline.Stats, error) {
		return pipeline.Train(ctx, cfg, so, to, s)
	}
	ref := t.TempDir()
	if _, err := Run(context.Background(), cfg, so, Options{Dir: ref, ShardSize: 10_000, Stream: train}); err != nil {
		t.Fatal(err)
	}
	var live bytes.Buffer
	if _, err := pipeline.Train(context.Background(), cfg, so, to, sink.NewMsgpack(&live)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(replay(t, ref, pipeline.Share{}), live.Bytes()) {
		t.Fatal("shuffled replay differs from the live stream")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := Run(ctx, cfg, so, Options{Dir: dir, ShardSize: 10_000, Stream: train, OnShard: func(Shard) {
		if n++; n == 4 {
			cancel()
		}
	}})
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	if _, err := Run(context.Background(), cfg, so, Options{Dir: dir, ShardSize: 10_000, Stream: train}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, dirFiles(t, dir), dirFiles(t, ref))
}

// TestIndexTampering: what verify refuses in index.json, replay refuses
// too, before reading any shard it names; a shard whose digest does not
// match is refused before any of its batches is emitted; and nothing
// outside the directory is ever read.
func TestIndexTampering(t *testing.T) {
	cfg := demoConfig(t)
	ref := t.TempDir()
	if _, err := Run(context.Background(), cfg, demoOptions(8), Options{Dir: ref, ShardSize: 10_000}); err != nil {
		t.Fatal(err)
	}
	files := dirFiles(t, ref)
	x := mustIndex(t, ref)
	if len(x.Shards) < 4 {
		t.Fatalf("want at least 4 shards, got %d", len(x.Shards))
	}
	edit := func(f func(y *Index)) func(dir string) {
		return func(dir string) {
			y := mustIndex(t, dir)
			f(y)
			data, _ := y.encode()
			os.WriteFile(filepath.Join(dir, IndexFile), data, 0o644)
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(dir string)
		want   string
		// before is the number of batches replay may emit before refusing
		// (-1: a lone error, nothing emitted).
		before int64
	}{
		{"parent path", edit(func(y *Index) { y.Shards[1].File = "../ref/" + y.Shards[1].File }), "want \"" + x.Shards[1].File, -1},
		{"absolute path", edit(func(y *Index) { y.Shards[1].File = filepath.Join(ref, y.Shards[1].File) }), "want \"" + x.Shards[1].File, -1},
		{"subdirectory", edit(func(y *Index) { y.Shards[1].File = "sub/" + y.Shards[1].File }), "want \"" + x.Shards[1].File, -1},
		{"dot dot", edit(func(y *Index) { y.Shards[1].File = ".." }), "want \"" + x.Shards[1].File, -1},
		{"other name", edit(func(y *Index) { y.Shards[1].File = "index.json" }), "want \"" + x.Shards[1].File, -1},
		{"swapped entries", edit(func(y *Index) { y.Shards[1], y.Shards[2] = y.Shards[2], y.Shards[1] }), "shard entry 1 names", -1},
		{"swapped entries renamed", edit(func(y *Index) {
			y.Shards[1], y.Shards[2] = y.Shards[2], y.Shards[1]
			y.Shards[1].File, y.Shards[2].File = y.Shards[2].File, y.Shards[1].File
		}), "out of order", -1},
		{"rank out of range", edit(func(y *Index) { y.Shards[3].Rank = 1 }), "world size 1", -1},
		{"bad digest syntax", edit(func(y *Index) { y.Shards[1].SHA256 = "../" }), "64 lowercase hex", -1},
		{"digest mismatch", edit(func(y *Index) { y.Shards[2].SHA256 = strings.Repeat("0", 64) }), "SHA-256", x.Shards[0].Batches + x.Shards[1].Batches},
		{"content replaced, size kept", func(dir string) {
			// A shard replaced by bytes of the same size: the zstd frame
			// may even decode; the digest catches it before any batch.
			b := slices.Clone(files[x.Shards[2].File])
			b[len(b)/3] ^= 1
			os.WriteFile(filepath.Join(dir, x.Shards[2].File), b, 0o644)
		}, "SHA-256", x.Shards[0].Batches + x.Shards[1].Batches},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "pr")
			// A valid copy outside the directory, which must never be read.
			outside := filepath.Join(root, "ref")
			for _, d := range []string{dir, outside} {
				os.MkdirAll(filepath.Join(d, "sub"), 0o755)
				for n, b := range files {
					os.WriteFile(filepath.Join(d, n), b, 0o644)
					os.WriteFile(filepath.Join(d, "sub", n), b, 0o644)
				}
			}
			tc.mutate(dir)
			rep, err := Verify(context.Background(), dir)
			if err == nil || !strings.Contains(strings.Join(rep.Problems, "\n"), tc.want) {
				t.Fatalf("verify: %v; problems:\n%s\nwant %q", err, strings.Join(rep.Problems, "\n"), tc.want)
			}
			var b bytes.Buffer
			err = Replay(context.Background(), dir, pipeline.Share{}, &b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("replay: %v, want an error containing %q", err, tc.want)
			}
			st, derr := sink.Decode(&b)
			var se *sink.StreamError
			if !errors.As(derr, &se) {
				t.Fatalf("replay stream does not end with an error message: %v", derr)
			}
			if tc.before < 0 {
				if st.Header != nil || len(st.Batches) > 0 {
					t.Fatalf("replay emitted a header and %d batches before refusing", len(st.Batches))
				}
			} else if int64(len(st.Batches)) != tc.before {
				t.Fatalf("replay emitted %d batches before refusing, want %d (those of the shards before)", len(st.Batches), tc.before)
			}
		})
	}
}
