package prerender

import (
	"encoding/binary"
	"fmt"

	"github.com/lrstream/lrstream/sink"
	"github.com/vmihailenco/msgpack/v5"
)

// Replay trusts a directory no more than verify does: the index checks
// are verify's own (checkIndex and verifyIndex: names, order, ranks,
// header and end messages against the index, counts and totals), run
// before the stream starts; the content checks verify makes on each
// shard's batches that need no full decode (batch sizes and the short
// batch rule, samples, decompressed bytes, episode range) are made as the
// batches pass, before the shard's next batch, and at its end.

// indexProblems runs verify's checks of the index alone; it returns the
// problems, empty when there is none.
func indexProblems(x *Index) []string {
	rep := &Report{}
	verifyIndex(x, rep)
	return rep.Problems
}

// refuseIndex is the replay error for an index verify would refuse.
func refuseIndex(dir string, probs []string) error {
	more := ""
	if len(probs) > 1 {
		more = fmt.Sprintf(" (and %d more problems)", len(probs)-1)
	}
	return fmt.Errorf("%s: %s%s: lrstream verify %s lists every problem", dir, probs[0], more, dir)
}

// shardTally follows one shard's batches as they are replayed and
// checks them against its index entry, as verifyShard does.
type shardTally struct {
	s         Shard
	batchSize int64
	samples   int64
	firstEp   int64
	lastEp    int64
	short     bool // the previous batch was short
	prevEpoch int64
}

func newShardTally(s Shard, batchSize int) *shardTally {
	return &shardTally{s: s, batchSize: int64(batchSize), firstEp: -1, lastEp: -1}
}

// batch checks the shard's next batch (raw, its seq/size/epoch in bi).
func (t *shardTally) batch(raw []byte, bi batchInfo) error {
	if bi.size < 1 || bi.size > t.batchSize {
		return fmt.Errorf("batch seq %d has %d samples (batch size %d)", bi.seq, bi.size, t.batchSize)
	}
	if t.short && t.prevEpoch == bi.epoch {
		return fmt.Errorf("batch seq %d has fewer than %d samples but is not the last of epoch %d", bi.seq-1, t.batchSize, bi.epoch)
	}
	t.short, t.prevEpoch = bi.size < t.batchSize, bi.epoch
	t.samples += bi.size
	lo, hi, ok, err := batchEpisodes(raw)
	if err != nil {
		return fmt.Errorf("batch seq %d: episode_index: %w", bi.seq, err)
	}
	if ok {
		if t.firstEp < 0 || lo < t.firstEp {
			t.firstEp = lo
		}
		t.lastEp = max(t.lastEp, hi)
	}
	return nil
}

// end checks the whole shard, read to its end, decompressed to rawBytes.
func (t *shardTally) end(rawBytes int64) error {
	s := t.s
	if t.samples != s.Samples {
		return fmt.Errorf("holds %d batches, %d samples; the index says %d, %d", s.Batches, t.samples, s.Batches, s.Samples)
	}
	if rawBytes != s.RawBytes {
		return fmt.Errorf("%d bytes decompressed, the index says %d", rawBytes, s.RawBytes)
	}
	if t.firstEp >= 0 && (t.firstEp != s.FirstEpisode || t.lastEp != s.LastEpisode) {
		return fmt.Errorf("episodes %d..%d, the index says %d..%d", t.firstEp, t.lastEp, s.FirstEpisode, s.LastEpisode)
	}
	return nil
}

// batchEpisodes returns the lowest and highest episode_index of an
// encoded batch message without decoding its other columns; ok is false
// when it has no int64 episode_index column (as verify, which then does
// not check episodes either).
func batchEpisodes(raw []byte) (lo, hi int64, ok bool, err error) {
	cs, ce, err := sink.FieldSpan(raw, "columns")
	if err != nil || cs < 0 {
		return 0, 0, false, err
	}
	cols := raw[cs:ce]
	es, ee, err := sink.FieldSpan(cols, "episode_index")
	if err != nil || es < 0 {
		return 0, 0, false, err
	}
	var arr map[string]any
	if err := msgpack.Unmarshal(cols[es:ee], &arr); err != nil {
		return 0, 0, false, err
	}
	dtype, _ := arr["type"].(string)
	data, _ := arr["data"].([]byte)
	if dtype != "<i8" || len(data)%8 != 0 {
		return 0, 0, false, nil
	}
	for i := 0; i < len(data); i += 8 {
		e := int64(binary.LittleEndian.Uint64(data[i:]))
		if !ok || e < lo {
			lo = e
		}
		if !ok || e > hi {
			hi = e
		}
		ok = true
	}
	return lo, hi, ok, nil
}
