package prerender

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/sink"
)

// fuzzSeeds pre-renders the demo dataset and returns its index.json and
// replayed stream, for seeds.
func fuzzSeeds(f *testing.F) (index, stream []byte) {
	f.Helper()
	dir := f.TempDir()
	if _, err := Run(context.Background(), demoConfig(f), demoOptions(8), Options{Dir: dir, ShardSize: 10_000}); err != nil {
		f.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		f.Fatal(err)
	}
	var b bytes.Buffer
	if err := Replay(context.Background(), dir, pipeline.Share{}, &b); err != nil {
		f.Fatal(err)
	}
	return index, b.Bytes()
}

// FuzzIndex: whatever index.json parses and passes checkIndex (the
// validation replay and verify share) names only shard files inside the
// directory, with the writer's names, in replay order.
func FuzzIndex(f *testing.F) {
	index, _ := fuzzSeeds(f)
	f.Add(index)
	f.Add(bytes.Replace(index, []byte(`"shard-000001`), []byte(`"../ref/shard-000001`), 1))
	f.Add(bytes.Replace(index, []byte(`"shard-000001`), []byte(`"/etc/shard-000001`), 1))
	f.Add([]byte(`{"format":"lrstream-prerender/1","world_size":2,"shards":[{"file":"rank00001-shard-000000.msgpack.zst","rank":1,"batches":1,"samples":1,"bytes":1,"raw_bytes":1,"sha256":"` + strings.Repeat("a", 64) + `"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := parseIndex("index.json", data)
		if err != nil || len(checkIndex(x)) > 0 {
			return
		}
		rank := -1
		next := int64(0)
		for i, s := range x.Shards {
			if !validShardName(s.File) || strings.ContainsAny(s.File, `/\`) || strings.Contains(s.File, "..") || filepath.Base(s.File) != s.File {
				t.Fatalf("accepted shard entry %d naming %q", i, s.File)
			}
			if s.Rank < rank || s.Rank < 0 || s.Rank >= x.WorldSize {
				t.Fatalf("accepted shard entry %d of rank %d after rank %d (world size %d)", i, s.Rank, rank, x.WorldSize)
			}
			if s.Rank != rank {
				rank, next = s.Rank, 0
			}
			if s.FirstSeq != next || s.Batches < 1 || s.LastSeq != s.FirstSeq+s.Batches-1 {
				t.Fatalf("accepted shard entry %d with seq %d..%d (%d batches), want first %d", i, s.FirstSeq, s.LastSeq, s.Batches, next)
			}
			next = s.LastSeq + 1
		}
	})
}

// FuzzParseBatch: replay's batch parsing never panics, and what it accepts
// has its seq span inside the message, where renumbering gives a message
// that parses to the new seq and the same size.
func FuzzParseBatch(f *testing.F) {
	_, stream := fuzzSeeds(f)
	for i := 0; i < 3; i++ {
		_, n, err := sink.SplitMessage(stream)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(stream[:n])
		stream = stream[n:]
	}
	f.Add(sink.AppendError(nil, "boom"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		bi, err := parseBatch(raw)
		if err != nil {
			return
		}
		if bi.seqStart < 0 || bi.seqStart >= bi.seqEnd || bi.seqEnd > len(raw) {
			t.Fatalf("seq span [%d, %d) of a %d-byte message", bi.seqStart, bi.seqEnd, len(raw))
		}
		out := splice(nil, raw, bi.seqStart, bi.seqEnd, sink.AppendInt(nil, bi.seq+1000))
		bj, err := parseBatch(out)
		if err != nil || bj.seq != bi.seq+1000 || bj.size != bi.size {
			t.Fatalf("renumbered: %+v, %v; want seq %d size %d", bj, err, bi.seq+1000, bi.size)
		}
	})
}

// FuzzParseSize: sizes parse to a positive value in range, or an error.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"256MB", "1GiB", "10000", "1.5 kb", "0", "-1", "1e400", "9999999999TB", "", "MB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && (n < 1 || n > 1<<62) {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
	})
}

// FuzzBatchEpisodes: replay's episode_index skim of a batch message never
// panics, and agrees with the full decode (sink.Decoder) when both read
// the column.
func FuzzBatchEpisodes(f *testing.F) {
	_, stream := fuzzSeeds(f)
	for i := 0; i < 3; i++ {
		_, n, err := sink.SplitMessage(stream)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(stream[:n])
		stream = stream[n:]
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		lo, hi, ok, err := batchEpisodes(raw)
		if err != nil || !ok {
			return
		}
		if lo > hi {
			t.Fatalf("episodes %d..%d", lo, hi)
		}
		m, err := sink.NewDecoder(bytes.NewReader(raw)).Next()
		if err != nil || m.Batch == nil {
			return
		}
		if a, isArr := m.Batch.Column("episode_index").(*sink.Array); isArr && a.DType == "<i8" && len(a.Data) >= 8 {
			first := int64(binary.LittleEndian.Uint64(a.Data))
			if first < lo || first > hi {
				t.Fatalf("decoded episode %d outside the skimmed %d..%d", first, lo, hi)
			}
		}
	})
}
