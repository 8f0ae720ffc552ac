package pipeline

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/order"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// trainer serves one training stream: it asks the training order (package
// order) for each epoch's plan, builds the keep index the plan needs,
// decodes and holds the plan's frames (serveBatches) and writes its
// batches, then the end counts.
type trainer struct {
	ctx  context.Context
	srcs []Mix
	so   StreamOptions
	to   TrainOptions
	fp   string
	s    sink.Sink
	ord  *order.Stream

	st   *Stats
	out  trainOut
	hold *holder
	// whole is the keep index of the whole selection, for orders that
	// plan every epoch over it (order.Stream.Shared); keeps builds the
	// indexes of the episodes an epoch names otherwise.
	whole *keepIndex
	keeps *keepMemo
	// myDropped and myErrors are this consumer's share of an epoch's
	// drops and errors over whole: every epoch renders the same frames,
	// so the share is the same.
	myDropped, myErrors int64
	// dropped and errs are the unkept frames counted as this consumer's.
	dropped, errs int64
	cnt           collate.Counts
	// unservedLogged is set once the epoch's unserved frames are stated.
	unservedLogged bool
}

// trainOut is the stream's output: batcher, fillers, parallel encoder and
// the header, written with the first decoded chunk.
type trainOut struct {
	b       *collate.Batcher
	fillers []*filler
	enc     *sink.Encoder
	// headerEpoch and headerBatches are the first epoch's, for the
	// header's training key.
	headerEpoch, headerBatches int64
	headerSet                  bool
}

func train(ctx context.Context, srcs []Mix, so StreamOptions, to TrainOptions, s sink.Sink) (*Stats, error) {
	ts, err := trainSetup(srcs, so, to)
	if err != nil {
		return nil, err
	}
	if to.Shuffle {
		// The byte budget's buffer, then what the spill's lowered.
		logBuffer(srcs, ts.to, ts.asked, ts.mem.BufferSize, ts.sample)
		logSpillBudget(srcs, ts, ts.mem)
	}
	sp, release, err := startSpill(srcs, ts)
	if err != nil {
		return nil, err
	}
	defer release()
	tr, err := newTrainer(ctx, srcs, so, ts, s)
	if err != nil {
		_ = sp.close()
		return nil, err
	}
	tr.hold.spill = sp // nil: opened with the first frame that spills, if any
	defer tr.closeEncoder()
	defer func() { _ = tr.hold.closeSpill() }() // unlinked: closing frees it
	if err := tr.epochs(); err != nil {
		return tr.st, err
	}
	return tr.st, tr.end()
}

// newTrainer places the consumer in the training order (refusing a
// position the run cannot serve) and, for an order over the whole
// selection, builds its keep index (shared through to.Cache).
func newTrainer(ctx context.Context, srcs []Mix, so StreamOptions, ts trainStart, s sink.Sink) (*trainer, error) {
	ord, err := order.New(orderSources(srcs), ts.orderOptions(so))
	if err != nil {
		return nil, explainResume(err, srcs, so, ts)
	}
	to := ts.to
	srcs = trainConfigs(srcs, to)
	keepDecoders(srcs, to)
	tr := &trainer{ctx: ctx, srcs: srcs, so: so, to: to, fp: ts.fp, s: s, ord: ord,
		hold: newHolder(srcs, so.KeepLanguage, to.Spill)}
	if to.Shuffle {
		tr.hold.keepFree(to.BufferSize / max(to.Consumers, 1)) // its share of the buffer
	}
	if spillsAhead(srcs, to) {
		tr.hold.ahead = int32(min(spillAhead(to.BufferSize, to.Consumers), math.MaxInt32))
	}
	tr.out.fillers = make([]*filler, len(srcs))
	if ord.Shared() {
		if tr.whole, err = to.Cache.get(ctx, srcs, ts.fp, to.keepPass); err != nil {
			return nil, err
		}
		tr.myDropped, tr.myErrors = tr.whole.unkeptShare(int64(to.Consumer), int64(to.Consumers))
	} else {
		tr.keeps = newKeepMemo() // keep bits of the episodes seen (keepindex.go)
		tr.keeps.pass = to.keepPass
	}
	tr.st = &Stats{Components: make([]int64, len(srcs[0].Config.Recipe.Components()))}
	return tr, nil
}

