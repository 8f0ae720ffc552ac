package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

// TrainOptions turn a single sequential pass into training-grade
// iteration: a deterministic global order (optionally shuffled), several
// epochs, consumers (ranks × dataloader workers) that each get every C-th
// global batch, and resumption from a token.
type TrainOptions struct {
	// Shuffle permutes episodes and mixes frames across episodes through a
	// shuffle buffer of BufferSize frames; Seed fixes the order.
	Shuffle    bool
	Seed       uint64
	BufferSize int
	// BufferBytes is the shuffle buffer's memory budget: BufferSize is
	// lowered so that its frames take at most BufferBytes at SampleBytes
	// each (metadata only, so the order is the same for every consumer).
	// 0 means DefaultBufferBytes, a negative value no budget.
	BufferBytes int64
	// Epochs is the number of passes; 0 means forever.
	Epochs int64
	// Log gets the iteration's warnings (the shuffle buffer lowered to
	// its byte budget...); nil: slog.Default().
	Log *slog.Logger
	// Consumer is this stream's consumer number, rank*num_workers+worker,
	// of Consumers = world_size*num_workers.
	Consumer, Consumers int
	// Resume is a token from a batch of an earlier run ("" to start at
	// the beginning).
	Resume string
	// Position, when set, serves a single epoch from an exact place in the
	// rank's batch sequence (a socket hello's "epoch"/"next"): the rank's
	// batches are its consumers' global batches in increasing order (what a
	// DataLoader's worker round-robin yields), and this stream serves the
	// rank-sequence indices Next, Next+Workers, Next+2*Workers, … of
	// Epoch. Resume must be empty.
	Position *sink.Position
	// Workers is num_workers per rank (Consumers = world_size × Workers),
	// needed with Position; 0 means 1.
	Workers int
	// Order is OrderGlobal ("" too) or OrderPartitioned; Partitions is
	// the number of canonical partitions of the partitioned order
	// (DefaultPartitions when 0), which Consumers must divide.
	Order      string
	Partitions int
	// PartitionOpen is how many of its episodes a partition of the
	// partitioned order reads at a time, their frames entering its buffer
	// share in random turns (DefaultPartitionOpen when 0): more mixes
	// better, and holds that many episodes per partition decoded.
	PartitionOpen int
	// WorldSize is the number of ranks among Consumers (Consumer is
	// rank*(Consumers/WorldSize)+worker): the header's share names the
	// consumer by rank and worker; of the orders only the partitioned one
	// uses it, to place consumers worker-major in its round-robin. 0 means 1.
	WorldSize int
	// Cache, when set, shares the pre-pass (which frames are kept) between
	// the streams of one process, such as the clients of `serve`.
	Cache *IndexCache

	// keepPass forces the keep pass even when the keep index follows from
	// metadata (keepsEveryFrame; tests compare the two).
	keepPass bool
}

// IndexCache remembers the keep index of each run configuration, so that
// the many streams of one server (ranks × dataloader workers) render the
// selection's language once instead of once per client. It is safe for
// concurrent use; the zero value is ready.
type IndexCache struct {
	mu sync.Mutex
	m  map[string]*cachedIndex
}

type cachedIndex struct {
	once sync.Once
	idx  *keepIndex
	err  error
}

// get returns the keep index for srcs, building it once per key. A nil
// cache builds it every time. Failed builds are not kept.
func (c *IndexCache) get(ctx context.Context, srcs []Mix, key string, pass bool) (*keepIndex, error) {
	if c == nil {
		return keepIndexOf(ctx, srcs, pass)
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*cachedIndex{}
	}
	e := c.m[key]
	if e == nil {
		e = &cachedIndex{}
		c.m[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.idx, e.err = keepIndexOf(ctx, srcs, pass) })
	if e.err != nil {
		c.mu.Lock()
		if c.m[key] == e {
			delete(c.m, key)
		}
		c.mu.Unlock()
		// Another stream's build was cancelled (its client left): build
		// again for this one.
		if ctx.Err() == nil && (errors.Is(e.err, context.Canceled) || errors.Is(e.err, context.DeadlineExceeded)) {
			return c.get(ctx, srcs, key, pass)
		}
	}
	return e.idx, e.err
}

// DefaultBufferSize is the default shuffle buffer, in frames.
const DefaultBufferSize = 16384

