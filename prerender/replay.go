package prerender

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/sink"
)

// ReplayOptions adjust ReplayWith.
type ReplayOptions struct {
	// HeaderShare, when set, is written as the header's share map instead
	// of {rank: 0, world_size: 1, worker: share.Worker, num_workers:
	// share.NumWorkers} (e.g. a serve client's own rank and worker).
	HeaderShare *sink.Share
	// Interleave gives worker w of n the batches w, w+n, w+2n, ...
	// instead of a contiguous range, so that n workers read round-robin
	// (as a PyTorch DataLoader does) consume the batches in their stored
	// order. The shares still hold every batch exactly once.
	Interleave bool
	// Train, when set, replays as a training iteration: epochs, a shuffled
	// batch order and resume tokens (see TrainOptions). Each batch's seq
	// counts this stream's batches across epochs, its epoch is the replay's
	// epoch and its resume token a replay token.
	Train *TrainOptions
	// LiveResume, when set, is a resume token carried by the stored
	// batches of a training pre-render (--shuffle/--epochs: the live
	// stream's tokens, copied as stored): a plain replay (no Train, the
	// whole directory) continues after the batch that carries it, batches
	// copied as stored (seq, epoch and tokens unchanged), so that every
	// token a replayed batch carries resumes that replay. The end message
	// counts the batches and samples replayed; frame counts are zero
	// (they cannot be split by batch).
	LiveResume string
}

// Replay writes share of the pre-rendered batches in dir to w as one
// complete stream (docs/wire-format.md): the header, the share's batches
// and an end message. See ReplayWith.
func Replay(ctx context.Context, dir string, share pipeline.Share, w io.Writer) error {
	return ReplayWith(ctx, dir, share, w, ReplayOptions{})
}

// ReplayWith writes share of the pre-rendered batches in dir to w as one
// complete stream: the header, the share's batches and an end message.
// Batches are copied as stored, not re-encoded (only their seq is
// renumbered from 0 when the stream does not start at the first batch).
//
// The batches of dir (all ranks', in rank order, for a finalized
// multi-rank directory) are cut into share.NumWorkers contiguous ranges of
// (within one) equal batch counts; worker w gets range w (or, with
// opts.Interleave, every n-th batch from batch w), so the shares together
// hold every batch exactly once. With the whole dir (the zero
// Share, or worker 0 of 1) of a single-process pre-render the stream is
// byte-identical to what `lrstream stream` with the same flags writes.
//
// The end message carries the share's batches and samples. Frame counts
// (frames, rendered, dropped, passthrough, skipped, errors, components)
// cannot be split by batch: worker 0 carries the whole run's and the other
// workers zeros, so the end messages of all shares sum to the whole run's.
//
// On failure an error message is written (when w still accepts writes)
// and the error returned, as pipeline.Stream does.
func ReplayWith(ctx context.Context, dir string, share pipeline.Share, w io.Writer, opts ReplayOptions) error {
	out := bufio.NewWriterSize(w, 1<<20)
	r := &replayer{out: out}
	err := r.run(ctx, dir, share, opts)
	if err != nil && r.werr == nil {
		out.Write(sink.AppendError(nil, err.Error()))
	}
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("replay: write: %w", ferr)
	}
	return err
}

type replayer struct {
	out  *bufio.Writer
	werr error
	buf  []byte
	// batchSize is the index's, for the batch checks (shardTally).
	batchSize int
}

func (r *replayer) write(p []byte) error {
	if _, err := r.out.Write(p); err != nil {
		r.werr = err
		return fmt.Errorf("replay: write: %w", err)
	}
	return nil
}

// shareRange returns the batch range [lo, hi) of worker w of n among
// total batches.
func shareRange(total int64, w, n int) (int64, int64) {
	return total * int64(w) / int64(n), total * int64(w+1) / int64(n)
}

