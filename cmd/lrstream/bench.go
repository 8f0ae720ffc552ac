package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"

	"github.com/lrstream/lrstream/bench"
	"github.com/lrstream/lrstream/pipeline"
)

func benchCommand() command {
	return command{name: "bench", summary: "measure scan / render / stream throughput on a dataset", run: runBench}
}

func runBench(ctx context.Context, e *env, args []string) error {
	var rf runFlags
	fs := flag.NewFlagSet("lrstream bench", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	rf.register(fs)
	batchSize := fs.Int("batch-size", 256, "kept samples per batch (stream stage)")
	stages := fs.String("stages", strings.Join(bench.Stages, ","), "stages to run, comma-separated: scan, decode, render, stream, ffmpeg (the camera decode floor, added automatically when cameras are decoded), cached (stream served from the frame cache after one unmeasured pass fills it; only when named)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	count := fs.Int("count", 1, "run the stages this many times, interleaved, and report each stage's median run")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured stages to FILE (go tool pprof)")
	memProfile := fs.String("memprofile", "", "write an allocation profile to FILE after the stages (go tool pprof -sample_index=alloc_space)")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: lrstream bench [--dataset DIR|ORG/NAME] [--recipe FILE] [flags]\n\nMeasures, in one process on the same files: scan (a naive pqarrow read of the\nneeded columns, touching every value), decode (lrstream's reader), render (decode +\nrender; without a recipe: decode + the tasks) and stream (the whole pipeline into a discarding msgpack sink).\nSee docs/performance.md.\n\nflags:")
		printFlags(fs)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *batchSize < 1 {
		return fmt.Errorf("--batch-size must be at least 1, not %d", *batchSize)
	}
	var opts bench.Options
	opts.BatchSize = *batchSize
	opts.Version = version()
	opts.Count = *count
	opts.Stages = benchStages(*stages)
	cfg, err := rf.open(ctx, e)
	if err != nil {
		return err
	}
	defer rf.frameCache.close(e.stderr, true)
	// What the pipeline would refuse at its first batch is refused
	// here, before any note or output.
	if err := pipeline.CheckStart([]pipeline.Mix{{Config: cfg}}, pipeline.StreamOptions{}, nil); err != nil {
		return err
	}
	logCameraNotes(stderrLog(e.stderr), []pipeline.Mix{{Config: cfg}})
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := bench.Run(ctx, cfg, opts)
	if err != nil {
		return err
	}
	if *memProfile != "" {
		if err := writeAllocProfile(*memProfile); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printBench(e.stdout, rep)
	return nil
}

// benchStages parses --stages: nil for the default list (Run then adds
// the ffmpeg stage when cameras are decoded), else the listed stages.
func benchStages(spec string) []string {
	if spec == strings.Join(bench.Stages, ",") {
		spec = "" // the default: Run adds the ffmpeg stage when cameras are decoded
	}
	var stages []string
	for _, s := range strings.Split(spec, ",") {
		if s = strings.TrimSpace(s); s != "" {
			stages = append(stages, s)
		}
	}
	return stages
}

// writeAllocProfile writes the allocation profile to path, after a GC.
func writeAllocProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	err = pprof.Lookup("allocs").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// printBench writes the report as a table.
func printBench(w io.Writer, r *bench.Report) {
	recipe := r.Recipe
	if recipe == "" {
		recipe = "none (nothing rendered)"
	}
	fmt.Fprintf(w, "dataset %s, recipe %s\n", r.Dataset, recipe)
	fmt.Fprintf(w, "%d workers, GOMAXPROCS %d, %d CPUs, batch size %d", r.Workers, r.GOMAXPROCS, r.NumCPU, r.BatchSize)
	if r.Count > 1 {
		fmt.Fprintf(w, ", median of %d runs per stage", r.Count)
	}
	fmt.Fprint(w, "\n\n")
	fmt.Fprintf(w, "%-7s %10s %12s %8s %9s %13s %13s %11s %9s %8s\n",
		"stage", "frames", "frames/s", "MB/s", "ns/frame", "CPU ns/frame", "allocs/frame", "B/frame", "peak RSS", "time")
	for _, s := range r.Stages {
		rss := "n/a"
		if s.PeakRSS >= 0 {
			rss = fmt.Sprintf("%.0f MB", float64(s.PeakRSS)/(1<<20))
		}
		fmt.Fprintf(w, "%-7s %10d %12.0f %8.1f %9.0f %13.0f %13.2f %11.0f %9s %7.2fs\n",
			s.Name, s.Frames, s.FramesPerSec, s.MBPerSec, s.NsPerFrame, s.CPUNsPerFrame, s.AllocsPerFrame, s.AllocBytesPerFrame, rss, s.Seconds)
	}
	if r.RenderOverScan > 0 || r.StreamOverScan > 0 {
		fmt.Fprintln(w)
	}
	if r.RenderOverScan > 0 {
		fmt.Fprintf(w, "render/scan %.2f\n", r.RenderOverScan)
	}
	if r.StreamOverScan > 0 {
		fmt.Fprintf(w, "stream/scan %.2f\n", r.StreamOverScan)
	}
	if s := r.Stage(bench.StageStream); s != nil && s.Frames > 0 {
		fmt.Fprintf(w, "stream: %d batches, %.1f MB msgpack (%.0f B/frame)\n", s.Batches, float64(s.OutBytes)/1e6, float64(s.OutBytes)/float64(s.Frames))
	}
	for _, s := range r.Stages {
		if s.CameraFrames > 0 {
			started := ""
			if s.Name != bench.StageFFmpeg {
				started = fmt.Sprintf("; %d started", s.FFmpegProcesses)
			}
			fmt.Fprintf(w, "%s: %d camera frames, %.0f camera frames/s, CPU %.2fs (ffmpeg processes included%s)\n",
				s.Name, s.CameraFrames, s.CameraFramesPerSec, s.CPUSeconds, started)
		}
	}
	if r.CachedOverFFmpeg > 0 {
		fmt.Fprintf(w, "cached/ffmpeg (camera frames/s) %.2f\n", r.CachedOverFFmpeg)
	}
	if r.StreamOverFFmpeg > 0 {
		fmt.Fprintf(w, "stream/ffmpeg (camera frames/s) %.2f\n", r.StreamOverFFmpeg)
	}
}
