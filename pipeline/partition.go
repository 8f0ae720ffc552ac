package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

// Training orders (TrainOptions.Order).
const (
	// OrderGlobal renders the whole selection once (language columns) to
	// learn which frames are kept, builds one global order and gives
	// consumer c of C every C-th global batch. Every consumer reads the
	// whole selection.
	OrderGlobal = "global"
	// OrderPartitioned cuts each epoch's permuted episodes into a fixed
	// number of canonical partitions; a consumer reads only its own
	// partitions' episodes.
	OrderPartitioned = "partitioned"
)

// DefaultPartitions is the default number of canonical partitions of the
// partitioned order: 120 is divided by 1, 2, 3, 4, 5, 6, 8, 10, 12, 15,
// 20, 24, 30, 40, 60 and 120 consumers.
const DefaultPartitions = 120

// partitionEpisodes permutes the selected episodes of cfg for epoch and
// cuts them, in permuted order, into P partitions of about equal frame
// counts (from the episodes index: nothing is read). It returns each
// partition's episodes in streaming order and its frame count.
func partitionEpisodes(cfg *Config, seed uint64, epoch int64, P int) ([][]int64, []int64) {
	var eps, lens []int64
	var total int64
	for _, e := range cfg.Dataset.Episodes {
		if cfg.Selection.Contains(e.Index) {
			eps = append(eps, e.Index)
			lens = append(lens, e.Length)
		}
	}
	perm := make([]int, len(eps))
	for i := range perm {
		perm[i] = i
	}
	sel := fmt.Sprintf("%v|%v", cfg.Selection.Episodes, cfg.Selection.Exclude)
	shuffleInts(newOrderRNG("partition", seed, epoch, cfg.Dataset.Revision, sel), perm)
	for _, l := range lens {
		total += l
	}
	parts := make([][]int64, P)
	frames := make([]int64, P)
	var acc int64
	for k, i := range perm {
		// An episode goes to the partition its midpoint falls in, so
		// partitions split at episode boundaries near total*p/P.
		mid := acc + lens[i]/2
		p := int64(0)
		if total > 0 {
			p = mid * int64(P) / total
		} else {
			p = int64(k) * int64(P) / int64(len(perm))
		}
		p = min(p, int64(P-1))
		parts[p] = append(parts[p], eps[i])
		frames[p] += lens[i]
		acc += lens[i]
	}
	return parts, frames
}

// DefaultPartitionOpen is the default TrainOptions.PartitionOpen: each
// partition reads 4 of its episodes at a time (docs/training.md, "Which
// order, and shuffle quality").
const DefaultPartitionOpen = 4

// partitionOrder is partition p's epoch order: its episodes (runs, in
// partition order) are permuted and their kept frames enter its share of
// the shuffle buffer, ceil(BufferSize/P) frames (the P partitions advance
// together in the round-robin, so the shares add up to one buffer), from
// to.PartitionOpen episodes at a time (streamOrder). It depends on the
// partition, never on the consumer reading it.
func partitionOrder(runs []episodeRun, keep []bool, to TrainOptions, p int, epoch int64, revision, sel string) []int32 {
	P := max(to.Partitions, 1)
	buf := max(1, (to.BufferSize+P-1)/P)
	return streamOrder(runs, keep, to.Shuffle, buf, to.PartitionOpen,
		newOrderRNG(fmt.Sprintf("partition-%d", p), to.Seed, epoch, revision, sel))
}

// episodeSelection is the selection of exactly eps, as ranges of
// consecutive episodes; no episode gives a selection of nothing (an empty
// Episodes list would mean everything).
func episodeSelection(eps []int64) shard.Selection {
	s := slices.Clone(eps)
	slices.Sort(s)
	out := shard.Selection{Episodes: shard.Ranges{}}
	for _, e := range s {
		if k := len(out.Episodes); k > 0 && out.Episodes[k-1].Hi+1 == e {
			out.Episodes[k-1].Hi = e
			continue
		}
		out.Episodes = append(out.Episodes, shard.Range{Lo: e, Hi: e})
	}
	if len(out.Episodes) == 0 {
		out.Episodes = shard.Ranges{{Lo: -1, Hi: -1}}
	}
	return out
}

// slot returns a consumer's place in the round-robin of the partitioned
// order: worker-major, slot = worker*worldSize + rank, so that global
// batch g is step g/worldSize of rank g%worldSize whatever num_workers is.
func slot(to TrainOptions) (int, error) {
	R := to.WorldSize
	if R < 1 {
		R = 1
	}
	C := to.Consumers
	if C%R != 0 {
		return 0, fmt.Errorf("%d consumers is not a multiple of world size %d", C, R)
	}
	W := C / R
	rank, worker := to.Consumer/W, to.Consumer%W
	return worker*R + rank, nil
}

