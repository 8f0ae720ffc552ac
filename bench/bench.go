// Package bench measures lrstream's throughput on one dataset, in one
// process, stage by stage: scan (decode the needed columns and touch every
// value), render (scan + render, no output) and stream (the whole pipeline
// into a discarding msgpack sink). `lrstream bench` prints its Report; see
// docs/performance.md.
package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sort"
	"sync/atomic"
	"time"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// Stage names, in the order Run measures them.
const (
	// StageScan is the baseline: a plain pqarrow read of the needed
	// columns, touching every value of the Arrow arrays.
	StageScan = "scan"
	// StageDecode is lrstream's own reader (shard.ReadUnit), touching
	// every decoded value.
	StageDecode = "decode"
	// StageRender is decode + render, in plan order, without output.
	StageRender = "render"
	// StageStream is the whole pipeline into a discarding msgpack sink.
	StageStream = "stream"
	// StageFFmpeg is the camera floor: FFmpeg's own sequential decode of
	// the decoded cameras' video files (ffmpeg -i FILE -f null -), one
	// file after the other. Run only when cameras are decoded.
	StageFFmpeg = "ffmpeg"
	// StageCached is the stream stage served from the frame cache (a
	// later epoch, run or process on the node): the cache is filled by
	// one unmeasured pass first. Run only when asked for, with cameras
	// decoded and a frame cache (docs/video.md, "Frame cache").
	StageCached = "cached"
)

// Stages lists the default stages in run order; StageFFmpeg follows them
// by default when cameras are decoded.
var Stages = []string{StageScan, StageDecode, StageRender, StageStream}

// Options choose what Run measures.
type Options struct {
	// Stages to run, a subset of Stages (run in Stages order whatever the
	// order here); nil means all.
	Stages []string
	// BatchSize is the stream stage's batch size (default 256).
	BatchSize int
	// Version is written into the stream stage's header.
	Version string
	// Count runs every stage Count times, interleaved (scan, decode,
	// render, stream, scan, ...), and reports each stage's median run by
	// wall time: steadier figures on a busy machine. Default 1.
	Count int
}

// Stage is the measurement of one stage.
type Stage struct {
	Name string `json:"name"`
	// Frames is the number of frames the stage read (every selected
	// frame); Bytes the parquet bytes it read (ReadAt calls on data
	// files, footers included).
	Frames int64 `json:"frames"`
	Bytes  int64 `json:"parquet_bytes"`
	// Seconds is the wall time of the stage.
	Seconds float64 `json:"seconds"`
	// CPUSeconds is the process's user + system CPU time during the
	// stage; on a shared or busy machine CPUNsPerFrame (CPU ns per frame)
	// is steadier than wall-clock figures.
	CPUSeconds    float64 `json:"cpu_seconds"`
	CPUNsPerFrame float64 `json:"cpu_ns_per_frame"`
	// FramesPerSec, MBPerSec (parquet bytes read, 1 MB = 10^6 bytes) and
	// NsPerFrame are derived from the above.
	FramesPerSec float64 `json:"frames_per_sec"`
	MBPerSec     float64 `json:"mb_per_sec"`
	NsPerFrame   float64 `json:"ns_per_frame"`
	// AllocsPerFrame and AllocBytesPerFrame are Go heap allocations
	// (runtime.MemStats Mallocs / TotalAlloc) per frame, all goroutines.
	AllocsPerFrame     float64 `json:"allocs_per_frame"`
	AllocBytesPerFrame float64 `json:"alloc_bytes_per_frame"`
	// PeakRSS is the process's resident set high-water mark during the
	// stage in bytes (Linux VmHWM, reset before the stage); -1 when the
	// platform cannot tell.
	PeakRSS int64 `json:"peak_rss_bytes"`
	// Rendered counts frames rendered to messages (render, stream);
	// Batches and OutBytes the batches and msgpack bytes produced
	// (stream).
	Rendered int64 `json:"rendered,omitempty"`
	Batches  int64 `json:"batches,omitempty"`
	OutBytes int64 `json:"out_bytes,omitempty"`
	// CameraFrames counts decoded camera frames (samples × cameras for
	// stream, the files' frames for ffmpeg) and CameraFramesPerSec their
	// rate. CPU figures include the ffmpeg processes' CPU; PeakRSS does
	// not include their memory (about 60 MB each at 480×640, one per
	// worker; Linux reports a vforked child's peak as its parent's, so it
	// is not measured here).
	CameraFrames       int64   `json:"camera_frames,omitempty"`
	CameraFramesPerSec float64 `json:"camera_frames_per_sec,omitempty"`
	// FFmpegProcesses counts the ffmpeg processes the stage started to
	// decode (stream: kept processes continue to later segments and start
	// none; cached: none for a warm cache). Each costs tens of ms of CPU
	// with a dynamically linked FFmpeg (docs/video.md, "Which FFmpeg").
	FFmpegProcesses int64 `json:"ffmpeg_processes,omitempty"`
}