// trainConfigs returns srcs with the piece size of their camera streams
// bounded by trainPieceBytes and their video frames held as decoded until
// written (Config.StoredFrames: the shuffle buffer holds and copies half
// the bytes, and the frames are converted once, into their destination);
// configs copied, the order and the output never depend on either.
func trainConfigs(srcs []Mix, to TrainOptions) []Mix {
	out := slices.Clone(srcs)
	for d, m := range out {
		if CameraBytesPerSample(m.Config) == 0 {
			continue
		}
		c := *m.Config
		c.PieceBytes = trainPieceBytes(m.Config, to.BufferBytes, to.Spill != "")
		c.StoredFrames = true
		out[d].Config = &c
	}
	return out
}

// maxKeptDecoders bounds the FFmpeg processes keepDecoders keeps (each an
// FFmpeg process with its decoder state and a few held frames).
const maxKeptDecoders = 32

// keepDecoders lets FFmpeg keep a process per camera of each episode the
// stratified order reads at once (a wave of its partitions), so that each
// episode's next piece continues in the process that decoded its last one
// instead of starting another and seeking: SetupCameras keeps two per
// camera, enough for orders that read one episode at a time. At most
// maxKeptDecoders.
func keepDecoders(srcs []Mix, to TrainOptions) {
	if to.Order != OrderStratified || !to.Shuffle {
		return
	}
	for _, m := range srcs {
		set := m.Config.Cameras
		if set == nil {
			continue
		}
		ff, ok := set.Decoder.(*video.FFmpeg)
		if !ok {
			continue
		}
		per := int64(max(to.Partitions/max(to.Consumers, 1), 1))
		open := min(openEpisodes(to), maxWave(m.Config, to))
		ff.MaxIdle = max(ff.MaxIdle, min(int(per*open)*len(set.Cameras), maxKeptDecoders))
	}
}

// maxWave is the most episodes a partition of to's stratified order holds.
func maxWave(cfg *Config, to TrainOptions) int64 {
	_, eps := selectedMean(cfg)
	P := int64(max(to.Partitions, 1))
	return (eps + P - 1) / P
}

// epochs serves the order's epochs, one plan after another.
func (tr *trainer) epochs() error {
	for {
		ep, ok, err := tr.ord.Next()
		if err != nil || !ok {
			return err
		}
		if ep.Skip {
			tr.noteHeader(ep.Epoch, ep.Batches)
			continue
		}
		idx, srcs, err := tr.index(ep)
		if err != nil {
			return err
		}
		pl, err := ep.Plan(&order.Index{Runs: idx.runs, Keep: idx.keep})
		if err != nil {
			return err
		}
		tr.countUnkept(pl, idx)
		tr.noteUnserved(pl)
		tr.noteHeader(pl.Epoch, pl.Batches)
		if pl.Stop {
			return nil
		}
		if pl.Unkept == order.UnkeptShare && tr.myDropped+tr.myErrors > 0 && srcs[0].Config.Progress != nil {
			srcs[0].Config.Progress(int(tr.myDropped + tr.myErrors))
		}
		err = serveBatches(tr.ctx, srcs, idx, tr.hold, pl.Order, pl.Mine, pl.B, tr.startChunk,
			func(frames []*heldFrame, k int64) error { return tr.emit(pl, frames, k) })
		if err != nil {
			return err
		}
	}
}