// trainPartitioned is train for OrderPartitioned (one dataset).
//
// Per epoch the selected episodes are permuted and cut into P partitions
// balanced by frames (partitionEpisodes). Partition p streams its
// episodes, in that order, through its own shuffle buffer of
// ceil(BufferSize/P) frames (epochOrder),
// and serves exactly nbp = floor(min over partitions of metadata frames /
// batch size) full batches; the frames of a partition beyond nbp batches
// are not served that epoch. The global batch sequence is round-robin over
// partitions: global batch g is batch g/P of partition g%P. Consumer slot
// s of C (see slot; C must divide P) serves partitions s, s+C, ..., in
// round-robin, so its own batch j is global batch j*C+s. A resume token
// holds the number of global batches consumed, which resumes exactly on
// any shape whose C divides P.
func trainPartitioned(ctx context.Context, cfg *Config, so StreamOptions, to TrainOptions, s sink.Sink, fp string, start token) (*Stats, error) {
	P := to.Partitions
	C := to.Consumers // divides P (trainSetup)
	sl, err := slot(to)
	if err != nil {
		return nil, err
	}
	// A hello position (epoch, next): this stream serves rank-sequence
	// indices next, next+W, ... of one epoch. Index m is own batch m/W of
	// the rank's worker m%W (slot (m%W)*R + rank), so they are all own
	// batches of one slot, from next/W on: the stream serves that slot's
	// partitions (whichever worker asks; the workers of a rank asking
	// next+w for w = 0..W-1 get distinct slots).
	pos := to.Position
	var posW int64
	if pos != nil {
		R := max(to.WorldSize, 1)
		posW = int64(max(to.Workers, 1))
		switch {
		case to.Resume != "":
			return nil, errors.New("a position (epoch, next) and a resume token cannot both be given")
		case int64(C) != int64(R)*posW:
			return nil, fmt.Errorf("%d consumers is not world size %d × %d workers", C, R, posW)
		case pos.Fingerprint != "" && pos.Fingerprint != fp:
			return nil, errors.New("resume position belongs to a different run (dataset revision, recipe, selection, mode, shuffle, seed, order, partitions or batch options differ)")
		case to.Epochs != 0 && pos.Epoch >= to.Epochs:
			return nil, fmt.Errorf("epoch %d asked for, but the server runs --epochs %d (epochs 0..%d)", pos.Epoch, to.Epochs, to.Epochs-1)
		}
		rank := int64(to.Consumer) / posW
		sl = int(pos.Next%posW)*R + int(rank)
		start = token{Version: 1, Epoch: pos.Epoch, Fingerprint: fp}
	}
	B := int64(so.BatchSize)
	var headerEpoch, headerBatches int64
	st := &Stats{Components: make([]int64, len(cfg.Recipe.Components()))}
	var b *collate.Batcher
	var fill *filler
	var cnt collate.Counts
	var dropped, failed int64
	startStream := func(features []collate.Feature) error {
		var err error
		if fill, err = newStreamFiller(cfg, features); err != nil {
			return err
		}
		if b, err = collate.NewBatcher(collate.Config{BatchSize: so.BatchSize, Features: fill.out, KeepLanguage: so.KeepLanguage}); err != nil {
			return err
		}
		h := Header(cfg, so, b)
		h.Share = to.headerShare()
		h.Training = &sink.Training{Fingerprint: fp, Epoch: headerEpoch, EpochBatches: headerBatches, Consumers: int64(C)}
		return s.Header(h)
	}
	fillers := []*filler{nil}
	hold := newHolder([]Mix{{Config: cfg, Weight: 1}}, so.KeepLanguage)
	keeps := newKeepMemo() // keep bits of the episodes seen (keepindex.go)
	keeps.pass = to.keepPass
	for epoch := start.Epoch; to.Epochs == 0 || epoch < to.Epochs; epoch++ {
		parts, frames := partitionEpisodes(cfg, to.Seed, epoch, P)
		nbp := slices.Min(frames) / B
		if nbp == 0 {
			neps := 0
			for _, p := range parts {
				neps += len(p)
			}
			return st, fmt.Errorf("--order partitioned: the smallest of %d partitions has %d frames, less than one batch of %d (partitions hold whole episodes, and the selection has %d episodes of %d frames: use fewer --partitions or a smaller --batch-size)", P, slices.Min(frames), B, neps, sum64(frames))
		}
		if pos != nil && epoch > pos.Epoch {
			break
		}
		if b == nil {
			headerEpoch, headerBatches = epoch, nbp*int64(P)
		}
		perCons := nbp * int64(P/C) // own batches per epoch
		first := int64(0)
		if epoch == start.Epoch && start.Batch > 0 {
			// The first own batch j with j*C+sl >= start.Batch.
			first = max(0, (start.Batch-int64(sl)+int64(C)-1)/int64(C))
		}
		if pos != nil {
			first = pos.Next / posW
		}
		if first >= perCons {
			continue
		}
		// Read only this consumer's partitions' episodes.
		var mineEps []int64
		for p := sl; p < P; p += C {
			mineEps = append(mineEps, parts[p]...)
		}
		c := *cfg
		c.Selection = episodeSelection(mineEps)
		idx, err := keeps.index(ctx, &c, mineEps)
		if err != nil {
			return st, err
		}
		dropped += idx.stats.Dropped
		failed += idx.stats.Errors
		runOf := map[int64][]episodeRun{}
		for _, r := range idx.runs[0] {
			runOf[r.episode] = append(runOf[r.episode], r)
		}
		sel := fmt.Sprintf("%v|%v", cfg.Selection.Episodes, cfg.Selection.Exclude)
		// This consumer's batches in order: own batch j comes from its
		// partition j%(P/C), batch j/(P/C) of that partition. Each
		// partition's order is copied in as soon as it is computed, so
		// one partition's order is held besides this consumer's.
		per := int64(P / C)
		order := make([]int32, perCons*B)
		for q, p := int64(0), sl; p < P; q, p = q+1, p+C {
			var runs []episodeRun
			for _, e := range parts[p] {
				runs = append(runs, runOf[e]...)
			}
			o := partitionOrder(runs, idx.keep, to, p, epoch, cfg.Dataset.Revision, sel)
			if int64(len(o)) < nbp*B {
				return st, fmt.Errorf("--order partitioned: epoch %d partition %d keeps %d frames, fewer than the %d batches of %d every partition serves (frames dropped by rendering; use --mode fallback or fewer partitions)", epoch, p, len(o), nbp, B)
			}
			for r := int64(0); r < nbp; r++ {
				j := r*per + q
				copy(order[j*B:(j+1)*B], o[r*B:(r+1)*B])
			}
		}
		var mine []int64
		for j := first; j < perCons; j++ {
			mine = append(mine, j)
		}
		start := func(ch *Chunk) ([]*filler, error) {
			if b == nil {
				if err := startStream(chunkFeatures(ch)); err != nil {
					return nil, err
				}
				fillers[0] = fill
			}
			return fillers, nil
		}
		err = serveBatches(ctx, []Mix{{Config: &c, Weight: 1}}, idx, hold, order, mine, B, start, func(fr []*heldFrame, j int64) error {
			bt, err := hold.batchOf(b, fr)
			if err != nil {
				return err
			}
			for _, f := range fr {
				r := f.result()
				st.countKept(&r)
			}
			cnt.Batches++
			cnt.Kept += int64(bt.N)
			next := token{Version: 1, Epoch: epoch, Batch: j*int64(C) + int64(sl) + 1, Fingerprint: fp}
			if next.Batch >= nbp*int64(P) {
				next = token{Version: 1, Epoch: epoch + 1, Fingerprint: fp}
			}
			meta := sink.BatchMeta{Seq: epoch*perCons + j, Epoch: epoch, Resume: next.encode()}
			if pos != nil {
				// The batch's index in the rank's sequence of the epoch.
				meta.Seq = j*posW + int64(sl)/int64(max(to.WorldSize, 1))
			}
			err = s.Batch(bt, meta)
			b.Recycle(bt)
			if cfg.Progress != nil {
				cfg.Progress(len(fr))
			}
			return err
		})
		if err != nil {
			return st, err
		}
	}
	if b == nil {
		if err := startStream(infoFeatures(cfg)); err != nil {
			return st, err
		}
	}
	st.HeldPeak = int64(hold.peak)
	e := sink.End{
		Frames: st.Frames, Rendered: st.Rendered, Passthrough: st.Passthrough,
		Dropped: dropped, Errors: failed, Batches: cnt.Batches, Samples: cnt.Kept,
	}
	if cfg.Recipe.IsBlend() {
		for i, name := range cfg.Recipe.Components() {
			e.Components = append(e.Components, sink.ComponentCount{Name: name, Count: st.Components[i]})
		}
	}
	return st, s.End(e)
}

var errPartitionedMix = errors.New("--order partitioned streams one dataset: for a mixture of several --dataset use --order global (the default; every consumer reads each dataset's selection), or train on each dataset's partitioned stream separately (docs/training.md, \"Mixtures and the partitioned order\")")

// sum64 returns the sum of xs.
func sum64(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}
