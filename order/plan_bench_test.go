package order

import (
	"fmt"
	"testing"
)

// BenchmarkFirstPlan is the CPU an order spends before a consumer's first
// batch on a 10M-frame selection (16,667 episodes of 400-800 frames, as
// docs/performance.md's "Training streams" generates): its epoch's
// partitions and its plan over the keep index. go test ./order -run - -bench FirstPlan
func BenchmarkFirstPlan(b *testing.B) {
	src, runs, keep := variedDataset(16667, 400, 800)
	for _, tc := range []struct {
		order string
		C     int
	}{{Global, 1}, {Partitioned, 1}, {Stratified, 1}, {Partitioned, 8}, {Stratified, 8}} {
		b.Run(fmt.Sprintf("%s/C=%d", tc.order, tc.C), func(b *testing.B) {
			o := Options{Order: tc.order, Shuffle: true, Seed: 1, BufferSize: DefaultBufferSize, BatchSize: 256,
				Partitions: DefaultPartitions, PartitionOpen: DefaultPartitionOpen, Consumers: tc.C, Epochs: 1}
			if tc.order == Stratified {
				o.PartitionOpen = DefaultStratifiedOpen
			}
			for b.Loop() {
				s, err := New([]Source{src}, o)
				if err != nil {
					b.Fatal(err)
				}
				ep, _, err := s.Next()
				if err != nil {
					b.Fatal(err)
				}
				ix := &Index{Runs: [][]Run{runs}, Keep: keep}
				if ep.Episodes != nil {
					want := map[int64]bool{}
					for _, e := range ep.Episodes {
						want[e] = true
					}
					var rs []Run
					for _, r := range runs {
						if want[r.Episode] {
							rs = append(rs, r)
						}
					}
					ix.Runs[0] = rs
				}
				if _, err := ep.Plan(ix); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
