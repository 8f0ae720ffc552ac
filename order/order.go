package order

import (
	"errors"
	"fmt"
	"slices"
)

// Orders (Options.Order).
const (
	// Global builds one order over the whole selection and gives consumer
	// c of C every C-th global batch. Every consumer reads the whole
	// selection.
	Global = "global"
	// Partitioned cuts each epoch's permuted episodes into a fixed number
	// of canonical partitions; a consumer reads only its own partitions'
	// episodes.
	Partitioned = "partitioned"
	// Stratified is the partitioned order (same partitions, consumers,
	// counts and resume) with each partition's batches drawn across many
	// of its episodes at once, evenly (stratifiedOrder), instead of
	// through a shuffle buffer share from a few.
	Stratified = "stratified"
)

// DefaultBufferSize is the default shuffle buffer, in frames.
const DefaultBufferSize = 16384

// Episode is a selected episode and its length, from the episodes index.
type Episode struct {
	Index, Length int64
}

// Source is one dataset of the order.
type Source struct {
	// Revision and Selection (a text naming the episode selection) seed
	// the source's generators.
	Revision, Selection string
	// Episodes are the selected episodes, ascending (the partitioned order
	// cuts them into partitions).
	Episodes []Episode
	// Weight is the source's share of a mixture.
	Weight float64
}

// Options define a consumer's order. New completes nothing: the engine
// passes them with its defaults applied (Partitions, PartitionOpen and
// BufferSize set, the buffer already fitted to its byte budget).
type Options struct {
	// Order is Global ("" too) or Partitioned.
	Order string
	// Shuffle permutes episodes and mixes frames through a shuffle buffer
	// of BufferSize frames; Seed fixes the order.
	Shuffle    bool
	Seed       uint64
	BufferSize int
	// BatchSize is the global batch size; DropLast drops a short last
	// global batch (the global order; the partitioned one serves full
	// batches only).
	BatchSize int64
	DropLast  bool
	// Epochs is the number of passes; 0 means forever.
	Epochs int64
	// Consumer is this stream's consumer, rank*Workers+worker, of
	// Consumers = WorldSize*Workers (WorldSize 0 means 1).
	Consumer, Consumers, WorldSize, Workers int
	// Partitions and PartitionOpen shape the partitioned order.
	Partitions, PartitionOpen int
	// Fingerprint identifies everything the order and the batches depend
	// on: a resume token or position of another run is refused.
	Fingerprint string
	// Resume is a token (State.Token) to continue from; Position an exact
	// place in the rank's sequence. At most one of them.
	Resume   string
	Position *Position
}

// Stream is one consumer's order: an iterator over its epochs.
type Stream struct {
	o     Options
	srcs  []Source
	start State
	next  int64 // the next epoch
	kind  interface {
		epoch(e int64) (*Epoch, bool, error)
	}
	shared bool
}

// ErrPartitionedMix refuses a mixture under the partitioned order.
var ErrPartitionedMix = errors.New("--order partitioned streams one dataset: for a mixture of several --dataset use --order global (the default; every consumer reads each dataset's selection), or train on each dataset's partitioned stream separately (docs/training.md, \"Mixtures and the partitioned order\")")

// Check refuses the options the order cannot serve, before anything is
// read: consumer, order, partitions, resume token.
func Check(srcs []Source, o Options) (State, error) {
	if o.Consumer < 0 || o.Consumer >= o.Consumers {
		return State{}, fmt.Errorf("consumer %d of %d", o.Consumer, o.Consumers)
	}
	switch o.Order {
	case "", Global:
	case Partitioned, Stratified:
		if len(srcs) > 1 {
			return State{}, ErrPartitionedMix
		}
	default:
		return State{}, fmt.Errorf("unknown order %q (want %s, %s or %s)", o.Order, Global, Partitioned, Stratified)
	}
	var start State
	if o.Resume != "" {
		var fp string
		var err error
		if start, fp, err = ParseToken(o.Resume); err != nil {
			return State{}, err
		}
		if fp != o.Fingerprint {
			return State{}, errors.New("resume token belongs to a different run (dataset revision, recipe, selection, mode, shuffle, seed, order, partitions or batch options differ)")
		}
	}
	if UsesPartitions(o.Order) {
		if o.Partitions <= 0 || o.Partitions%o.Consumers != 0 {
			return State{}, fmt.Errorf("--order %s: %d consumers (world size × workers) must divide --partitions %d", o.Order, o.Consumers, o.Partitions)
		}
		if _, err := Slot(o); err != nil {
			return State{}, err
		}
	}
	return start, nil
}

// New returns consumer o.Consumer's order over srcs, restored from
// o.Resume or o.Position.
func New(srcs []Source, o Options) (*Stream, error) {
	start, err := Check(srcs, o)
	if err != nil {
		return nil, err
	}
	s := &Stream{o: o, srcs: srcs, start: start}
	if o.Position != nil {
		s.start = State{Epoch: o.Position.Epoch}
	}
	if UsesPartitions(o.Order) {
		s.kind, err = newPartitioned(s)
	} else {
		s.kind, err = newGlobal(s)
		s.shared = true
	}
	if err != nil {
		return nil, err
	}
	s.next = s.start.Epoch
	return s, nil
}

