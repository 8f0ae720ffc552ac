package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/sink"
)

// Stats counts what became of the frames of a run.
type Stats struct {
	// Frames read; of them Rendered (with messages, task fallbacks
	// included), Fallback (rendered as the task fallback), Dropped (None
	// renders), Passthrough (kept without messages) and Errors (render
	// failures skipped with SkipErrors).
	Frames, Rendered, Fallback, Dropped, Passthrough, Errors int64
	// Components counts recipe renders per blend component, in
	// Recipe.Components order.
	Components []int64
	// Skipped groups the frames skipped because their rendering failed
	// by error message (bounded: see ErrorGroups).
	Skipped ErrorGroups
	// HeldPeak is, in a training iteration, the most frames held at once
	// decoded and waiting to be served: this consumer's share of the
	// shuffle buffer plus the episodes being read (docs/training.md,
	// "Memory"). Their memory is about HeldPeak × SampleBytes.
	HeldPeak int64
	// SpillPeak is, with TrainOptions.Spill, the most bytes of held
	// frames the spill file held at once.
	SpillPeak int64
	// Unserved is, in a training iteration, the frames of the epochs
	// planned that no consumer serves (the same for every consumer;
	// order.Plan.Unserved): fewer than consumers × batch size an epoch.
	Unserved int64
}

// Count adds chunk c's outcomes to s. Without skipErrors the first failed
// frame is returned as a *FrameError and counting stops there.
func (s *Stats) Count(cfg *Config, c *Chunk) error {
	if s.Components == nil {
		s.Components = make([]int64, len(cfg.Recipe.Components()))
	}
	for i := range c.Results {
		r := &c.Results[i]
		switch r.Outcome {
		case render.Failed:
			fe := c.FrameErr(cfg.Dataset.ID, i)
			if !cfg.SkipErrors {
				return fe
			}
			s.Errors++
			s.Skipped.Add(fe)
			if cfg.MaxErrors > 0 && s.Errors > cfg.MaxErrors {
				return fmt.Errorf("more than %d frames failed to render (--max-errors %d); the last: %w", cfg.MaxErrors, cfg.MaxErrors, fe)
			}
		case render.Rendered, render.Passthrough:
			s.countKept(r)
			continue
		case render.Dropped:
			s.Dropped++
		}
		s.Frames++
	}
	return nil
}

// countKept counts a frame that renders or passes through. Components
// must be sized for the recipe.
func (s *Stats) countKept(r *render.Result) {
	s.Frames++
	if r.Outcome == render.Passthrough {
		s.Passthrough++
		return
	}
	s.Rendered++
	switch {
	case r.Fallback:
		s.Fallback++
	case r.Component >= 0 && r.Component < len(s.Components):
		s.Components[r.Component]++
	case len(s.Components) == 1: // a message recipe: component -1
		s.Components[0]++
	}
}

// StreamOptions shape the batches of Stream.
type StreamOptions struct {
	BatchSize    int
	DropLast     bool
	KeepLanguage bool
	// Version is the lrstream version written into the header.
	Version string
	// Options is a JSON object of the options that shaped the stream,
	// written into the header.
	Options json.RawMessage
	// Epoch is written into every batch's envelope.
	Epoch int64
}

// Stream runs cfg and writes header, batches and end to s. On failure it
// writes an in-band error to s (after whatever was already written) and
// returns the error.
func Stream(ctx context.Context, cfg *Config, so StreamOptions, s sink.Sink) (*Stats, error) {
	ps := &plainStream{cfg: cfg, so: so, s: s, st: &Stats{}}
	err := Run(ctx, cfg, ps.chunk)
	if err == nil && ps.b == nil {
		err = ps.start(infoFeatures(cfg))
	}
	if err == nil {
		var last *collate.Batch
		if last, err = ps.b.Flush(); err == nil {
			err = ps.writeBatch(last)
		}
	}
	if ps.enc != nil {
		// Every batch is written (or the first error known) before End or
		// Fail touch the sink.
		if cerr := ps.enc.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = s.End(endOf(cfg, ps.st, ps.b))
	}
	if err != nil {
		_ = s.Fail(err)
		return ps.st, err
	}
	return ps.st, nil
}

