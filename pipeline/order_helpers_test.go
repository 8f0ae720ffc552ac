package pipeline

import "github.com/lrstream/lrstream/order"

// partitionEpisodes is the partitioned order's partitions of cfg's
// selection for epoch (order.Partitions over cfg's metadata, as the
// trainer describes it).
func partitionEpisodes(cfg *Config, seed uint64, epoch int64, P int) ([][]int64, []int64) {
	return order.Partitions(orderSources([]Mix{{Config: cfg, Weight: 1}})[0], seed, epoch, P)
}