// Report is the result of Run.
type Report struct {
	Dataset    string `json:"dataset"`
	Recipe     string `json:"recipe"`
	Workers    int    `json:"workers"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	NumCPU     int    `json:"num_cpu"`
	BatchSize  int    `json:"batch_size"`
	// Count is the number of runs per stage (see Options.Count).
	Count  int     `json:"count"`
	Stages []Stage `json:"stages"`
	// StreamOverScan and RenderOverScan are frames/s ratios (0 when a
	// stage was not run).
	StreamOverScan float64 `json:"stream_over_scan"`
	RenderOverScan float64 `json:"render_over_scan"`
	// StreamOverFFmpeg is the stream stage's camera frames/s over the
	// ffmpeg floor's (0 without both).
	StreamOverFFmpeg float64 `json:"stream_over_ffmpeg,omitempty"`
	// CachedOverFFmpeg is the cached stage's camera frames/s over the
	// ffmpeg floor's (0 without both).
	CachedOverFFmpeg float64 `json:"cached_over_ffmpeg,omitempty"`
}

// warmCache fills the frame cache with cfg's frames (one stream pass,
// not measured) for the cached stage.
func warmCache(ctx context.Context, cfg *pipeline.Config, workers int, opts Options) error {
	if cfg.Cameras == nil || cfg.Cameras.Frames == nil {
		return fmt.Errorf("bench: the cached stage needs decoded cameras (a dataset with video files; --cameras) and the frame cache (--frame-cache on)")
	}
	c := *cfg
	c.Workers, c.Progress = workers, nil
	if _, _, _, _, err := stream(ctx, &c, opts); err != nil {
		return fmt.Errorf("bench cached: filling the frame cache: %w", err)
	}
	return nil
}

// Stage returns the named stage's measurement, or nil.
func (r *Report) Stage(name string) *Stage {
	for i := range r.Stages {
		if r.Stages[i].Name == name {
			return &r.Stages[i]
		}
	}
	return nil
}

// Run measures the chosen stages of cfg, one after the other, on the same
// files. cfg is not modified.
func Run(ctx context.Context, cfg *pipeline.Config, opts Options) (*Report, error) {
	want := map[string]bool{}
	for _, s := range opts.Stages {
		known := s == StageFFmpeg || s == StageCached
		for _, k := range Stages {
			known = known || k == s
		}
		if !known {
			return nil, fmt.Errorf("bench: unknown stage %q (want scan, decode, render, stream, ffmpeg or cached)", s)
		}
		want[s] = true
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 256
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	rep := &Report{
		Dataset: cfg.Dataset.ID, Recipe: cfg.Recipe.Name(), Workers: workers,
		GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), BatchSize: opts.BatchSize,
	}
	if want[StageCached] {
		if err := warmCache(ctx, cfg, workers, opts); err != nil {
			return nil, err
		}
	}
	var names []string
	for _, name := range append(Stages[:len(Stages):len(Stages)], StageFFmpeg, StageCached) {
		if name == StageCached && !want[name] {
			continue
		}
		if name == StageFFmpeg && cfg.Cameras == nil {
			if want[name] {
				return nil, fmt.Errorf("bench: the ffmpeg stage needs decoded cameras (a dataset with video files; --cameras)")
			}
			continue
		}
		if len(want) == 0 || want[name] {
			names = append(names, name)
		}
	}
	runs := make([][]Stage, len(names))
	for k := 0; k < max(opts.Count, 1); k++ {
		for i, name := range names {
			st, err := measure(ctx, cfg, name, workers, opts)
			if err != nil {
				return nil, err
			}
			runs[i] = append(runs[i], st)
		}
	}
	for _, r := range runs {
		sort.Slice(r, func(a, b int) bool { return r[a].Seconds < r[b].Seconds })
		rep.Stages = append(rep.Stages, r[len(r)/2])
	}
	rep.Count = max(opts.Count, 1)
	if scan := rep.Stage(StageScan); scan != nil && scan.FramesPerSec > 0 {
		if s := rep.Stage(StageStream); s != nil {
			rep.StreamOverScan = s.FramesPerSec / scan.FramesPerSec
		}
		if s := rep.Stage(StageRender); s != nil {
			rep.RenderOverScan = s.FramesPerSec / scan.FramesPerSec
		}
	}
	if ff, s := rep.Stage(StageFFmpeg), rep.Stage(StageStream); ff != nil && s != nil && ff.CameraFramesPerSec > 0 {
		rep.StreamOverFFmpeg = s.CameraFramesPerSec / ff.CameraFramesPerSec
	}
	if ff, s := rep.Stage(StageFFmpeg), rep.Stage(StageCached); ff != nil && s != nil && ff.CameraFramesPerSec > 0 {
		rep.CachedOverFFmpeg = s.CameraFramesPerSec / ff.CameraFramesPerSec
	}
	return rep, nil
}

// measure runs one stage on a byte-counting view of cfg.Source.
func measure(ctx context.Context, cfg *pipeline.Config, name string, workers int, opts Options) (Stage, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	src := &countingSource{Source: cfg.Source}
	c := *cfg
	c.Source = src
	c.Workers = workers
	c.Progress = nil

	// Start every stage from the same state: garbage collected, memory
	// returned to the OS, RSS high-water mark reset.
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	start := time.Now()

	st := Stage{Name: name}
	var err error
	if name == StageStream && c.Cameras != nil && c.Cameras.Frames != nil {
		// The stream stage decodes: the frame cache is the cached
		// stage's.
		frames := c.Cameras.Frames
		c.Cameras.Frames = nil
		defer func() { c.Cameras.Frames = frames }()
	}
	switch name {
	case StageScan:
		st.Frames, err = naiveScan(ctx, &c, workers)
	case StageDecode:
		st.Frames, err = decode(ctx, &c, workers)
	case StageRender:
		st.Frames, st.Rendered, err = renderOnly(ctx, &c)
	case StageStream, StageCached:
		started := processesStarted(&c)
		st.Frames, st.Rendered, st.Batches, st.OutBytes, err = stream(ctx, &c, opts)
		if c.Cameras != nil {
			st.CameraFrames = st.Frames * int64(len(c.Cameras.Cameras))
			st.FFmpegProcesses = processesStarted(&c) - started
		}
	case StageFFmpeg:
		st.CameraFrames, err = ffmpegFloor(ctx, &c)
		st.Frames = st.CameraFrames
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&m1)
	if err != nil {
		return st, fmt.Errorf("bench %s: %w", name, err)
	}
	st.PeakRSS = peakRSS()
	if c.Cameras != nil {
		if st.CameraFrames > 0 && elapsed > 0 {
			st.CameraFramesPerSec = float64(st.CameraFrames) / elapsed.Seconds()
		}
	}
	st.Bytes = src.read.Load()
	st.Seconds = elapsed.Seconds()
	st.CPUSeconds = cpu.Seconds()
	if st.Frames > 0 && st.Seconds > 0 {
		f := float64(st.Frames)
		st.FramesPerSec = f / st.Seconds
		st.MBPerSec = float64(st.Bytes) / 1e6 / st.Seconds
		st.NsPerFrame = float64(elapsed.Nanoseconds()) / f
		st.CPUNsPerFrame = float64(cpu.Nanoseconds()) / f
		st.AllocsPerFrame = float64(m1.Mallocs-m0.Mallocs) / f
		st.AllocBytesPerFrame = float64(m1.TotalAlloc-m0.TotalAlloc) / f
	}
	return st, nil
}

// decode reads every unit of cfg's plan with lrstream's reader
// (shard.ReadUnit) on workers goroutines, in any order, and touches every
// decoded value; nothing is rendered.
func decode(ctx context.Context, cfg *pipeline.Config, workers int) (int64, error) {
	units, err := pipeline.PlanUnits(ctx, cfg)
	if err != nil {
		return 0, err
	}
	opts := shard.Options{Features: cfg.Features}
	var (
		frames atomic.Int64
		sum    atomic.Uint64 // of the touched values: keeps the touches from being optimised away
	)
	err = parallel(ctx, len(units), workers, func(ctx context.Context, i int) error {
		b, err := shard.ReadUnit(ctx, cfg.Source, cfg.Dataset, units[i], opts)
		if err != nil {
			return err
		}
		frames.Add(int64(b.Len()))
		sum.Add(Touch(b))
		return nil
	})
	return frames.Load(), err
}

// renderOnly runs the pipeline (decode + render, ordered) and counts the
// outcomes, without batching or encoding.
func renderOnly(ctx context.Context, cfg *pipeline.Config) (frames, rendered int64, err error) {
	var st pipeline.Stats
	err = pipeline.Run(ctx, cfg, func(c *pipeline.Chunk) error { return st.Count(cfg, c) })
	return st.Frames, st.Rendered, err
}

// stream runs the whole pipeline into sink.Discard.
func stream(ctx context.Context, cfg *pipeline.Config, opts Options) (frames, rendered, batches, out int64, err error) {
	s := sink.Discard()
	st, err := pipeline.Stream(ctx, cfg, pipeline.StreamOptions{BatchSize: opts.BatchSize, Version: opts.Version}, s)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	kept := st.Rendered + st.Passthrough
	batches = (kept + int64(opts.BatchSize) - 1) / int64(opts.BatchSize)
	return st.Frames, st.Rendered, batches, s.BytesWritten(), nil
}

// Touch reads every value of a decoded batch (core columns, every frame's
// persistent and event rows, feature bytes) and returns a checksum, so that
// the scan stage pays for everything it decoded.
func Touch(b *shard.Batch) uint64 {
	var h uint64
	for i := range b.Index {
		h += uint64(b.Index[i]) ^ uint64(b.EpisodeIndex[i]) ^ uint64(b.FrameIndex[i]) ^ uint64(b.TaskIndex[i])
		h += uint64(math.Float32bits(b.Timestamp[i]))
		h += touchRows(b.PersistentRows(i)) + touchRows(b.EventRows(i))
	}
	for _, f := range b.Features {
		d := f.Data
		for len(d) >= 8 {
			h += binary.LittleEndian.Uint64(d)
			d = d[8:]
		}
		for _, c := range d {
			h += uint64(c)
		}
	}
	return h
}

func touchRows(rows []schema.Row) uint64 {
	var h uint64
	for i := range rows {
		r := &rows[i]
		h += uint64(len(r.Role)) + uint64(len(r.ToolCalls)) + math.Float64bits(r.Timestamp)
		for _, s := range [3]*string{r.Content, r.Style, r.Camera} {
			if s != nil {
				h += uint64(len(*s))
			}
		}
	}
	return h
}

// processesStarted is how many ffmpeg processes cfg's camera decoder has
// started (0 for another decoder).
func processesStarted(cfg *pipeline.Config) int64 {
	if cfg.Cameras == nil {
		return 0
	}
	if ff, ok := cfg.Cameras.Decoder.(*video.FFmpeg); ok {
		return int64(ff.ProcessesStarted())
	}
	return 0
}
