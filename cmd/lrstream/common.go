package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"golang.org/x/term"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
)

// runFlags are the flags every command that renders a dataset shares.
type runFlags struct {
	dataset, recipe   string
	mode              string
	noTaskAug         bool
	episodes, exclude string
	features          string
	onError           string
	workers           int
	cache             string
	deltas            string
	tolerance         float64
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dataset, "dataset", "", "local dataset directory or Hub dataset ORG/NAME[@REVISION] (default: the embedded demo dataset)")
	fs.StringVar(&f.recipe, "recipe", "", "recipe YAML file (default with the demo dataset: its demo recipe)")
	fs.StringVar(&f.mode, "mode", "drop", "what None renders and frames without language become: drop or fallback")
	fs.BoolVar(&f.noTaskAug, "no-task-aug", false, "pass the canonical task explicitly (LeRobot main's RenderMessagesStep): no task_aug rotation")
	fs.StringVar(&f.episodes, "episodes", "", "episodes to read, e.g. 0-9,12 (default all)")
	fs.StringVar(&f.exclude, "exclude-episodes", "", "episodes to skip, e.g. 3,5-7")
	fs.StringVar(&f.features, "features", "", "numeric features to emit, comma-separated (default every numeric feature; \"none\" for none)")
	fs.StringVar(&f.onError, "on-error", "fail", "a frame whose rendering fails: fail (stop) or skip (count it, report it at the end)")
	fs.IntVar(&f.workers, "workers", 0, "row groups decoded and rendered in parallel (default: the number of cores)")
	fs.StringVar(&f.deltas, "delta-timestamps", "", "gather features at time offsets within the episode, LeRobot delta_timestamps style: KEY=SECONDS,... e.g. 'action=0:50/30,observation.state=-1/30,0' (docs/training.md)")
	fs.Float64Var(&f.tolerance, "tolerance-s", pipeline.DefaultTolerance, "delta timestamps must be multiples of 1/fps within this many seconds")
	fs.StringVar(&f.cache, "cache", "full", "Hub data shards: full (download into the HF cache) or none (stream byte ranges)")
}

// open builds the pipeline configuration the flags describe.
func (f *runFlags) open(ctx context.Context, e *env) (*pipeline.Config, error) {
	mode, err := render.ParseMode(f.mode)
	if err != nil {
		return nil, err
	}
	if f.onError != "fail" && f.onError != "skip" {
		return nil, fmt.Errorf("--on-error must be fail or skip, not %q", f.onError)
	}
	deltas, err := pipeline.ParseDeltaTimestamps(f.deltas)
	if err != nil {
		return nil, err
	}
	sel, err := shard.ParseSelection(f.episodes, f.exclude)
	if err != nil {
		return nil, err
	}
	var features []string
	switch f.features {
	case "":
	case "none":
		features = []string{}
	default:
		for _, n := range strings.Split(f.features, ",") {
			if n = strings.TrimSpace(n); n != "" {
				features = append(features, n)
			}
		}
	}
	var src fetch.Source
	var rec *render.Recipe
	if f.dataset == "" {
		src = fetch.NewFS(lrstream.DemoName, lrstream.Demo())
		if f.recipe == "" {
			if rec, err = render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml"); err != nil {
				return nil, err
			}
		}
	} else {
		opts, err := fetch.HubOptionsFromEnv(e.getenv)
		if err != nil {
			return nil, err
		}
		if opts.Cache, err = fetch.ParseCacheMode(f.cache); err != nil {
			return nil, err
		}
		if isTerminal(e.stderr) {
			opts.Progress = e.stderr
		}
		if f.recipe == "" {
			return nil, fmt.Errorf("--recipe is required with --dataset")
		}
		if src, err = fetch.OpenDataset(ctx, f.dataset, opts); err != nil {
			return nil, err
		}
	}
	if rec == nil {
		if rec, err = render.LoadFile(f.recipe); err != nil {
			return nil, err
		}
	}
	ds, err := shard.OpenDataset(ctx, src)
	if err != nil {
		return nil, err
	}
	for _, n := range features {
		ft, ok := ds.Info.Feature(n)
		if !ok {
			return nil, fmt.Errorf("--features: %s has no feature %q", ds.ID, n)
		}
		if !ft.IsNumeric() {
			return nil, fmt.Errorf("--features: %q is a %s feature; only numeric features are emitted (video and image features are not decoded)", n, ft.DType)
		}
	}
	return &pipeline.Config{
		Source: src, Dataset: ds, Recipe: rec, Mode: mode, NoTaskAug: f.noTaskAug,
		Selection: sel, Features: features, SkipErrors: f.onError == "skip", Workers: f.workers,
		Deltas: deltas, Tolerance: f.tolerance,
	}, nil
}

// optionsJSON records the options that shape the output, for headers.
func (f *runFlags) optionsJSON(extra map[string]any) json.RawMessage {
	m := map[string]any{
		"mode": f.mode, "no_task_aug": f.noTaskAug, "episodes": f.episodes,
		"exclude_episodes": f.exclude, "features": f.features, "on_error": f.onError,
		"delta_timestamps": f.deltas, "tolerance_s": f.tolerance,
	}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m) // map keys are sorted: deterministic
	return b
}

// reportSkipped lists every frame skipped with --on-error skip.
func reportSkipped(w io.Writer, st *pipeline.Stats) {
	if len(st.Skipped) == 0 {
		return
	}
	fmt.Fprintf(w, "skipped %d frame(s) whose rendering failed:\n", len(st.Skipped))
	for _, fe := range st.Skipped {
		fmt.Fprintf(w, "  %v\n", fe)
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// version is the lrstream version recorded in headers and indexes.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "devel-" + s.Value[:12]
			}
		}
	}
	return "devel"
}

// parseFlags parses args with fs, printing usage on error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return exitError{2}
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return exitError{2}
	}
	return nil
}
