package order

import (
	"errors"
	"fmt"
)

// global is the global order: per epoch one order over every source's
// kept frames (epochOrder, interleaved by weight), cut into global batches
// of BatchSize; consumer c of C gets global batches c, c+C, c+2C, ... so
// that the sequence of global batches, and thus the data order of a
// training run, does not depend on C. Every consumer gets the same number
// of batches per epoch, floor(batches/C): the last batches%C global
// batches of an epoch are not served (with reshuffling, different ones
// each epoch).
type global struct {
	s *Stream
	// W is the workers per rank of a Position.
	W int64
}

func newGlobal(s *Stream) (*global, error) {
	g := &global{s: s, W: int64(max(s.o.Workers, 1))}
	if s.o.Position != nil {
		var shape error
		if int64(s.o.Consumers)%g.W != 0 {
			shape = fmt.Errorf("%d consumers is not a multiple of %d workers per rank", s.o.Consumers, g.W)
		}
		if err := checkPosition(s.o, shape, "shuffle, seed or batch options"); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (g *global) epoch(e int64) (*Epoch, bool, error) {
	if pos := g.s.o.Position; pos != nil && e > pos.Epoch {
		return nil, false, nil
	}
	ep := &Epoch{Epoch: e}
	ep.plan = func(ix *Index) (*Plan, error) { return g.plan(e, ix) }
	return ep, true, nil
}

// epochOrder is epoch e's order of every source's kept frames of ix.
func (g *global) epochOrder(e int64, ix *Index) []int32 {
	o := g.s.o
	orders := make([][]int32, len(g.s.srcs))
	weights := make([]float64, len(g.s.srcs))
	for d, src := range g.s.srcs {
		sel := fmt.Sprintf("%d|%s", d, src.Selection)
		orders[d] = epochOrder(ix.Runs[d], ix.Keep, o.Shuffle, o.BufferSize, newRNG("epoch", o.Seed, e, src.Revision, sel))
		weights[d] = src.Weight
	}
	return interleave(orders, weights, o.Shuffle, newRNG("mix", o.Seed, e, "", ""))
}

// plan is the consumer's batches of epoch e over the whole selection's
// keep index ix.
func (g *global) plan(e int64, ix *Index) (*Plan, error) {
	o := g.s.o
	C, B := int64(o.Consumers), o.BatchSize
	order := g.epochOrder(e, ix)
	n := int64(len(order))
	nb := (n + B - 1) / B
	if o.DropLast {
		nb = n / B
	}
	served := nb / C * C // global batches served this epoch
	first := int64(0)
	if start := g.s.start; e == start.Epoch {
		first = start.Batch
	}
	if first%C != 0 {
		// A token from another cluster size: continue with the next
		// round of global batches.
		first = (first/C + 1) * C
	}
	pl := &Plan{Epoch: e, Batches: nb, Order: order, B: B, Uniform: true, Unserved: n - min(n, served*B)}
	if pos := o.Position; pos != nil {
		// Rank-sequence index j is global batch (j/W)*C + rankBase + j%W.
		rankBase := int64(o.Consumer) - int64(o.Consumer)%g.W
		for j := pos.Next; ; j += g.W {
			k := (j/g.W)*C + rankBase + j%g.W
			if k >= served {
				break
			}
			pl.Mine = append(pl.Mine, k)
		}
	} else {
		for k := first + int64(o.Consumer); k < served; k += C {
			pl.Mine = append(pl.Mine, k)
		}
	}
	for _, k := range pl.Mine {
		pl.Frames += min(B, n-k*B)
	}
	for k := int64(o.Consumer); k < served; k += C {
		pl.EpochFrames += min(B, n-k*B)
	}
	if first == 0 && served > 0 {
		// A whole epoch: this consumer's share of its drops and errors
		// (a resumed, partial epoch counts only its batches).
		pl.Unkept = UnkeptShare
	}
	if served == 0 {
		// Every epoch is alike in size: an empty one means the run can
		// serve nothing (and --epochs 0 would spin forever).
		if n > 0 {
			return pl, fmt.Errorf("an epoch has %d kept frames: %d batches of %d cannot give each of %d consumers a batch", n, nb, B, C)
		}
		if o.Epochs == 0 {
			return pl, errors.New("the selection has no kept frames to serve (every frame was dropped or failed)")
		}
		pl.Stop = true
		return pl, nil
	}
	W := g.W
	pl.after = func(k int64) State {
		if next := (k/C + 1) * C; next < served {
			return State{Epoch: e, Batch: next}
		}
		return State{Epoch: e + 1}
	}
	pl.seq = func(k int64) int64 {
		if o.Position != nil {
			// The batch's index in the rank's sequence of the epoch.
			return (k/C)*W + k%C%W
		}
		// seq numbers this consumer's batches across epochs, so a resumed
		// stream carries the same numbers as an uninterrupted one.
		return e*(served/C) + k/C
	}
	return pl, nil
}