// checkPosition refuses a position the run cannot serve: shape, when not
// nil, is the error of a cluster shape the order cannot place it in; what
// lists what the fingerprint covers, for its error.
func checkPosition(o Options, shape error, what string) error {
	pos := o.Position
	switch {
	case o.Resume != "":
		return errors.New("a position (epoch, next) and a resume token cannot both be given")
	case shape != nil:
		return shape
	case pos.Fingerprint != "" && pos.Fingerprint != o.Fingerprint:
		return fmt.Errorf("resume position belongs to a different run (dataset revision, recipe, selection, mode, %s differ)", what)
	case o.Epochs != 0 && pos.Epoch >= o.Epochs:
		return fmt.Errorf("epoch %d asked for, but the server runs --epochs %d (epochs 0..%d)", pos.Epoch, o.Epochs, o.Epochs-1)
	}
	return nil
}

// Start is the state the stream starts from (its first epoch, and the
// global batches of it already consumed).
func (s *Stream) Start() State { return s.start }

// Shared reports whether every epoch plans over one keep index of the
// whole selection (Epoch.Episodes is nil), which the engine may build once
// and share between the consumers of a process.
func (s *Stream) Shared() bool { return s.shared }

// Next returns the consumer's next epoch; ok is false after the last.
func (s *Stream) Next() (ep *Epoch, ok bool, err error) {
	e := s.next
	if s.o.Epochs != 0 && e >= s.o.Epochs {
		return nil, false, nil
	}
	ep, ok, err = s.kind.epoch(e)
	if ok && err == nil {
		s.next++
	}
	return ep, ok, err
}

// Epoch is one epoch of a consumer's order, before its frames are known.
type Epoch struct {
	Epoch int64
	// Batches is the epoch's number of global batches, when known from
	// metadata (the partitioned order); the Plan has it in every order.
	Batches int64
	// Skip is set when nothing of this epoch is the consumer's (a resume
	// past its share): no index is needed, and there is no Plan.
	Skip bool
	// Episodes are the episodes the consumer reads this epoch: Plan needs
	// the keep index of exactly these (nil: of the whole selection).
	Episodes []int64

	plan func(*Index) (*Plan, error)
}

// Plan returns the consumer's batches of the epoch, given the keep index
// of its Episodes (of the whole selection when Episodes is nil).
func (ep *Epoch) Plan(ix *Index) (*Plan, error) {
	if ep.Skip {
		return nil, errors.New("internal error: a skipped epoch has no plan")
	}
	return ep.plan(ix)
}

// Which of an index's unkept frames (dropped by rendering, or failed) a
// Plan counts as its consumer's (docs/wire-format.md, "end").
const (
	// UnkeptNone: none (a resumed, partial epoch of the global order).
	UnkeptNone = iota
	// UnkeptShare: positions p of the index with p mod Consumers ==
	// Consumer (a whole epoch of the global order): over the consumers
	// the shares add up to the selection's unkept frames.
	UnkeptShare
	// UnkeptIndex: every unkept frame of the index.
	UnkeptIndex
	// UnkeptRuns: the unkept frames of the Plan's Owned runs (the
	// partitioned orders: the consumer's partitions, whose episodes at a
	// partition's edge are shared with another partition).
	UnkeptRuns
)

// Plan is a consumer's share of one epoch: its batches, in order, as
// positions of the epoch's keep index.
type Plan struct {
	Epoch int64
	// Batches is the epoch's number of global batches (the consumer's
	// header reports it for its first epoch).
	Batches int64
	// Order holds positions; batch k of Mine is Order[k*B:min((k+1)*B,
	// len(Order))], less its holes (-1: a partition's batch short of
	// frames dropped by rendering).
	Order []int32
	Mine  []int64
	B     int64
	// Stop is set when nothing is served and no later epoch serves
	// anything either: the stream ends.
	Stop bool
	// Unkept says which unkept frames of the index are this consumer's
	// this epoch (UnkeptNone, UnkeptShare, UnkeptIndex).
	Unkept int
	// Owned are the runs of positions whose unkept frames are this
	// consumer's (Unkept == UnkeptRuns).
	Owned []Run
	// Unserved is the number of the epoch's frames no consumer serves:
	// the last global batches that cannot go to every consumer alike
	// and, in the partitioned orders, the frames short of a whole batch
	// (docs/training.md: fewer than consumers × batch size). In the
	// global order it counts kept frames, in the partitioned ones
	// frames of the episodes index.
	Unserved int64
	// Frames is what Mine serves; EpochFrames what a whole epoch serves
	// the consumer. Uniform is set when every epoch serves it alike (the
	// global order), so a run's total is known from its first epoch.
	Frames, EpochFrames int64
	Uniform             bool

	after func(k int64) State
	seq   func(k int64) int64
}

// Batch returns the positions of batch k (its holes left out).
func (p *Plan) Batch(k int64) []int32 {
	b := p.Order[k*p.B : min((k+1)*p.B, int64(len(p.Order)))]
	for i, x := range b {
		if x < 0 {
			out := slices.Clone(b[:i])
			for _, y := range b[i:] {
				if y >= 0 {
					out = append(out, y)
				}
			}
			return out
		}
	}
	return b
}

// After is the state continuing right after batch k (what its resume
// token holds).
func (p *Plan) After(k int64) State { return p.after(k) }

// Seq numbers batch k in the consumer's stream: across epochs, so that a
// resumed stream carries the same numbers as an uninterrupted one; with a
// Position, its index in the rank's sequence of the epoch.
func (p *Plan) Seq(k int64) int64 { return p.seq(k) }
