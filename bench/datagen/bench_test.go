package datagen

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkGenerate measures generation speed on the benchmark dataset
// shape (full density, 14-dim, 30 fps, 400–800 frames per episode) scaled
// down to 50 episodes per iteration; it reports frames/s.
func BenchmarkGenerate(b *testing.B) {
	for _, v := range []Variant{VariantDocumented, VariantInferred} {
		b.Run(string(v), func(b *testing.B) {
			o := BenchOptions()
			o.Episodes = 50
			o.Variant = v
			o.Force = true
			dir := filepath.Join(b.TempDir(), "ds")
			var frames int64
			b.ResetTimer()
			for range b.N {
				res, err := Generate(context.Background(), dir, o)
				if err != nil {
					b.Fatal(err)
				}
				frames += res.Frames
			}
			b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}
