package pipeline

import "github.com/lrstream/lrstream/order"

// partitionEpisodes is the partitioned order's partitions of cfg's
// selection for epoch with batches of B (order.Partitions over cfg's
// metadata, as the trainer describes it): each partition's episodes (an
// episode its edges split is in both partitions) and frames.
func partitionEpisodes(cfg *Config, seed uint64, epoch int64, P int, B int64) ([][]int64, []int64) {
	parts := order.Partitions(orderSources([]Mix{{Config: cfg, Weight: 1}})[0], seed, epoch, P, B)
	eps := make([][]int64, P)
	frames := make([]int64, P)
	for p, pt := range parts {
		eps[p], frames[p] = pt.Episodes(), pt.Frames()
	}
	return eps, frames
}
