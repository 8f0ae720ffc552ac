package shard

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkReadUnit reads every unit of a conformance dataset; it reports
// frames/s (and allocations per frame via -benchmem / allocs/frame).
func BenchmarkReadUnit(b *testing.B) {
	for _, name := range []string{"pub_inferred_front_wrist", "pub_documented_top_wrist"} {
		for _, mode := range []struct {
			name string
			opts Options
		}{{"all", Options{}}, {"language", Options{Features: []string{}}}} {
			b.Run(name+"/"+mode.name, func(b *testing.B) {
				dir := filepath.Join(conformanceDir(b), name)
				src := mustDir(b, dir)
				ctx := context.Background()
				ds, err := OpenDataset(ctx, src)
				if err != nil {
					b.Skip(err)
				}
				units, err := Plan(ctx, src, ds, Selection{})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				frames := 0
				for b.Loop() {
					for _, u := range units {
						bt, err := ReadUnit(ctx, src, ds, u, mode.opts)
						if err != nil {
							b.Fatal(err)
						}
						frames += bt.Len()
					}
				}
				b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
