package pipeline

import (
	"context"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/video"
)

// CheckStart refuses, before anything is read or written, what a stream
// of srcs would refuse only at its first batch: --delta-timestamps keys
// that are not columns of the batches and offsets that are not multiples
// of 1/fps, and, for a training stream (to non-nil, as TrainMix gets it),
// its options (mixture, order, partitions, resume token) and its spill's
// worst case against its directory's free space. Commands call it
// before their progress line, so that a failing run prints only its error.
func CheckStart(srcs []Mix, so StreamOptions, to *TrainOptions) error {
	for _, m := range srcs {
		if err := checkDeltas(m.Config); err != nil {
			return err
		}
	}
	if to != nil {
		ts, err := trainSetup(srcs, so, *to)
		if err != nil {
			return err
		}
		return checkSpillSpace(srcs, ts)
	}
	if len(srcs) > 1 {
		// serve checks its mixture here, before any client connects.
		return checkMix(srcs)
	}
	return nil
}

// checkDeltas resolves cfg.Deltas against the columns the batches will
// carry — the numeric features read (shard's feature list: cfg.Features,
// or every numeric feature but the core columns), then the decoded
// cameras — as the stream does with its first chunk's columns.
func checkDeltas(cfg *Config) error {
	if len(cfg.Deltas) == 0 {
		return nil
	}
	var cols []collate.Feature
	if cfg.Features != nil {
		for _, n := range cfg.Features {
			cols = append(cols, collate.Feature{Name: n})
		}
	} else {
		for _, f := range cfg.Dataset.Info.Features {
			if f.IsNumeric() && !isCore(f.Name) {
				cols = append(cols, collate.Feature{Name: f.Name})
			}
		}
	}
	if cfg.Cameras != nil {
		for _, c := range cfg.Cameras.Cameras {
			cols = append(cols, collate.Feature{Name: c.Key})
		}
	}
	if cfg.Images != nil {
		for _, c := range cfg.Images.Cameras {
			cols = append(cols, collate.Feature{Name: c.Key})
		}
	}
	tol := cfg.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	if err := deltaCameraKeys(cfg, cols); err != nil {
		return err
	}
	_, err := ResolveDeltas(cfg.Deltas, cfg.Dataset.Info.FPS, tol, cols)
	return err
}

// AutoCameras returns the cameras --cameras auto would decode on cfg's
// dataset and selection (those whose video files exist, and image
// features), without setting up any decoding: what a command defaulting
// to another --cameras leaves out compared with stream's default.
func AutoCameras(ctx context.Context, cfg *Config) ([]string, error) {
	info := &cfg.Dataset.Info
	if len(video.Keys(info)) == 0 && len(video.ImageKeys(info)) == 0 {
		return nil, nil
	}
	var spans []shard.VideoSpan
	if len(video.Keys(info)) > 0 {
		var err error
		if spans, err = shard.EpisodeVideos(ctx, cfg.Source, cfg.Dataset); err != nil {
			spans = nil // auto streams without the videos it cannot locate
		}
	}
	sel, err := shareSelection(cfg.Dataset, cfg.Selection, cfg.Share)
	if err != nil {
		return nil, err
	}
	var eps []int64
	for _, e := range cfg.Dataset.Episodes {
		if sel.Contains(e.Index) {
			eps = append(eps, e.Index)
		}
	}
	ch, err := video.Resolve(video.ModeAuto, info, spans, eps, video.FileExists(ctx, cfg.Source))
	if err != nil {
		return nil, err
	}
	return ch.Decoded, nil
}
