// Package order is lrstream's training order: which frames of a keep
// index, in which order, for which consumer, and the state that resumes
// it. It knows nothing of parquet, rendering, cameras or the wire format:
// the engine (package pipeline) describes the selection (Source: its
// episodes and lengths from the episodes index) and, per epoch, which
// frames are kept (Index: positions in plan order, grouped in runs of one
// episode), and serves the Plan it gets back.
//
// In the spirit of torchdata's nodes, a consumer's order is an iterator
// that restores and reports its own state:
//
//	s, err := order.New(sources, opts)   // restores: opts.Resume / opts.Position
//	for {
//		ep, ok, err := s.Next()          // one epoch of this consumer
//		...                              // ep.Episodes: what to index (nil: the whole selection)
//		plan, err := ep.Plan(index)      // its batches, in order
//		for _, k := range plan.Mine {
//			frames := plan.Frames(k)     // positions of batch k
//			next := plan.After(k)        // reports: the State (token) continuing after it
//		}
//	}
//
// Orders: Global (one order over the whole selection, consumer c of C
// serving global batches c, c+C, …), Partitioned (each epoch's episodes
// cut into canonical partitions, a consumer reading only its own, each
// partition mixing a few open episodes through its buffer share) and
// Stratified (the same partitions and consumers, each partition spreading
// many episodes evenly over its batches). All are pure functions of the
// seed, the epoch, the dataset revision and the selection, never of the
// machine or the cluster shape (docs/training.md).
package order
