package validate

import (
	"context"
	"fmt"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/render"
)

// recipe renders every frame with the recipe (as `lrstream inspect`
// does) and reports what it will do: bindings that fail on every frame,
// components reading a language column the dataset lacks, components never
// chosen, frames whose render fails (grouped by message), and whether the
// mode can batch (with --mode drop, frames that pass through without
// messages cannot share a batch with rendered ones).
func (v *validator) recipe(ctx context.Context) {
	rec := v.opts.Recipe
	v.checked(fmt.Sprintf("recipe %s in mode %s: static bindings, components that never fire, frames whose render fails, batching", rec.Name(), v.opts.Mode))
	for _, ci := range rec.Describe() {
		name := ci.Name
		if name == "" {
			name = "(message recipe)"
		}
		for _, b := range ci.Bindings {
			if b.Err != nil {
				v.c.add(Finding{Severity: Error, Check: CheckRecipe, Message: fmt.Sprintf("component %s: binding %s: %v (every frame resolving it fails)", name, b.Name, b.Err)})
			}
			if b.Column != "" && !v.ds.Info.HasLanguage(string(b.Column)) {
				v.c.add(Finding{Severity: Warning, Check: CheckRecipe, Column: string(b.Column),
					Message: fmt.Sprintf("component %s: binding %s reads %s, which this dataset does not declare: it never resolves", name, b.Name, b.Column)})
			}
		}
	}
	ds := *v.ds
	ds.Tolerate = func(error) {} // already reported by the data checks
	cfg := &pipeline.Config{Source: v.src, Dataset: &ds, Recipe: rec, Mode: v.opts.Mode, NoTaskAug: v.opts.NoTaskAug,
		SkipErrors: true, Features: []string{}}
	st := &pipeline.Stats{}
	err := pipeline.Run(ctx, cfg, func(c *pipeline.Chunk) error { return st.Count(cfg, c) })
	if err != nil {
		v.c.add(Finding{Severity: Error, Check: CheckRecipe, Message: "rendering stopped: " + err.Error()})
		v.notChecked("recipe outcomes past the error that stopped rendering")
		return
	}
	// Failures are grouped by message (pipeline.ErrorGroups, bounded):
	// the first frames of each, then a count of the rest.
	for _, g := range st.Skipped.Groups {
		for _, fe := range g.First {
			v.c.add(Finding{Severity: Error, Check: CheckRecipe, File: fe.File, RowGroup: iptr(fe.RowGroup), Episode: i64(fe.Episode), Index: i64(fe.Index),
				Message: "render fails: " + pipeline.RootMessage(fe.Err)})
		}
		if more := g.Count - int64(len(g.First)); more > 0 {
			v.c.add(Finding{Severity: Error, Check: CheckRecipe, Message: fmt.Sprintf("render fails on %d more frames: %s", more, g.Message)})
		}
	}
	if st.Skipped.Other > 0 {
		v.c.add(Finding{Severity: Error, Check: CheckRecipe, Message: fmt.Sprintf("render fails on %d more frames with other errors", st.Skipped.Other)})
	}
	v.c.add(Finding{Severity: Info, Check: CheckRecipe, Message: fmt.Sprintf("%d frames: rendered %d (task fallback %d), dropped %d, passthrough %d, failing %d",
		st.Frames, st.Rendered, st.Fallback, st.Dropped, st.Passthrough, st.Errors)})
	names := rec.Components()
	for i, ci := range rec.Describe() {
		if i < len(st.Components) && st.Components[i] == 0 && rec.IsBlend() {
			why := "never chosen"
			if ci.Probability == 0 && ci.Route == "" {
				why = "never chosen (weight 0)"
			}
			v.c.add(Finding{Severity: Warning, Check: CheckRecipe, Message: fmt.Sprintf("component %s rendered no frame of %d: %s, or renders None on this dataset", names[i], st.Frames, why)})
		}
	}
	if !rec.IsBlend() && len(st.Components) == 1 && st.Components[0] == 0 && st.Frames > 0 {
		v.c.add(Finding{Severity: Warning, Check: CheckRecipe, Message: fmt.Sprintf("the recipe rendered no frame of %d: every frame renders None (dropped, or the task fallback)", st.Frames)})
	}
	if v.opts.Mode == render.ModeDrop && st.Passthrough > 0 && st.Rendered > 0 {
		v.c.add(Finding{Severity: Error, Check: CheckRecipe, Message: fmt.Sprintf("--mode drop cannot batch this dataset: %d frames pass through without messages and %d render messages, and a batch cannot mix them (use --mode fallback)", st.Passthrough, st.Rendered)})
	}
}