// index returns the keep index ep plans over, and the sources its
// positions number: the whole selection's, or a keep index of exactly
// ep.Episodes (the sources narrowed to them).
func (tr *trainer) index(ep *order.Epoch) (*keepIndex, []Mix, error) {
	if ep.Episodes == nil {
		return tr.whole, tr.srcs, nil
	}
	c := *tr.srcs[0].Config
	c.Selection = episodeSelection(ep.Episodes)
	idx, err := tr.keeps.index(tr.ctx, &c, ep.Episodes)
	if err != nil {
		return nil, nil, err
	}
	return idx, []Mix{{Config: &c, Weight: 1}}, nil
}

// countUnkept adds the unkept frames pl counts as this consumer's, and
// states the run's total to a progress display once the first epoch's
// plan is known.
func (tr *trainer) countUnkept(pl *order.Plan, idx *keepIndex) {
	share := tr.myDropped + tr.myErrors
	switch pl.Unkept {
	case order.UnkeptShare:
		tr.dropped += tr.myDropped
		tr.errs += tr.myErrors
	case order.UnkeptIndex:
		tr.dropped += idx.stats.Dropped
		tr.errs += idx.stats.Errors
	case order.UnkeptRuns:
		d, e := idx.unkeptIn(pl.Owned)
		tr.dropped += d
		tr.errs += e
	}
	cfg := tr.srcs[0].Config
	if cfg.ProgressTotal == nil || !pl.Uniform || pl.Epoch != tr.ord.Start().Epoch {
		return
	}
	// Progress counts served frames plus this share's unkept ones (as the
	// end counts do); every later epoch is alike.
	per := pl.Frames
	if pl.Unkept == order.UnkeptShare {
		per += share
	}
	total := int64(0)
	if tr.to.Epochs > 0 {
		total = per + (tr.to.Epochs-pl.Epoch-1)*(pl.EpochFrames+share)
	}
	cfg.ProgressTotal(total)
}

// noteUnserved logs (debug), once per stream, how many of an epoch's
// frames no consumer serves (order.Plan.Unserved: the last global batches that
// cannot go to every consumer alike, and the frames short of a batch), so
// that what an epoch leaves out is never silent; Stats.Unserved sums them
// over the epochs planned.
func (tr *trainer) noteUnserved(pl *order.Plan) {
	tr.st.Unserved += pl.Unserved
	if tr.unservedLogged || pl.Stop {
		return
	}
	tr.unservedLogged = true
	log := tr.to.Log
	if log == nil {
		log = slog.Default()
	}
	log.Debug("training epoch: frames no consumer serves (the last global batches that cannot go to every consumer alike, and the frames short of a batch; with --shuffle different ones each epoch)",
		"epoch", pl.Epoch, "unserved_frames", pl.Unserved, "global_batches", pl.Batches, "consumers", tr.to.Consumers, "batch_size", pl.B)
}

// noteHeader records the first epoch's figures for the header, until it
// is written.
func (tr *trainer) noteHeader(epoch, batches int64) {
	if !tr.out.headerSet {
		tr.out.headerEpoch, tr.out.headerBatches = epoch, batches
	}
}

// startChunk sets the stream up at its first decoded chunk and returns
// the fillers (serveBatches).
func (tr *trainer) startChunk(c *Chunk) ([]*filler, error) {
	if !tr.out.headerSet {
		if err := tr.startStream(chunkFeatures(c)); err != nil {
			return nil, err
		}
	}
	return tr.out.fillers, nil
}

