package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/order"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

// Training orders (TrainOptions.Order) and their defaults: see package
// order.
const (
	OrderGlobal          = order.Global
	OrderPartitioned     = order.Partitioned
	OrderStratified      = order.Stratified
	DefaultPartitions    = order.DefaultPartitions
	DefaultPartitionOpen = order.DefaultPartitionOpen
	// DefaultStratifiedOpen is PartitionOpen's default in the stratified
	// order.
	DefaultStratifiedOpen = order.DefaultStratifiedOpen
	// DefaultBufferSize is the default shuffle buffer, in frames.
	DefaultBufferSize = order.DefaultBufferSize
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
	// 0 means DefaultBufferBytes, or with camera frames what
	// DefaultCameraMemory leaves (cameraBudget); a negative value no
	// budget.
	BufferBytes int64
	// Spill, when set, is a directory where the held camera frames (the
	// features of samples of perFrameStride bytes or more, as stored)
	// wait for their batch in a private, unlinked file instead of in
	// memory: BufferBytes then bounds only what stays in memory per
	// sample (SpilledSampleBytes), so the buffer can keep BufferSize
	// frames. It never changes the order for a given buffer size.
	Spill string
	// SpillBytes bounds what one stream's spill file holds: the buffer
	// (and the partitioned orders' PartitionOpen) is lowered so that
	// one consumer's worst case (SpillBytes, frames at their batch size)
	// fits, from metadata only. 0 means DefaultSpillBytes; a negative
	// value no budget. Whatever it is, a stream whose worst case does not
	// fit its directory's free space is refused at its start.
	SpillBytes int64
	// SpillSpace, when set, shares the spill directory's free space
	// between the streams of one process (the clients of serve).
	SpillSpace *SpillSpace
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
	// Order is OrderGlobal ("" too), OrderPartitioned or
	// OrderStratified; Partitions is the number of canonical partitions
	// of the partitioned and stratified orders (DefaultPartitions when
	// 0), which Consumers must divide.
	Order      string
	Partitions int
	// PartitionOpen is how many of its episodes a partition of the
	// partitioned order reads at a time, their frames entering its buffer
	// share in random turns (DefaultPartitionOpen when 0), or the fewest
	// a partition of the stratified order interleaves (its waves have
	// fewer than twice as many; DefaultStratifiedOpen when 0): more mixes
	// better, and holds more episodes per partition decoded.
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
	// freeSpace, when set, replaces statfs's free space of the spill
	// directory (tests).
	freeSpace func(dir string) (int64, error)
	// spillOpened, when set, is given the stream's spill file (tests).
	spillOpened func(*spillFile)
	// oneFramePerWindow sizes the buffer as builds before camera windows
	// were counted in full did (waitingSampleBytes; explainResume).
	oneFramePerWindow bool
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
	if order.UsesPartitions(to.Order) {
		// "batches": partitions of whole global batches (order.Partitions);
		// tokens of the earlier whole-episode partitions name another
		// sequence and are refused.
		fmt.Fprintf(h, "\x00%s\x00%d\x00%d\x00batches", to.Order, to.Partitions, to.PartitionOpen)
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
	to   TrainOptions
	orig TrainOptions // the options as given (explainResume)
	fp   string       // the run's fingerprint (resume tokens)
	// asked is the --shuffle-buffer asked for, sample the bytes per
	// sample that lowered it, mem the options the byte budget alone gave
	// (before the spill's disk budget): shuffling only, for the warnings.
	asked  int
	sample int64
	mem    TrainOptions
}

// trainSetup completes to's defaults and refuses, before anything is
// read, what train would refuse before its first batch: consumer, mixture,
// order, partitions, resume token. It logs nothing.
func trainSetup(srcs []Mix, so StreamOptions, to TrainOptions) (trainStart, error) {
	ts := trainStart{orig: to}
	if to.Consumer < 0 || to.Consumer >= max(to.Consumers, 1) {
		return ts, fmt.Errorf("consumer %d of %d", to.Consumer, max(to.Consumers, 1))
	}
	if to.BufferSize <= 0 {
		to.BufferSize = DefaultBufferSize
	}
	if err := checkMix(srcs); err != nil {
		return ts, err
	}
	// The buffer in frames, within its byte budgets; the fingerprint
	// holds the frames, which is what the order depends on.
	ts.asked = to.BufferSize
	z, err := completeTrain(srcs, to)
	if err != nil {
		return ts, err
	}
	ts.sample, ts.mem = z.sample, z.mem
	ts.to, ts.fp = z.to, fingerprint(srcs, so, z.to)
	_, err = order.Check(orderSources(srcs), ts.orderOptions(so))
	return ts, explainResume(err, srcs, so, ts)
}

// orderOptions are the training order's options of ts.
func (ts trainStart) orderOptions(so StreamOptions) order.Options {
	to := ts.to
	o := order.Options{
		Order: to.Order, Shuffle: to.Shuffle, Seed: to.Seed, BufferSize: to.BufferSize,
		BatchSize: int64(so.BatchSize), DropLast: so.DropLast, Epochs: to.Epochs,
		Consumer: to.Consumer, Consumers: to.Consumers, WorldSize: to.WorldSize, Workers: to.Workers,
		Partitions: to.Partitions, PartitionOpen: to.PartitionOpen,
		Fingerprint: ts.fp, Resume: to.Resume,
	}
	if p := to.Position; p != nil {
		o.Position = &order.Position{Epoch: p.Epoch, Next: p.Next, Fingerprint: p.Fingerprint}
	}
	return o
}

// orderSources describes srcs to the training order: each dataset's
// selected episodes from the episodes index, its revision, selection and
// weight.
func orderSources(srcs []Mix) []order.Source {
	out := make([]order.Source, len(srcs))
	for d, m := range srcs {
		cfg := m.Config
		src := order.Source{
			Revision:  cfg.Dataset.Revision,
			Selection: fmt.Sprintf("%v|%v", cfg.Selection.Episodes, cfg.Selection.Exclude),
			Weight:    m.Weight,
		}
		for _, e := range cfg.Dataset.Episodes {
			if cfg.Selection.Contains(e.Index) {
				src.Episodes = append(src.Episodes, order.Episode{Index: e.Index, Length: e.Length})
			}
		}
		out[d] = src
	}
	return out
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