// plainStream is one Stream: a sequential pass in plan order, batched.
type plainStream struct {
	cfg *Config
	so  StreamOptions
	s   sink.Sink
	st  *Stats
	b   *collate.Batcher // set with the header, at the first chunk
	fl  *filler
	// enc encodes batches in parallel and writes them in order (same
	// bytes as s.Batch one by one), with a msgpack sink and several
	// workers.
	enc   *sink.Encoder
	seq   int64
	frame collate.Frame
}

// start makes the filler and the batcher for the stream's features and
// writes the header.
func (ps *plainStream) start(features []collate.Feature) error {
	cfg, so := ps.cfg, ps.so
	var err error
	if ps.fl, err = newStreamFiller(cfg, features); err != nil {
		return err
	}
	ps.b, err = collate.NewBatcher(collate.Config{
		BatchSize: so.BatchSize, DropLast: so.DropLast,
		Features: ps.fl.out, KeepLanguage: so.KeepLanguage,
	})
	if err != nil {
		return err
	}
	if err := ps.s.Header(Header(cfg, so, ps.b)); err != nil {
		return err
	}
	if es, ok := ps.s.(sink.EncodedSink); ok && workerCount(cfg) > 1 {
		ps.enc = sink.NewEncoder(es, workerCount(cfg), ps.b.Recycle)
	}
	return nil
}

// writeBatch writes a completed batch (nil: none).
func (ps *plainStream) writeBatch(bt *collate.Batch) error {
	if bt == nil {
		return nil
	}
	meta := sink.BatchMeta{Seq: ps.seq, Epoch: ps.so.Epoch}
	ps.seq++
	if ps.enc != nil {
		return ps.enc.Batch(bt, meta)
	}
	err := ps.s.Batch(bt, meta)
	ps.b.Recycle(bt)
	return err
}

// chunk counts a decoded chunk's outcomes and batches its kept frames.
func (ps *plainStream) chunk(c *Chunk) error {
	cfg := ps.cfg
	if ps.b == nil {
		if err := ps.start(chunkFeatures(c)); err != nil {
			return err
		}
	}
	if err := ps.st.Count(cfg, c); err != nil {
		return err
	}
	bt := c.Batch
	frame := &ps.frame
	for i := range c.Results {
		r := &c.Results[i]
		switch r.Outcome {
		case render.Dropped:
			ps.b.AddNone()
			continue
		case render.Failed:
			continue
		}
		frame.Index, frame.EpisodeIndex = bt.Index[i], bt.EpisodeIndex[i]
		frame.FrameIndex, frame.TaskIndex = bt.FrameIndex[i], bt.TaskIndex[i]
		frame.Timestamp, frame.Task = bt.Timestamp[i], c.Tasks[i]
		frame.Sample = nil
		if r.Outcome == render.Rendered {
			frame.Sample = r.Sample
		}
		if err := ps.fl.fill(frame, c, i); err != nil {
			return err
		}
		if ps.so.KeepLanguage {
			frame.Persistent, frame.Events = bt.PersistentRows(i), bt.EventRows(i)
		}
		out, err := ps.b.Add(frame)
		if err != nil {
			return fmt.Errorf("%s row group %d: episode %d, index %d: %w",
				c.Unit.File, c.Unit.RowGroup, bt.EpisodeIndex[i], bt.Index[i], err)
		}
		if err := ps.writeBatch(out); err != nil {
			return err
		}
	}
	c.releaseFrames(cfg) // the batcher copied every sample's frames
	return nil
}