// keepIndex is the result of the pre-pass (or of metadata alone, see
// metaKeepIndex): which frames of the selection
// are kept (rendered or passed through), and where each frame lives.
// Positions number the selected frames of every source, source after
// source, in plan order.
type keepIndex struct {
	units     [][]shard.Unit // unit groups (see groupUnits)
	src       []int          // source of each unit group
	unitStart []int64        // first position of each group; len(units)+1 entries
	runs      [][]episodeRun // per source
	keep      []bool
	failed    []int64 // positions whose rendering failed, ascending
	stats     Stats
	// meta is set when the index was built from metadata (metaKeepIndex):
	// every frame kept, and the rows served are checked against runs.
	meta bool
}

// unkeptShare counts the frames of one epoch that are not kept and belong
// to consumer c of C: dropped and failed frames at positions p with
// p mod C == c (docs/wire-format.md, "end"). Over the C consumers the
// shares add up to the selection's drops and errors.
func (x *keepIndex) unkeptShare(c, C int64) (dropped, errs int64) {
	fi := 0
	for p, k := range x.keep {
		if k {
			continue
		}
		failed := fi < len(x.failed) && x.failed[fi] == int64(p)
		if failed {
			fi++
		}
		if int64(p)%C != c {
			continue
		}
		if failed {
			errs++
		} else {
			dropped++
		}
	}
	return dropped, errs
}