func (r *replayer) run(ctx context.Context, dir string, share pipeline.Share, opts ReplayOptions) error {
	n := max(share.NumWorkers, 1)
	if share.Worker < 0 || share.Worker >= n {
		return fmt.Errorf("replay: invalid share: worker %d of %d", share.Worker, n)
	}
	x, err := ReadIndex(dir)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if err := checkReplayable(dir, x); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	r.batchSize = x.BatchSize
	hdr, err := replayHeader(x, share.Worker, n, opts)
	if err != nil {
		return fmt.Errorf("replay: %s: header: %w", dir, err)
	}
	total := x.Totals.Batches
	sel := selection{stride: 1}
	sel.lo, sel.hi = shareRange(total, share.Worker, n)
	if opts.Interleave {
		sel = selection{lo: int64(share.Worker), hi: total, stride: int64(n)}
	}
	// Check the shards are there before starting the stream, so a
	// missing file gives a lone error message rather than a cut stream.
	if err := checkShardFiles(dir, x.Shards); err != nil {
		return fmt.Errorf("replay: %s: %w", dir, err)
	}
	if opts.LiveResume != "" {
		if opts.Train != nil || n != 1 {
			return fmt.Errorf("replay: %s: a live resume token resumes a plain replay of the whole directory", dir)
		}
		lo, err := r.liveResumeStart(ctx, dir, x, hdr, opts.LiveResume)
		if err != nil {
			return fmt.Errorf("replay: %s: %w", dir, err)
		}
		sel = selection{lo: lo, hi: total, stride: 1, keepSeq: true}
	}
	var tr *trainRun
	if opts.Train != nil {
		if tr, err = newTrainRun(dir, x, share.Worker, n, sel, opts); err != nil {
			return fmt.Errorf("replay: %s: %w", dir, err)
		}
	}
	if err := r.write(hdr); err != nil {
		return err
	}
	var batches, samples int64
	if tr != nil {
		batches, samples, err = r.train(ctx, dir, x, tr)
	} else {
		batches, samples, err = r.batches(ctx, dir, x, sel)
	}
	if err != nil {
		return err
	}
	ends, err := rankEnds(dir, x)
	if err != nil {
		return err
	}
	if opts.LiveResume != "" {
		return r.write(sink.AppendEnd(nil, sink.End{Batches: batches, Samples: samples}))
	}
	if len(ends) == 1 && n == 1 && tr == nil {
		// The whole of a single stream: its own end message.
		if ends[0].Batches != total || ends[0].Samples != samples {
			return fmt.Errorf("replay: %s: end message counts %d batches, %d samples; the shards hold %d, %d",
				dir, ends[0].Batches, ends[0].Samples, total, samples)
		}
		return r.write(x.Ranks[0].End)
	}
	return r.write(sink.AppendEnd(nil, mergeEnds(ends, share.Worker, tr, batches, samples)))
}

// replayHeader returns the header of the replay: the first rank's with
// batches (ranks without any may have a schema taken from info.json
// alone), with the share of the consumer (worker of n) or
// opts.HeaderShare.
func replayHeader(x *Index, worker, n int, opts ReplayOptions) ([]byte, error) {
	hdr := x.Ranks[0].Header
	for _, rk := range x.Ranks {
		if rk.Batches > 0 {
			hdr = rk.Header
			break
		}
	}
	hs := sink.Share{Rank: 0, WorldSize: 1, Worker: worker, NumWorkers: n}
	if opts.HeaderShare != nil {
		hs = *opts.HeaderShare
	}
	return headerWithShare(hdr, hs)
}

// rankEnds decodes the end message of each rank of x.
func rankEnds(dir string, x *Index) ([]*sink.End, error) {
	ends := make([]*sink.End, len(x.Ranks))
	for i, rk := range x.Ranks {
		m, err := decodeOne(rk.End)
		if err != nil {
			return nil, fmt.Errorf("replay: %s: rank %d end message: %w", dir, rk.Rank, err)
		}
		if m.End == nil {
			return nil, fmt.Errorf("replay: %s: rank %d end message is a %q message", dir, rk.Rank, m.Type)
		}
		ends[i] = m.End
	}
	return ends, nil
}

// mergeEnds returns the end message of a replay that sent batches and
// samples: the component names of the first rank, and for worker 0 the
// ranks' frame counts (times the epochs run, for a training replay).
func mergeEnds(ends []*sink.End, worker int, tr *trainRun, batches, samples int64) sink.End {
	e := sink.End{Batches: batches, Samples: samples}
	for i, end := range ends {
		if i == 0 {
			for _, c := range end.Components {
				e.Components = append(e.Components, sink.ComponentCount{Name: c.Name})
			}
		}
		if worker != 0 {
			continue
		}
		if tr != nil {
			// Each epoch the stream started passes over the whole run.
			m := tr.epochsRun
			end.Frames, end.Rendered, end.Dropped, end.Passthrough, end.Skipped, end.Errors =
				end.Frames*m, end.Rendered*m, end.Dropped*m, end.Passthrough*m, end.Skipped*m, end.Errors*m
			for j := range end.Components {
				end.Components[j].Count *= m
			}
		}
		e.Frames += end.Frames
		e.Rendered += end.Rendered
		e.Dropped += end.Dropped
		e.Passthrough += end.Passthrough
		e.Skipped += end.Skipped
		e.Errors += end.Errors
		for j, c := range end.Components {
			if j < len(e.Components) {
				e.Components[j].Count += c.Count
			}
		}
	}
	return e
}

