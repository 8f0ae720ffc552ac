package prerender

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/lrstream/lrstream/sink"
)

// TrainOptions make a replay a training iteration over the pre-rendered
// batches (ReplayOptions.Train): epochs, a shuffled batch order, and
// resume tokens that replay accepts.
type TrainOptions struct {
	// Epochs is the number of passes (0: forever).
	Epochs int64
	// Shuffle permutes the batches each epoch: the shards in an order
	// drawn from (Seed, epoch), their batches mixed through a buffer of
	// BufferBatches batches (at least 1) with the same generator.
	Shuffle       bool
	Seed          uint64
	BufferBatches int
	// Resume is a replay resume token (a batch's "resume" field of an
	// earlier training replay of the same directory, share and options):
	// the stream continues right after that batch.
	Resume string
}

// replayTokenPrefix starts every replay resume token.
const replayTokenPrefix = "lrsr1."

// replayToken is what a replay resume token holds: the directory (the
// SHA-256 of its index.json), the consumer share and shuffle options, and
// the position after the batch that carried it.
type replayToken struct {
	Index     string `json:"index"`
	Consumer  int    `json:"consumer"`
	Consumers int    `json:"consumers"`
	Shuffle   bool   `json:"shuffle"`
	Seed      uint64 `json:"seed"`
	Buffer    int    `json:"buffer"`
	// Epoch and Done: this consumer's batches of epoch Epoch already
	// delivered.
	Epoch int64 `json:"epoch"`
	Done  int64 `json:"done"`
}

