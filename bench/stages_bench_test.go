package bench

import (
	"context"
	"os"
	"testing"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
)

// benchConfig is the embedded demo dataset and recipe, or the dataset in
// LRSTREAM_BENCH_DATASET rendered with the recipe in LRSTREAM_BENCH_RECIPE.
func benchConfig(b *testing.B) *pipeline.Config {
	dir := os.Getenv("LRSTREAM_BENCH_DATASET")
	if dir == "" {
		return demoConfig(b)
	}
	recipe := os.Getenv("LRSTREAM_BENCH_RECIPE")
	if recipe == "" {
		b.Fatal("LRSTREAM_BENCH_DATASET needs LRSTREAM_BENCH_RECIPE")
	}
	rec, err := render.LoadFile(recipe)
	if err != nil {
		b.Fatal(err)
	}
	src, err := fetch.OpenDataset(context.Background(), dir, fetch.HubOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ds, err := shard.OpenDataset(context.Background(), src)
	if err != nil {
		b.Fatal(err)
	}
	return &pipeline.Config{Source: src, Dataset: ds, Recipe: rec}
}

// benchStage runs one stage over the whole dataset per iteration and
// reports ns/frame-independent metrics: frames/s and allocs/frame.
func benchStage(b *testing.B, stage string) {
	cfg := benchConfig(b)
	b.ReportAllocs()
	var frames int64
	for b.Loop() {
		st, err := measure(context.Background(), cfg, stage, 0, Options{BatchSize: 256})
		if err != nil {
			b.Fatal(err)
		}
		frames += st.Frames
	}
	b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(frames), "ns/frame")
}

func BenchmarkScan(b *testing.B)   { benchStage(b, StageScan) }
func BenchmarkDecode(b *testing.B) { benchStage(b, StageDecode) }
func BenchmarkRender(b *testing.B) { benchStage(b, StageRender) }
func BenchmarkStream(b *testing.B) { benchStage(b, StageStream) }