// checkReplayable checks an index describes a finished run.
func checkReplayable(dir string, x *Index) error {
	if !x.Complete {
		return fmt.Errorf("%s is incomplete (an interrupted lrstream prerender: run the same command again to finish it)", dir)
	}
	if len(x.Ranks) != x.WorldSize {
		return fmt.Errorf("%s: the index lists %d ranks of %d", dir, len(x.Ranks), x.WorldSize)
	}
	for i, rk := range x.Ranks {
		if rk.Rank != i || !rk.Complete || len(rk.Header) == 0 || len(rk.End) == 0 {
			return fmt.Errorf("%s: rank %d of the index is incomplete", dir, i)
		}
	}
	// What verify refuses in the index, replay refuses too (the same
	// checks): shard names confined to the directory, entries in order,
	// header and end messages agreeing with the index, counts adding up.
	if probs := indexProblems(x); len(probs) > 0 {
		return refuseIndex(dir, probs)
	}
	return nil
}

// selection picks the global batches lo, lo+stride, lo+2*stride, ...
// below hi (global: counted across ranks).
// With keepSeq the batches keep their stored seq (a resumed replay).
type selection struct {
	lo, hi, stride int64
	keepSeq        bool
}

// pick reports whether global batch g is selected, and its seq in the
// replayed stream.
func (s selection) pick(g int64) (bool, int64) {
	if g < s.lo || g >= s.hi || (g-s.lo)%s.stride != 0 {
		return false, 0
	}
	if s.keepSeq {
		return true, g
	}
	return true, (g - s.lo) / s.stride
}

// batches copies the selected batches of x and returns their number and
// sample count.
func (r *replayer) batches(ctx context.Context, dir string, x *Index, sel selection) (int64, int64, error) {
	if sel.lo >= sel.hi {
		return 0, 0, nil
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		return 0, 0, fmt.Errorf("replay: %w", err)
	}
	defer dec.Close()
	var g, batches, samples int64 // g: global number of the shard's first batch
	for _, s := range x.Shards {
		if g+s.Batches <= sel.lo || (sel.stride > 1 && s.Batches > 0 && !anyPicked(sel, g, g+s.Batches)) {
			g += s.Batches
			continue
		}
		if g >= sel.hi {
			break
		}
		b, n, err := r.shard(ctx, dec, dir, s, g, sel)
		batches += b
		samples += n
		if err != nil {
			return batches, samples, err
		}
		g += s.Batches
	}
	return batches, samples, nil
}

// anyPicked reports whether sel picks a batch in [from, to).
func anyPicked(sel selection, from, to int64) bool {
	first := max(from, sel.lo)
	if r := (first - sel.lo) % sel.stride; r != 0 {
		first += sel.stride - r
	}
	return first < min(to, sel.hi)
}

// shard copies the batches of shard s (whose first batch is global batch
// g) that sel picks, renumbering their seq.
func (r *replayer) shard(ctx context.Context, dec *zstd.Decoder, dir string, s Shard, g int64, sel selection) (int64, int64, error) {
	var batches, samples int64
	err := r.eachBatch(ctx, dec, dir, s, func(k int64, raw []byte, bi batchInfo) error {
		gi := g + k
		if gi >= sel.hi {
			return errStop
		}
		ok, seq := sel.pick(gi)
		if !ok {
			return nil
		}
		batches++
		samples += bi.size
		if seq != bi.seq {
			r.buf = splice(r.buf[:0], raw, bi.seqStart, bi.seqEnd, sink.AppendInt(nil, seq))
			raw = r.buf
		}
		return r.write(raw)
	})
	return batches, samples, err
}

// errStop ends eachBatch early, without error.
var errStop = errors.New("stop")