// startStream makes the fillers and the batcher for the stream's features
// and writes the header.
func (tr *trainer) startStream(features []collate.Feature) error {
	srcs, so, to := tr.srcs, tr.so, tr.to
	for d, m := range srcs {
		var err error
		if tr.out.fillers[d], err = newStreamFiller(m.Config, features); err != nil {
			return err
		}
	}
	var strs []string
	if len(srcs) > 1 {
		strs = []string{"dataset"}
	}
	b, err := collate.NewBatcher(collate.Config{
		BatchSize: so.BatchSize, Features: tr.out.fillers[0].out, KeepLanguage: so.KeepLanguage, Strings: strs,
	})
	if err != nil {
		return err
	}
	tr.out.b, tr.out.headerSet = b, true
	// With a msgpack sink and several workers, batches are encoded in
	// parallel and written in order (same bytes as s.Batch one by one).
	cfg := srcs[0].Config
	if es, ok := tr.s.(sink.EncodedSink); ok && workerCount(cfg) > 1 {
		tr.out.enc = sink.NewEncoder(es, workerCount(cfg), b.Recycle)
	}
	h := Header(cfg, so, b)
	h.Share = to.headerShare()
	h.Strings = strs
	h.Training = &sink.Training{Fingerprint: tr.fp, Epoch: tr.out.headerEpoch, EpochBatches: tr.out.headerBatches, Consumers: int64(to.Consumers)}
	if len(srcs) > 1 {
		var ids, revs []string
		for _, m := range srcs {
			ids = append(ids, m.Config.Dataset.ID)
			revs = append(revs, m.Config.Dataset.Revision)
		}
		h.Dataset, h.Revision = strings.Join(ids, ","), mixRevision(revs)
		cfgs := make([]*Config, len(srcs))
		for i, m := range srcs {
			cfgs[i] = m.Config
		}
		h.Pins = headerPins(cfgs...)
	}
	return tr.s.Header(h)
}

// emit collates and writes batch k of pl.
func (tr *trainer) emit(pl *order.Plan, frames []*heldFrame, k int64) error {
	b := tr.out.b
	bt, err := tr.hold.batchOf(b, frames)
	if err != nil {
		return err
	}
	for _, f := range frames {
		r := f.result()
		tr.st.countKept(&r)
	}
	tr.cnt.Batches++
	tr.cnt.Kept += int64(bt.N)
	meta := sink.BatchMeta{Seq: pl.Seq(k), Epoch: pl.Epoch, Resume: pl.After(k).Token(tr.fp)}
	if tr.out.enc != nil {
		err = tr.out.enc.Batch(bt, meta)
	} else {
		err = tr.s.Batch(bt, meta)
		b.Recycle(bt)
	}
	if p := tr.srcs[0].Config.Progress; p != nil {
		p(len(frames))
	}
	return err
}

// closeEncoder waits for the batches being encoded (after an error).
func (tr *trainer) closeEncoder() {
	if tr.out.enc != nil {
		tr.out.enc.Close()
	}
}

// end writes the header of a stream that served no batch, waits for the
// batches being encoded and writes the end counts: this consumer's,
// summed over the epochs it served (docs/wire-format.md, "end"): frames =
// rendered + passthrough + dropped + errors.
func (tr *trainer) end() error {
	cfg, st := tr.srcs[0].Config, tr.st
	if !tr.out.headerSet {
		if err := tr.startStream(infoFeatures(cfg)); err != nil {
			return err
		}
	}
	if enc := tr.out.enc; enc != nil {
		// Every batch is written before End touches the sink.
		tr.out.enc = nil
		if err := enc.Close(); err != nil {
			return err
		}
	}
	st.HeldPeak = int64(tr.hold.peak)
	if sp := tr.hold.spill; sp != nil {
		st.SpillPeak = sp.peak
	}
	st.Dropped, st.Errors = tr.dropped, tr.errs
	st.Frames += tr.dropped + tr.errs
	if tr.whole != nil {
		st.Skipped = tr.whole.stats.Skipped
	}
	e := sink.End{
		Frames: st.Frames, Rendered: st.Rendered, Passthrough: st.Passthrough,
		Dropped: tr.dropped, Errors: tr.errs,
		Batches: tr.cnt.Batches, Samples: tr.cnt.Kept,
	}
	if cfg.Recipe.IsBlend() {
		for i, name := range cfg.Recipe.Components() {
			e.Components = append(e.Components, sink.ComponentCount{Name: name, Count: st.Components[i]})
		}
	}
	return tr.s.End(e)
}
