package shard

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
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
				benchReadAll(b, filepath.Join(conformanceDir(b), name), mode.opts, b.Skip)
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// benchReadAll reads every unit of the dataset in dir per op and reports
// frames/s, CPU and allocations per frame; onOpenErr handles a dataset
// that cannot be opened (b.Skip or b.Fatal).
func benchReadAll(b *testing.B, dir string, opts Options, onOpenErr func(...any)) {
	src := mustDir(b, dir)
	ctx := context.Background()
	ds, err := OpenDataset(ctx, src)
	if err != nil {
		onOpenErr(err)
		return
	}
	units, err := Plan(ctx, src, ds, Selection{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	frames := 0
	cpu0, m0 := cpuTime(), mallocs()
	for b.Loop() {
		for _, u := range units {
			bt, err := ReadUnit(ctx, src, ds, u, opts)
			if err != nil {
				b.Fatal(err)
			}
			frames += bt.Len()
		}
	}
	reportFrames(b, frames, cpuTime()-cpu0, mallocs()-m0)
}

// benchDataset returns a generated dataset of about 100k frames (cached in
// the temp dir across runs), or LRSTREAM_BENCH_DATASET when set.
func benchDataset(b *testing.B, variant datagen.Variant) string {
	if d := os.Getenv("LRSTREAM_BENCH_DATASET"); d != "" {
		return d
	}
	dir := filepath.Join(os.TempDir(), "lrstream-shard-bench-"+string(variant))
	if _, err := os.Stat(filepath.Join(dir, "meta", "info.json")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	o := datagen.DefaultOptions()
	o.Episodes = 160
	o.Variant = variant
	o.Seed = 7
	if _, err := datagen.Generate(context.Background(), dir, o); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkReadGenerated reads a generated ~100k-frame dataset (one row
// group per episode of 400-800 frames, full annotation density).
func BenchmarkReadGenerated(b *testing.B) {
	for _, v := range []datagen.Variant{datagen.VariantDocumented, datagen.VariantInferred} {
		for _, mode := range []struct {
			name string
			opts Options
		}{{"all", Options{}}, {"language", Options{Features: []string{}}}} {
			b.Run(string(v)+"/"+mode.name, func(b *testing.B) {
				benchReadAll(b, benchDataset(b, v), mode.opts, b.Fatal)
			})
		}
	}
}

// cpuTime is the process's user+system CPU time in seconds: on a shared,
// loaded machine frames per CPU-second is steadier than wall-clock rate.
func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

func reportFrames(b *testing.B, frames int, cpu float64, allocs uint64) {
	if frames == 0 {
		return
	}
	b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
	b.ReportMetric(float64(allocs)/float64(frames), "allocs/frame")
	if cpu > 0 {
		b.ReportMetric(float64(frames)/cpu, "frames/cpu-s")
		b.ReportMetric(cpu*1e9/float64(frames), "cpu-ns/frame")
	}
	b.ReportMetric(0, "ns/op")
}