// eachBatch reads shard s, checking its size and SHA-256 before any batch
// is handed on, then each message (a batch, with the seq the index says)
// and the count; fn gets the k-th batch (raw is valid during the call).
// fn returning errStop ends the shard early without error.
func (r *replayer) eachBatch(ctx context.Context, dec *zstd.Decoder, dir string, s Shard, fn func(k int64, raw []byte, bi batchInfo) error) error {
	f, st, err := openRegular(filepath.Join(dir, s.File))
	if err != nil {
		return fmt.Errorf("replay: shard %s: %w", s.File, err)
	}
	defer f.Close()
	if st.Size() != s.Bytes {
		return fmt.Errorf("replay: shard %s is %d bytes, the index says %d", s.File, st.Size(), s.Bytes)
	}
	// The digest is checked before any of the shard's batches is emitted:
	// the file is hashed, then read again to decode it.
	if err := checkDigest(f, s); err != nil {
		return fmt.Errorf("replay: shard %s: %w", s.File, err)
	}
	if err := dec.Reset(f); err != nil {
		return fmt.Errorf("replay: shard %s: %w", s.File, err)
	}
	rawn := &countingReader{r: dec}
	d := sink.NewDecoder(shardData(rawn, s.RawBytes))
	tally := newShardTally(s, r.batchSize)
	for k := int64(0); k < s.Batches; k++ {
		if ctx.Err() != nil {
			return fmt.Errorf("replay: %w", context.Cause(ctx)) // e.g. "server shutting down"
		}
		typ, raw, err := d.NextRaw()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("replay: shard %s ends after %d batches, the index says %d", s.File, k, s.Batches)
		}
		if err == nil && typ != sink.TypeBatch {
			err = fmt.Errorf("a %q message, shards hold batches only", typ)
		}
		var bi batchInfo
		if err == nil {
			bi, err = parseBatch(raw)
		}
		if err != nil {
			return fmt.Errorf("replay: shard %s batch %d: %w", s.File, k, err)
		}
		if bi.seq != s.FirstSeq+k {
			return fmt.Errorf("replay: shard %s: batch %d has seq %d, the index says %d", s.File, k, bi.seq, s.FirstSeq+k)
		}
		if err := tally.batch(raw, bi); err != nil {
			return fmt.Errorf("replay: shard %s: %w", s.File, err)
		}
		if err := fn(k, raw, bi); err != nil {
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		}
	}
	if _, _, err := d.NextRaw(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = fmt.Errorf("more than the %d batches the index says", s.Batches)
		}
		return fmt.Errorf("replay: shard %s: %w", s.File, err)
	}
	if err := tally.end(rawn.n); err != nil {
		return fmt.Errorf("replay: shard %s: %w", s.File, err)
	}
	return nil
}

// checkDigest checks the size and SHA-256 of the open shard f against its
// index entry and rewinds f.
func checkDigest(f *os.File, s Shard) error {
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if n != s.Bytes {
		return fmt.Errorf("%d bytes, the index says %d", n, s.Bytes)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != s.SHA256 {
		return fmt.Errorf("SHA-256 %s does not match the index (%s)", sum, s.SHA256)
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}

// shardData returns a shard's decompressed messages, dec, which the index
// says are size bytes: reading past them gives an error, not more data.
func shardData(dec io.Reader, size int64) io.Reader {
	return io.MultiReader(io.LimitReader(dec, size), overrun{dec, size})
}

// overrun reads what follows a shard's indexed size: io.EOF, or an error
// when there is more.
type overrun struct {
	r    io.Reader
	size int64
}

func (o overrun) Read([]byte) (int, error) {
	var b [1]byte
	if _, err := io.ReadFull(o.r, b[:]); err != nil {
		return 0, err // io.EOF at the end
	}
	return 0, fmt.Errorf("more than the %d bytes the index says", o.size)
}

// batchInfo is what replay reads of an encoded batch message: its seq and
// size, and the span raw[seqStart:seqEnd] of its seq value.
type batchInfo struct {
	seq, size, epoch int64
	seqStart, seqEnd int
}

// parseBatch reads a batch message's seq, size and epoch.
func parseBatch(raw []byte) (batchInfo, error) {
	var bi batchInfo
	var err error
	if bi.seq, bi.seqStart, bi.seqEnd, err = intField(raw, "seq"); err != nil {
		return bi, err
	}
	if bi.size, _, _, err = intField(raw, "size"); err != nil {
		return bi, err
	}
	bi.epoch, _, _, err = intField(raw, "epoch")
	return bi, err
}

// intField reads the integer value of key in the message raw and returns
// it with its span.
func intField(raw []byte, key string) (v int64, start, end int, err error) {
	start, end, err = sink.FieldSpan(raw, key)
	if err != nil {
		return 0, 0, 0, err
	}
	if start < 0 {
		return 0, 0, 0, fmt.Errorf("batch message without %s", key)
	}
	if v, err = sink.ParseInt(raw[start:end]); err != nil {
		return 0, 0, 0, fmt.Errorf("%s: %w", key, err)
	}
	return v, start, end, nil
}

// headerWithShare returns the header message raw with its share map
// replaced.
func headerWithShare(raw []byte, sh sink.Share) ([]byte, error) {
	start, end, err := sink.FieldSpan(raw, "share")
	if err != nil {
		return nil, err
	}
	if start < 0 {
		return nil, errors.New("no share in the header")
	}
	return splice(nil, raw, start, end, sink.AppendShare(nil, sh)), nil
}

// splice appends b with b[start:end] replaced by repl.
func splice(dst, b []byte, start, end int, repl []byte) []byte {
	dst = append(dst, b[:start]...)
	dst = append(dst, repl...)
	return append(dst, b[end:]...)
}
