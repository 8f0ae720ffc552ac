package prerender

import (
	"bufio"
	"context"
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
// (within one) equal batch counts; worker w gets range w, so the shares
// together hold every batch exactly once. With the whole dir (the zero
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
	// The header: the first rank with batches (ranks without any may have
	// a schema taken from info.json alone).
	hdr := x.Ranks[0].Header
	for _, rk := range x.Ranks {
		if rk.Batches > 0 {
			hdr = rk.Header
			break
		}
	}
	hs := sink.Share{Rank: 0, WorldSize: 1, Worker: share.Worker, NumWorkers: n}
	if opts.HeaderShare != nil {
		hs = *opts.HeaderShare
	}
	if hdr, err = headerWithShare(hdr, hs); err != nil {
		return fmt.Errorf("replay: %s: header: %w", dir, err)
	}
	if err := r.write(hdr); err != nil {
		return err
	}
	total := x.Totals.Batches
	lo, hi := shareRange(total, share.Worker, n)
	samples, err := r.batches(ctx, dir, x, lo, hi)
	if err != nil {
		return err
	}
	ends := make([]*sink.End, len(x.Ranks))
	for i, rk := range x.Ranks {
		m, err := decodeOne(rk.End)
		if err != nil {
			return fmt.Errorf("replay: %s: rank %d end message: %w", dir, rk.Rank, err)
		}
		if m.End == nil {
			return fmt.Errorf("replay: %s: rank %d end message is a %q message", dir, rk.Rank, m.Type)
		}
		ends[i] = m.End
	}
	if len(ends) == 1 && n == 1 {
		// The whole of a single stream: its own end message.
		if ends[0].Batches != total || ends[0].Samples != samples {
			return fmt.Errorf("replay: %s: end message counts %d batches, %d samples; the shards hold %d, %d",
				dir, ends[0].Batches, ends[0].Samples, total, samples)
		}
		return r.write(x.Ranks[0].End)
	}
	e := sink.End{Batches: hi - lo, Samples: samples}
	for i, end := range ends {
		if i == 0 {
			for _, c := range end.Components {
				e.Components = append(e.Components, sink.ComponentCount{Name: c.Name})
			}
		}
		if share.Worker != 0 {
			continue
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
	return r.write(sink.AppendEnd(nil, e))
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
	return nil
}

// batches copies the batches [lo, hi) of x (counted across ranks) and
// returns their sample count.
func (r *replayer) batches(ctx context.Context, dir string, x *Index, lo, hi int64) (int64, error) {
	if lo >= hi {
		return 0, nil
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		return 0, fmt.Errorf("replay: %w", err)
	}
	defer dec.Close()
	var g, samples int64 // g: global number of the shard's first batch
	for _, s := range x.Shards {
		if g+s.Batches <= lo {
			g += s.Batches
			continue
		}
		if g >= hi {
			break
		}
		n, err := r.shard(ctx, dec, dir, s, g, lo, hi)
		samples += n
		if err != nil {
			return samples, err
		}
		g += s.Batches
	}
	return samples, nil
}

// shard copies the batches of shard s (whose first batch is global batch
// g) that fall in [lo, hi), renumbering their seq from lo.
func (r *replayer) shard(ctx context.Context, dec *zstd.Decoder, dir string, s Shard, g, lo, hi int64) (int64, error) {
	f, err := os.Open(filepath.Join(dir, s.File))
	if err != nil {
		return 0, fmt.Errorf("replay: shard %s: %w", s.File, err)
	}
	defer f.Close()
	if err := dec.Reset(f); err != nil {
		return 0, fmt.Errorf("replay: shard %s: %w", s.File, err)
	}
	mr := newMsgReader(dec, s.RawBytes)
	var samples int64
	for k := int64(0); k < s.Batches; k++ {
		if err := ctx.Err(); err != nil {
			return samples, fmt.Errorf("replay: %w", err)
		}
		gi := g + k
		if gi >= hi {
			return samples, nil
		}
		raw, err := mr.next()
		if errors.Is(err, io.EOF) {
			return samples, fmt.Errorf("replay: shard %s ends after %d batches, the index says %d", s.File, k, s.Batches)
		}
		if err != nil {
			return samples, fmt.Errorf("replay: shard %s batch %d: %w", s.File, k, err)
		}
		bi, err := parseBatch(raw)
		if err != nil {
			return samples, fmt.Errorf("replay: shard %s batch %d: %w", s.File, k, err)
		}
		if bi.seq != s.FirstSeq+k {
			return samples, fmt.Errorf("replay: shard %s: batch %d has seq %d, the index says %d", s.File, k, bi.seq, s.FirstSeq+k)
		}
		if gi < lo {
			continue
		}
		samples += bi.size
		if seq := gi - lo; seq != bi.seq {
			r.buf = splice(r.buf[:0], raw, bi.seqStart, bi.seqEnd, mpInt(nil, seq))
			raw = r.buf
		}
		if err := r.write(raw); err != nil {
			return samples, err
		}
	}
	if _, err := mr.next(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = fmt.Errorf("more than the %d batches the index says", s.Batches)
		}
		return samples, fmt.Errorf("replay: shard %s: %w", s.File, err)
	}
	return samples, nil
}

// headerWithShare returns the header message raw with its share map
// replaced.
func headerWithShare(raw []byte, sh sink.Share) ([]byte, error) {
	start, end, err := field(raw, "share")
	if err != nil {
		return nil, err
	}
	if start < 0 {
		return nil, errors.New("no share in the header")
	}
	return splice(nil, raw, start, end, appendShare(nil, sh.Rank, sh.WorldSize, sh.Worker, sh.NumWorkers)), nil
}
