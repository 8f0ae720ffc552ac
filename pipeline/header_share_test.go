package pipeline

import (
	"testing"

	"github.com/lrstream/lrstream/sink"
)

// TestHeaderShare checks the header's share map of a training stream:
// the consumer named by rank and worker, as the socket hello names it.
func TestHeaderShare(t *testing.T) {
	for _, c := range []struct {
		to   TrainOptions
		want sink.Share
	}{
		{TrainOptions{}, sink.Share{Rank: 0, WorldSize: 1, Worker: 0, NumWorkers: 1}},
		{TrainOptions{Consumer: 1, Consumers: 2, WorldSize: 2}, sink.Share{Rank: 1, WorldSize: 2, Worker: 0, NumWorkers: 1}},
		{TrainOptions{Consumer: 5, Consumers: 8, WorldSize: 2}, sink.Share{Rank: 1, WorldSize: 2, Worker: 1, NumWorkers: 4}},
		{TrainOptions{Consumer: 3, Consumers: 4, WorldSize: 1}, sink.Share{Rank: 0, WorldSize: 1, Worker: 3, NumWorkers: 4}},
		// WorldSize unset, or not dividing Consumers: one rank of Consumers workers.
		{TrainOptions{Consumer: 2, Consumers: 4}, sink.Share{Rank: 0, WorldSize: 1, Worker: 2, NumWorkers: 4}},
		{TrainOptions{Consumer: 2, Consumers: 4, WorldSize: 3}, sink.Share{Rank: 0, WorldSize: 1, Worker: 2, NumWorkers: 4}},
	} {
		if got := c.to.headerShare(); got != c.want {
			t.Errorf("%+v: share %+v, want %+v", c.to, got, c.want)
		}
	}
}
