package pipeline

import (
	"context"
	"fmt"

	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
)

// LanguageCoverage counts the selected frames of cfg with language (at
// least one language_persistent or language_events row) and without. It
// reads only the language and core columns (no numeric feature is
// decoded) of every selected row group: one pass over the smallest
// columns of the dataset.
type LanguageCoverage struct {
	With, Without int64
	// FirstWithout is the dataset index and episode of the first frame
	// without language (-1 when there is none).
	FirstWithout, FirstWithoutEpisode int64
}

// CheckLanguage computes cfg's LanguageCoverage.
func CheckLanguage(ctx context.Context, cfg *Config) (LanguageCoverage, error) {
	cov := LanguageCoverage{FirstWithout: -1, FirstWithoutEpisode: -1}
	units, err := shard.PlanWith(ctx, cfg.Source, cfg.Dataset, cfg.Selection, shard.PlanOptions{Footers: cfg.Footers})
	if err != nil {
		return cov, err
	}
	for _, u := range units {
		b, err := shard.ReadUnit(ctx, cfg.Source, cfg.Dataset, u, shard.Options{Features: []string{}})
		if err != nil {
			return cov, err
		}
		for i := 0; i < b.Len(); i++ {
			if len(b.PersistentRows(i)) > 0 || len(b.EventRows(i)) > 0 {
				cov.With++
				continue
			}
			if cov.Without == 0 {
				cov.FirstWithout, cov.FirstWithoutEpisode = b.Index[i], b.EpisodeIndex[i]
			}
			cov.Without++
		}
	}
	return cov, nil
}

// CheckBatchable reports why cfg's mode cannot be batched, or nil. Under
// --mode drop a frame without language passes through without messages,
// and a batch cannot hold samples with and without messages: drop works
// only when every selected frame has language (or none has). The
// fallback mode renders the task for such frames, so it always batches;
// so does a run without a recipe (no frame carries messages).
func CheckBatchable(ctx context.Context, cfg *Config) error {
	if cfg.Mode != render.ModeDrop || cfg.Recipe == nil {
		return nil
	}
	cov, err := CheckLanguage(ctx, cfg)
	if err != nil {
		return err
	}
	if cov.With > 0 && cov.Without > 0 {
		return fmt.Errorf("--mode drop cannot batch %s: %d of %d selected frames have no language (the first: index %d, episode %d) and would pass through without messages, which cannot share a batch with rendered frames; use --mode fallback (the default: LeRobot's RenderMessagesStep renders the task for them) or select episodes that all have language",
			cfg.Dataset.ID, cov.Without, cov.With+cov.Without, cov.FirstWithout, cov.FirstWithoutEpisode)
	}
	return nil
}