// workerCount is cfg.Workers, or GOMAXPROCS by default.
func workerCount(cfg *Config) int {
	if cfg.Workers > 0 {
		return cfg.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// ModeName is the mode a header records for cfg: the render mode, or
// sink.ModeNoRecipe without a recipe (cfg.Mode is then ignored).
func ModeName(cfg *Config) string {
	if cfg.Recipe == nil {
		return sink.ModeNoRecipe
	}
	return cfg.Mode.String()
}

// Header describes the stream of cfg batched by b.
func Header(cfg *Config, so StreamOptions, b *collate.Batcher) sink.Header {
	ds := cfg.Dataset
	tools := ds.Info.Tools
	if tools == nil {
		tools, _ = json.Marshal(schema.DefaultTools())
	}
	var comps []string
	if cfg.Recipe.IsBlend() {
		comps = cfg.Recipe.Components()
	}
	return sink.Header{
		Version:      so.Version,
		Dataset:      ds.ID,
		Revision:     ds.Revision,
		Pins:         headerPins(cfg),
		FPS:          int(math.Round(ds.Info.FPS)),
		Recipe:       cfg.Recipe.Name(),
		RecipeSHA256: cfg.Recipe.SHA256(),
		Mode:         ModeName(cfg),
		BatchSize:    so.BatchSize,
		DropLast:     so.DropLast,
		KeepLanguage: so.KeepLanguage,
		Features:     b.Columns(),
		Tools:        tools,
		Options:      so.Options,
		Components:   comps,
		Cameras:      cameraHeader(cfg),
		Share: sink.Share{
			Worker: cfg.Share.Worker, NumWorkers: max(cfg.Share.NumWorkers, 1),
			WorldSize: 1,
		},
	}
}

func endOf(cfg *Config, st *Stats, b *collate.Batcher) sink.End {
	cnt := b.Counts()
	e := sink.End{
		Frames: st.Frames, Rendered: st.Rendered, Dropped: st.Dropped,
		Passthrough: st.Passthrough, Errors: st.Errors,
		Batches: cnt.Batches, Samples: cnt.Kept - cnt.DroppedLast,
	}
	if cfg.Recipe.IsBlend() {
		for i, name := range cfg.Recipe.Components() {
			var n int64
			if i < len(st.Components) {
				n = st.Components[i]
			}
			e.Components = append(e.Components, sink.ComponentCount{Name: name, Count: n})
		}
	}
	return e
}

// newStreamFiller resolves cfg.Deltas against the stream's features.
func newStreamFiller(cfg *Config, features []collate.Feature) (*filler, error) {
	tol := cfg.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	if err := deltaCameraKeys(cfg, features); err != nil {
		return nil, err
	}
	deltas, err := ResolveDeltas(cfg.Deltas, cfg.Dataset.Info.FPS, tol, features)
	if err != nil {
		return nil, err
	}
	return newFiller(features, deltas), nil
}

// chunkFeatures is the numeric feature schema of a decoded chunk.
func chunkFeatures(c *Chunk) []collate.Feature {
	out := make([]collate.Feature, len(c.Batch.Features))
	for i, f := range c.Batch.Features {
		out[i] = collate.Feature{Name: f.Name, DType: f.DType, Shape: f.Shape}
	}
	return out
}

// infoFeatures is the numeric feature schema info.json declares, used for
// the header of a stream without any frame.
func infoFeatures(cfg *Config) []collate.Feature {
	var out []collate.Feature
	want := map[string]bool{}
	for _, n := range cfg.Features {
		want[n] = true
	}
	for _, f := range cfg.Dataset.Info.Features {
		if !f.IsNumeric() || isCore(f.Name) || (cfg.Features != nil && !want[f.Name]) {
			continue
		}
		dt, ok := numpyDType(f.DType)
		if !ok {
			continue
		}
		// As the chunks' features (readEmitted): LeRobot's dtype and shape.
		if e, err := collate.Emitted(collate.Feature{Name: f.Name, DType: dt, Shape: f.Shape}); err == nil {
			out = append(out, e)
		}
	}
	return out
}

func isCore(name string) bool {
	switch name {
	case "index", "timestamp", "episode_index", "frame_index", "task_index":
		return true
	}
	return false
}

func numpyDType(dt string) (string, bool) {
	switch dt {
	case "float32":
		return "<f4", true
	case "float64":
		return "<f8", true
	case "float16":
		return "<f2", true
	case "int64":
		return "<i8", true
	case "int32":
		return "<i4", true
	case "int16":
		return "<i2", true
	case "int8":
		return "|i1", true
	case "uint8":
		return "|u1", true
	case "uint16":
		return "<u2", true
	case "uint32":
		return "<u4", true
	case "uint64":
		return "<u8", true
	case "bool":
		return "|b1", true
	}
	return "", false
}