// buildKeepIndex renders every source's selection once, reading only the
// language columns, to learn which frames are kept. Rendering is
// deterministic, so the answer holds for every epoch.
func buildKeepIndex(ctx context.Context, srcs []Mix) (*keepIndex, error) {
	idx := &keepIndex{runs: make([][]episodeRun, len(srcs))}
	var pos int64
	for d, m := range srcs {
		c := *m.Config
		c.Features = []string{}
		c.Share = Share{}
		c.Progress = nil
		// Which frames are kept depends on rendering only: no camera
		// frames here (a camera failure at serve time is an error,
		// batchOf).
		c.Cameras, c.Images = nil, nil
		err := runGroups(ctx, &c, func(g []shard.Unit, ch *Chunk) error {
			if err := idx.stats.Count(&c, ch); err != nil {
				return err
			}
			idx.units = append(idx.units, g)
			idx.src = append(idx.src, d)
			idx.unitStart = append(idx.unitStart, pos)
			b := ch.Batch
			runs := idx.runs[d]
			for i := range ch.Results {
				switch ch.Results[i].Outcome {
				case render.Rendered, render.Passthrough:
					idx.keep = append(idx.keep, true)
				case render.Failed:
					idx.keep = append(idx.keep, false)
					idx.failed = append(idx.failed, pos)
				default:
					idx.keep = append(idx.keep, false)
				}
				ep := b.EpisodeIndex[i]
				if k := len(runs); k > 0 && runs[k-1].episode == ep && runs[k-1].start+runs[k-1].len == pos {
					runs[k-1].len++
				} else {
					runs = append(runs, episodeRun{episode: ep, start: pos, len: 1})
				}
				pos++
			}
			if pos > maxPositions {
				return errTooManyPositions
			}
			idx.runs[d] = runs
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	idx.unitStart = append(idx.unitStart, pos)
	return idx, nil
}

// unitOf returns the unit holding position p.
func (x *keepIndex) unitOf(p int64) int {
	return sort.Search(len(x.units), func(i int) bool { return x.unitStart[i+1] > p })
}

// token is the decoded form of a resume token: continue with global batch
// Batch of epoch Epoch, in the order identified by Fingerprint.
type token struct {
	Version     int    `json:"v"`
	Epoch       int64  `json:"e"`
	Batch       int64  `json:"b"`
	Fingerprint string `json:"f"`
}

func (t token) encode() string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseToken(s string) (token, error) {
	var t token
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.Version != 1 || t.Epoch < 0 || t.Batch < 0 {
		return t, fmt.Errorf("invalid resume token %q", s)
	}
	return t, nil
}

// Mix is one dataset of a mixture, with its sampling weight and the name
// its samples are tagged with (the "dataset" column).
type Mix struct {
	Config *Config
	Weight float64
	Name   string
}

// fingerprint identifies everything the global order and the batches
// depend on; a resume token only applies to a run with the same one.
func fingerprint(srcs []Mix, so StreamOptions, to TrainOptions) string {
	h := sha256.New()
	for _, m := range srcs {
		cfg := m.Config
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00%t\x00%s\x00%s\x00%v\x00%t\x00%v\x00%v\x00%v\x00%s\x00",
			cfg.Dataset.ID, cfg.Dataset.Revision, cfg.Recipe.SHA256(), cfg.Mode, cfg.NoTaskAug,
			cfg.Selection.Episodes, cfg.Selection.Exclude, cfg.Features, cfg.SkipErrors, cfg.Deltas, cfg.Tolerance, m.Weight, m.Name)
	}
	fmt.Fprintf(h, "%t\x00%d\x00%d\x00%d\x00%t\x00%t", to.Shuffle, to.Seed, to.BufferSize, so.BatchSize, so.DropLast, so.KeepLanguage)
	if to.Order == OrderPartitioned {
		fmt.Fprintf(h, "\x00%s\x00%d\x00%d", to.Order, to.Partitions, to.PartitionOpen)
	}
	sum := h.Sum(nil)
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// Train streams cfg's selection as training batches: per epoch, the kept
// frames in the global order (TrainOptions), cut into global batches of
// so.BatchSize; consumer c of C gets global batches c, c+C, c+2C, ... so
// that the sequence of global batches, and thus the data order of a
// training run, does not depend on C. Every consumer gets the same number
// of batches per epoch, floor(batches/C): the last batches%C global batches
// of an epoch are not served (with reshuffling, different ones each epoch).
// Every batch carries a resume token continuing right after it.
func Train(ctx context.Context, cfg *Config, so StreamOptions, to TrainOptions, s sink.Sink) (*Stats, error) {
	return TrainMix(ctx, []Mix{{Config: cfg, Weight: 1}}, so, to, s)
}

// TrainMix is Train over a weighted mixture of datasets: each epoch's
// per-dataset orders are interleaved by weight until the first dataset
// runs out, and with several datasets every sample carries its dataset's
// name in the "dataset" string column. The datasets must have the same
// numeric features (names, dtypes, shapes) and share the recipe.
func TrainMix(ctx context.Context, srcs []Mix, so StreamOptions, to TrainOptions, s sink.Sink) (*Stats, error) {
	st, err := train(ctx, srcs, so, to, s)
	if err != nil {
		_ = s.Fail(err)
	}
	return st, err
}

// checkMix validates a mixture's datasets against each other.
func checkMix(srcs []Mix) error {
	if len(srcs) == 0 {
		return errors.New("no dataset")
	}
	want := infoFeatures(srcs[0].Config)
	for _, m := range srcs {
		if m.Weight <= 0 || math.IsNaN(m.Weight) || math.IsInf(m.Weight, 0) {
			return fmt.Errorf("dataset %s: weight %v must be positive", m.Config.Dataset.ID, m.Weight)
		}
		if m.Config.Recipe != srcs[0].Config.Recipe {
			return errors.New("mixed datasets must share one recipe")
		}
		got := infoFeatures(m.Config)
		if len(got) != len(want) {
			return fmt.Errorf("datasets %s and %s cannot be mixed: numeric features %s vs %s",
				srcs[0].Config.Dataset.ID, m.Config.Dataset.ID, featureList(want), featureList(got))
		}
		for i := range got {
			if got[i].Name != want[i].Name || got[i].DType != want[i].DType || !slices.Equal(got[i].Shape, want[i].Shape) {
				return fmt.Errorf("datasets %s and %s cannot be mixed: feature %s%v %s vs %s%v %s",
					srcs[0].Config.Dataset.ID, m.Config.Dataset.ID, want[i].Name, want[i].Shape, want[i].DType, got[i].Name, got[i].Shape, got[i].DType)
			}
		}
	}
	return checkMixCameras(srcs)
}

func featureList(fs []collate.Feature) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%s%v %s", f.Name, f.Shape, f.DType))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// trainStart is train's options completed by trainSetup.
type trainStart struct {
	to    TrainOptions
	fp    string // the run's fingerprint (resume tokens)
	start token  // where a resume token continues (zero: from the start)
	// asked is the --shuffle-buffer asked for, sample the bytes per
	// sample that lowered it (shuffling only; for logBuffer).
	asked  int
	sample int64
}

// trainSetup completes to's defaults and refuses, before anything is
// read, what train would refuse before its first batch: consumer, mixture,
// order, partitions, resume token. It logs nothing.
func trainSetup(srcs []Mix, so StreamOptions, to TrainOptions) (trainStart, error) {
	var ts trainStart
	if to.Consumers < 1 {
		to.Consumers = 1
	}
	if to.Consumer < 0 || to.Consumer >= to.Consumers {
		return ts, fmt.Errorf("consumer %d of %d", to.Consumer, to.Consumers)
	}
	if to.BufferSize <= 0 {
		to.BufferSize = DefaultBufferSize
	}
	if err := checkMix(srcs); err != nil {
		return ts, err
	}
	switch to.Order {
	case "", OrderGlobal:
	case OrderPartitioned:
		if to.Partitions <= 0 {
			to.Partitions = DefaultPartitions
		}
		if len(srcs) > 1 {
			return ts, errPartitionedMix
		}
	default:
		return ts, fmt.Errorf("unknown order %q (want %s or %s)", to.Order, OrderGlobal, OrderPartitioned)
	}
	if to.BufferBytes == 0 {
		to.BufferBytes = DefaultBufferBytes
	}
	if to.Shuffle {
		// The buffer in frames, within its byte budget; the fingerprint
		// holds the frames, which is what the order depends on.
		ts.asked = to.BufferSize
		to.BufferSize, ts.sample = bufferFrames(srcs, to)
		if to.Order == OrderPartitioned && to.PartitionOpen <= 0 {
			to.PartitionOpen = partitionOpen(srcs[0].Config, to, ts.sample)
		}
	}
	if to.Order == OrderPartitioned && to.PartitionOpen <= 0 {
		to.PartitionOpen = DefaultPartitionOpen
	}
	fp := fingerprint(srcs, so, to)
	var start token
	if to.Resume != "" {
		var err error
		if start, err = parseToken(to.Resume); err != nil {
			return ts, err
		}
		if start.Fingerprint != fp {
			return ts, errors.New("resume token belongs to a different run (dataset revision, recipe, selection, mode, shuffle, seed, order, partitions or batch options differ)")
		}
	}
	if to.Order == OrderPartitioned {
		if to.Partitions%to.Consumers != 0 {
			return ts, fmt.Errorf("--order partitioned: %d consumers (world size × workers) must divide --partitions %d", to.Consumers, to.Partitions)
		}
		if _, err := slot(to); err != nil {
			return ts, err
		}
	}
	ts.to, ts.fp, ts.start = to, fp, start
	return ts, nil
}

func train(ctx context.Context, srcs []Mix, so StreamOptions, to TrainOptions, s sink.Sink) (*Stats, error) {
	ts, err := trainSetup(srcs, so, to)
	if err != nil {
		return nil, err
	}
	if to.Shuffle {
		logBuffer(srcs, ts.to, ts.asked, ts.to.BufferSize, ts.sample)
	}
	to, fp, start := ts.to, ts.fp, ts.start
	cfg := srcs[0].Config
	mixed := len(srcs) > 1
	if to.Order == OrderPartitioned {
		return trainPartitioned(ctx, cfg, so, to, s, fp, start)
	}
	pos := to.Position
	W := int64(max(to.Workers, 1))
	if pos != nil {
		switch {
		case to.Resume != "":
			return nil, errors.New("a position (epoch, next) and a resume token cannot both be given")
		case int64(to.Consumers)%W != 0:
			return nil, fmt.Errorf("%d consumers is not a multiple of %d workers per rank", to.Consumers, W)
		case pos.Fingerprint != "" && pos.Fingerprint != fp:
			return nil, errors.New("resume position belongs to a different run (dataset revision, recipe, selection, mode, shuffle, seed or batch options differ)")
		case to.Epochs != 0 && pos.Epoch >= to.Epochs:
			return nil, fmt.Errorf("epoch %d asked for, but the server runs --epochs %d (epochs 0..%d)", pos.Epoch, to.Epochs, to.Epochs-1)
		}
		start = token{Version: 1, Epoch: pos.Epoch, Fingerprint: fp}
	}
	idx, err := to.Cache.get(ctx, srcs, fp, to.keepPass)
	if err != nil {
		return nil, err
	}
	st := &Stats{Components: make([]int64, len(cfg.Recipe.Components()))}
	// With a msgpack sink and several workers, batches are encoded in
	// parallel and written in order (same bytes as s.Batch one by one).
	var enc *sink.Encoder
	es, parallel := s.(sink.EncodedSink)
	parallel = parallel && workerCount(cfg) > 1
	defer func() {
		if enc != nil {
			enc.Close()
		}
	}()
	var b *collate.Batcher
	fillers := make([]*filler, len(srcs))
	var headerDone bool
	var cnt collate.Counts
	var strs []string
	if mixed {
		strs = []string{"dataset"}
	}
	var headerEpoch, headerBatches int64
	startStream := func(features []collate.Feature) error {
		for d, m := range srcs {
			var err error
			if fillers[d], err = newStreamFiller(m.Config, features); err != nil {
				return err
			}
		}
		var err error
		b, err = collate.NewBatcher(collate.Config{
			BatchSize: so.BatchSize, Features: fillers[0].out, KeepLanguage: so.KeepLanguage, Strings: strs,
		})
		if err != nil {
			return err
		}
		headerDone = true
		if parallel {
			enc = sink.NewEncoder(es, workerCount(cfg), b.Recycle)
		}
		h := Header(cfg, so, b)
		h.Share = to.headerShare()
		h.Strings = strs
		h.Training = &sink.Training{Fingerprint: fp, Epoch: headerEpoch, EpochBatches: headerBatches, Consumers: int64(to.Consumers)}
		if mixed {
			var ids, revs []string
			for _, m := range srcs {
				ids = append(ids, m.Config.Dataset.ID)
				revs = append(revs, m.Config.Dataset.Revision)
			}
			h.Dataset, h.Revision = strings.Join(ids, ","), mixRevision(revs)
		}
		return s.Header(h)
	}
	C := int64(to.Consumers)
	B := int64(so.BatchSize)
	// This consumer's share of each epoch's drops and errors: every
	// epoch renders the same frames, so the share is the same.
	myDropped, myErrors := idx.unkeptShare(int64(to.Consumer), C)
	var dropped, errs int64
	hold := newHolder(srcs, so.KeepLanguage)
	weights := make([]float64, len(srcs))
	for d, m := range srcs {
		weights[d] = m.Weight
	}
	for epoch := start.Epoch; to.Epochs == 0 || epoch < to.Epochs; epoch++ {
		if pos != nil && epoch > pos.Epoch {
			break
		}
		orders := make([][]int32, len(srcs))
		for d, m := range srcs {
			sel := fmt.Sprintf("%d|%v|%v", d, m.Config.Selection.Episodes, m.Config.Selection.Exclude)
			orders[d] = epochOrder(idx.runs[d], idx.keep, to.Shuffle, to.BufferSize,
				newOrderRNG("epoch", to.Seed, epoch, m.Config.Dataset.Revision, sel))
		}
		order := interleave(orders, weights, to.Shuffle, newOrderRNG("mix", to.Seed, epoch, "", ""))
		n := int64(len(order))
		nb := (n + B - 1) / B
		if so.DropLast {
			nb = n / B
		}
		served := nb / C * C // global batches served this epoch
		first := int64(0)
		if epoch == start.Epoch {
			first = start.Batch
		}
		if first%C != 0 {
			// A token from another cluster size: continue with the
			// next round of global batches.
			first = (first/C + 1) * C
		}
		var mine []int64 // this consumer's global batches, in order
		if pos != nil {
			// Rank-sequence index j is global batch (j/W)*C + rankBase + j%W.
			rankBase := int64(to.Consumer) - int64(to.Consumer)%W
			for j := pos.Next; ; j += W {
				k := (j/W)*C + rankBase + j%W
				if k >= served {
					break
				}
				mine = append(mine, k)
			}
		} else {
			for k := first + int64(to.Consumer); k < served; k += C {
				mine = append(mine, k)
			}
		}
		var mineFrames int64
		for _, k := range mine {
			mineFrames += min(B, n-k*B)
		}
		if first == 0 && served > 0 {
			// A whole epoch: this consumer's share of its drops and
			// errors (a resumed, partial epoch counts only its batches).
			dropped += myDropped
			errs += myErrors
		}
		if cfg.ProgressTotal != nil && epoch == start.Epoch {
			// Progress counts served frames plus this share's unkept
			// ones (as the end counts do); every later epoch is alike.
			per := mineFrames
			if first == 0 {
				per += myDropped + myErrors
			}
			total := int64(0)
			if to.Epochs > 0 {
				full := int64(0)
				for k := int64(to.Consumer); k < served; k += C {
					full += min(B, n-k*B)
				}
				total = per + (to.Epochs-epoch-1)*(full+myDropped+myErrors)
			}
			cfg.ProgressTotal(total)
		}
		if !headerDone {
			headerEpoch, headerBatches = epoch, nb
		}
		if served == 0 {
			// Every epoch is alike in size: an empty one means the run
			// can serve nothing (and --epochs 0 would spin forever).
			if n > 0 {
				return st, fmt.Errorf("an epoch has %d kept frames: %d batches of %d cannot give each of %d consumers a batch", n, nb, B, C)
			}
			if to.Epochs == 0 {
				return st, errors.New("the selection has no kept frames to serve (every frame was dropped or failed)")
			}
			break
		}
		if first == 0 && served > 0 && cfg.Progress != nil && myDropped+myErrors > 0 {
			cfg.Progress(int(myDropped + myErrors))
		}
		start := func(c *Chunk) ([]*filler, error) {
			if !headerDone {
				if err := startStream(chunkFeatures(c)); err != nil {
					return nil, err
				}
			}
			return fillers, nil
		}
		err := serveBatches(ctx, srcs, idx, hold, order, mine, B, start, func(frames []*heldFrame, k int64) error {
			bt, err := hold.batchOf(b, frames)
			if err != nil {
				return err
			}
			next := token{Version: 1, Epoch: epoch, Batch: (k/C + 1) * C, Fingerprint: fp}
			if next.Batch >= served {
				next = token{Version: 1, Epoch: epoch + 1, Batch: 0, Fingerprint: fp}
			}
			for _, f := range frames {
				r := f.result()
				st.countKept(&r)
			}
			cnt.Batches++
			cnt.Kept += int64(bt.N)
			// seq numbers this consumer's batches across epochs, so a
			// resumed stream carries the same numbers as an uninterrupted one.
			seq := epoch*(served/C) + k/C
			if pos != nil {
				// The batch's index in the rank's sequence of the epoch.
				seq = (k/C)*W + k%C%W
			}
			meta := sink.BatchMeta{Seq: seq, Epoch: epoch, Resume: next.encode()}
			if enc != nil {
				err = enc.Batch(bt, meta)
			} else {
				err = s.Batch(bt, meta)
				b.Recycle(bt)
			}
			if cfg.Progress != nil {
				cfg.Progress(len(frames))
			}
			return err
		})
		if err != nil {
			return st, err
		}
	}
	if !headerDone {
		if err := startStream(infoFeatures(cfg)); err != nil {
			return st, err
		}
	}
	if enc != nil {
		// Every batch is written before End touches the sink.
		err := enc.Close()
		enc = nil
		if err != nil {
			return st, err
		}
	}
	// End counts are this consumer's, summed over the epochs it served
	// (docs/wire-format.md, "end"): frames = rendered + passthrough +
	// dropped + errors.
	st.Dropped, st.Errors = dropped, errs
	st.Frames += dropped + errs
	st.HeldPeak = int64(hold.peak)
	st.Skipped = idx.stats.Skipped
	e := sink.End{
		Frames: st.Frames, Rendered: st.Rendered, Passthrough: st.Passthrough,
		Dropped: dropped, Errors: errs,
		Batches: cnt.Batches, Samples: cnt.Kept,
	}
	if cfg.Recipe.IsBlend() {
		for i, name := range cfg.Recipe.Components() {
			e.Components = append(e.Components, sink.ComponentCount{Name: name, Count: st.Components[i]})
		}
	}
	return st, s.End(e)
}

// runGroups is Run with each chunk's unit group passed along (for the
// pre-pass).
func runGroups(ctx context.Context, cfg *Config, emit func([]shard.Unit, *Chunk) error) error {
	return run(ctx, cfg, emit)
}

// headerShare is the header's share map of consumer Consumer: its rank
// and worker, WorldSize ranks of Consumers/WorldSize workers (one rank of
// Consumers workers when WorldSize is unset or does not divide Consumers).
func (to *TrainOptions) headerShare() sink.Share {
	c := max(to.Consumers, 1)
	w := to.WorldSize
	if w < 1 || c%w != 0 {
		w = 1
	}
	nw := c / w
	return sink.Share{Rank: to.Consumer / nw, WorldSize: w, Worker: to.Consumer % nw, NumWorkers: nw}
}