func (t replayToken) encode() string {
	b, _ := json.Marshal(t)
	return replayTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// parseReplayToken decodes a replay resume token.
func parseReplayToken(s string) (replayToken, error) {
	var t replayToken
	rest, ok := strings.CutPrefix(s, replayTokenPrefix)
	if !ok {
		return t, errors.New("not a replay resume token (a token of a live stream resumes `lrstream stream` with the same dataset flags, not a replay)")
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return t, fmt.Errorf("damaged replay resume token: %w", err)
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("damaged replay resume token: %w", err)
	}
	if t.Epoch < 0 || t.Done < 0 || t.Consumers < 1 || t.Consumer < 0 || t.Consumer >= t.Consumers {
		return t, errors.New("damaged replay resume token: position out of range")
	}
	return t, nil
}

// indexDigest is the hex SHA-256 of dir's index.json: what a replay token
// is bound to.
func indexDigest(dir string) (string, error) {
	b, err := readRegular(filepath.Join(dir, IndexFile), MaxIndexBytes)
	if err != nil {
		return "", fmt.Errorf("read pre-render index: %w", err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// trainOrder yields one epoch's batches in order: the shards in stored
// order, or (shuffled) in a permuted order with their batches mixed
// through a buffer. emit gets each raw batch message (valid during the
// call) and its samples.
type trainOrder struct {
	r    *replayer
	dec  *zstd.Decoder
	dir  string
	x    *Index
	opts TrainOptions
}

func (o *trainOrder) epoch(ctx context.Context, epoch int64, emit func(raw []byte, size int64) error) error {
	shards := slices.Clone(o.x.Shards)
	if !o.opts.Shuffle {
		for _, s := range shards {
			err := o.r.eachBatch(ctx, o.dec, o.dir, s, func(_ int64, raw []byte, bi batchInfo) error { return emit(raw, bi.size) })
			if err != nil {
				return err
			}
		}
		return nil
	}
	rng := rand.New(rand.NewPCG(o.opts.Seed, uint64(epoch)))
	rng.Shuffle(len(shards), func(i, j int) { shards[i], shards[j] = shards[j], shards[i] })
	type held struct {
		raw  []byte
		size int64
	}
	buf := make([]held, 0, max(o.opts.BufferBatches, 1))
	pop := func() error {
		i := rng.IntN(len(buf))
		h := buf[i]
		buf[i] = buf[len(buf)-1]
		buf = buf[:len(buf)-1]
		return emit(h.raw, h.size)
	}
	for _, s := range shards {
		err := o.r.eachBatch(ctx, o.dec, o.dir, s, func(_ int64, raw []byte, bi batchInfo) error {
			buf = append(buf, held{slices.Clone(raw), bi.size})
			if len(buf) == cap(buf) {
				return pop()
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for len(buf) > 0 {
		if err := pop(); err != nil {
			return err
		}
	}
	return nil
}

// rewriteBatch returns raw with its seq, epoch and resume values replaced.
func rewriteBatch(dst, raw []byte, seq, epoch int64, token string) ([]byte, error) {
	type edit struct {
		start, end int
		repl       []byte
	}
	var edits []edit
	for _, f := range []struct {
		key  string
		repl []byte
	}{{"seq", sink.AppendInt(nil, seq)}, {"epoch", sink.AppendInt(nil, epoch)}, {"resume", sink.AppendString(nil, token)}} {
		s, e, err := sink.FieldSpan(raw, f.key)
		if err != nil {
			return nil, err
		}
		if s < 0 {
			return nil, fmt.Errorf("batch message without %s", f.key)
		}
		edits = append(edits, edit{s, e, f.repl})
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	dst = dst[:0]
	at := 0
	for _, e := range edits {
		dst = append(dst, raw[at:e.start]...)
		dst = append(dst, e.repl...)
		at = e.end
	}
	return append(dst, raw[at:]...), nil
}

// trainRun is one training replay's plan: the consumer's share, the token
// fields and where it starts.
type trainRun struct {
	opts       TrainOptions
	tok        replayToken // the fields every token of this stream shares
	sel        selection   // positions picked in each epoch's order
	per        int64       // this consumer's batches per epoch
	startEpoch int64
	skip       int64 // of this consumer's batches of startEpoch
	epochsRun  int64
}

// newTrainRun checks the options and resume token against dir.
func newTrainRun(dir string, x *Index, consumer, consumers int, sel selection, ro ReplayOptions) (*trainRun, error) {
	o := *ro.Train
	if o.Epochs < 0 {
		return nil, fmt.Errorf("epochs %d", o.Epochs)
	}
	o.BufferBatches = max(o.BufferBatches, 1)
	if !o.Shuffle {
		o.Seed, o.BufferBatches = 0, 0
	}
	digest, err := indexDigest(dir)
	if err != nil {
		return nil, err
	}
	total := x.Totals.Batches
	if o.Shuffle || ro.Interleave {
		// Round-robin over the epoch's order: consumers advance together.
		sel = selection{lo: int64(consumer), hi: total, stride: int64(consumers)}
	}
	var per int64
	if sel.hi > sel.lo {
		per = (sel.hi - sel.lo + sel.stride - 1) / sel.stride
	}
	tr := &trainRun{opts: o, sel: sel, per: per, tok: replayToken{
		Index: digest, Consumer: consumer, Consumers: consumers,
		Shuffle: o.Shuffle, Seed: o.Seed, Buffer: o.BufferBatches,
	}}
	if o.Resume != "" {
		t, err := parseReplayToken(o.Resume)
		if err != nil {
			return nil, err
		}
		want := tr.tok
		want.Epoch, want.Done = t.Epoch, t.Done
		if t != want {
			return nil, fmt.Errorf("the resume token belongs to another replay (index %.12s, consumer %d of %d, shuffle %v, seed %d, buffer %d); this one is index %.12s, consumer %d of %d, shuffle %v, seed %d, buffer %d",
				t.Index, t.Consumer, t.Consumers, t.Shuffle, t.Seed, t.Buffer, want.Index, want.Consumer, want.Consumers, want.Shuffle, want.Seed, want.Buffer)
		}
		tr.startEpoch, tr.skip = t.Epoch, t.Done
		if tr.skip >= per {
			tr.startEpoch, tr.skip = t.Epoch+1, 0
		}
	}
	return tr, nil
}

// train writes the consumer's batches of each epoch from the resume
// point and returns their number and samples.
func (r *replayer) train(ctx context.Context, dir string, x *Index, tr *trainRun) (int64, int64, error) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		return 0, 0, fmt.Errorf("replay: %w", err)
	}
	defer dec.Close()
	o := &trainOrder{r: r, dec: dec, dir: dir, x: x, opts: tr.opts}
	var batches, samples int64
	for ep := tr.startEpoch; tr.opts.Epochs == 0 || ep < tr.opts.Epochs; ep++ {
		tr.epochsRun++
		var pos, k int64 // position in the epoch's order; this consumer's batches
		skip := int64(0)
		if ep == tr.startEpoch {
			skip = tr.skip
		}
		err := o.epoch(ctx, ep, func(raw []byte, size int64) error {
			p := pos
			pos++
			if ok, _ := tr.sel.pick(p); !ok {
				return nil
			}
			k++
			if k <= skip {
				return nil
			}
			t := tr.tok
			t.Epoch, t.Done = ep, k
			b, err := rewriteBatch(r.buf, raw, ep*tr.per+k-1, ep, t.encode())
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			r.buf = b
			batches++
			samples += size
			return r.write(b)
		})
		if err != nil {
			return batches, samples, err
		}
		if tr.per == 0 && tr.opts.Epochs == 0 {
			break // nothing to stream, ever
		}
	}
	return batches, samples, nil
}
