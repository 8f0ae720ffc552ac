package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/term"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/textdist"
	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// runFlags are the flags every command that renders a dataset shares.
type runFlags struct {
	datasets          datasetList
	recipe            string
	mode              string
	noTaskAug         bool
	episodes, exclude string
	features          string
	onError           string
	maxErrors         int64
	workers           int
	hub               hubFlags
	frameCache        frameCacheFlags
	deltas            string
	tolerance         float64
	onInconsistent    string
	strict            bool
	// cameras and resize are --cameras and --resize; camerasDefault is
	// the command's --cameras default ("auto" unless set before register).
	cameras, resize, camerasDefault string
	// videoBackend is --video-backend.
	videoBackend string
	// depthUnit is --depth-unit (mm or m).
	depthUnit string
	// evalSplit and split are --eval-split and --split.
	evalSplit float64
	split     string
	// pieceMB is --piece-mb: the decoded frames of one decoding job.
	pieceMB int64
	// noBatchCheck skips the --mode drop batching check (inspect does
	// not batch; it warns from its own counts instead).
	noBatchCheck bool
	// unrendered is set by openMix when the run has no recipe (nothing
	// rendered; headers record mode "none").
	unrendered bool
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.datasets, "dataset", "`SPEC`: a local dataset directory, Hub dataset ORG/NAME[@REVISION] or object store prefix s3://BUCKET/PREFIX or hf://buckets/NS/NAME[/PREFIX] (default: the embedded demo dataset); repeat as SPEC:WEIGHT to mix datasets (stream, serve)")
	fs.StringVar(&f.recipe, "recipe", "", "recipe YAML file rendering each frame's messages (docs/recipes.md); without one (or with \"none\") nothing is rendered: batches carry the frames' tasks, numeric features and cameras without messages, every frame kept, as a LeRobotDataset without RenderMessagesStep (default with the demo dataset: its demo recipe)")
	fs.StringVar(&f.mode, "mode", "fallback", "what None renders and frames without language become: fallback (LeRobot main's RenderMessagesStep: the task as one low_level user message) or drop (a None render drops the frame; frames without language pass through without messages, so drop batches only when every selected frame has language: checked before streaming). Needs a --recipe: without one no frame is rendered or dropped")
	fs.BoolVar(&f.noTaskAug, "no-task-aug", false, "pass the canonical task explicitly (LeRobot main's RenderMessagesStep): no task_aug rotation")
	fs.StringVar(&f.episodes, "episodes", "", "episodes to read, e.g. 0-9,12 (default all)")
	fs.StringVar(&f.exclude, "exclude-episodes", "", "episodes to skip, e.g. 3,5-7")
	fs.Float64Var(&f.evalSplit, "eval-split", 0, "hold out this fraction of the selected episodes per task for evaluation, as LeRobot's DatasetConfig.eval_split (the last ceil(n*F) episodes of each task); --split says which part to stream (docs/reading.md)")
	fs.StringVar(&f.split, "split", "train", "with --eval-split: train (the episodes kept for training) or eval (the held-out ones)")
	fs.StringVar(&f.features, "features", "", "numeric features to emit, comma-separated (default every numeric feature; \"none\" for none)")
	fs.StringVar(&f.onError, "on-error", "fail", "a frame whose rendering fails: fail (stop) or skip (count it, report it at the end)")
	fs.Int64Var(&f.maxErrors, "max-errors", 0, "with --on-error skip: fail once more than N frames failed to render (0: no limit)")
	fs.IntVar(&f.workers, "workers", 0, "row groups decoded and rendered in parallel (default: the number of cores)")
	fs.StringVar(&f.deltas, "delta-timestamps", "", "gather features at time offsets within the episode, LeRobot delta_timestamps style: KEY=SECONDS,... e.g. 'action=0:50/30,observation.state=-1/30,0' (docs/training.md)")
	fs.Float64Var(&f.tolerance, "tolerance-s", pipeline.DefaultTolerance, "delta timestamps must be multiples of 1/fps within this many seconds")
	fs.StringVar(&f.onInconsistent, "on-inconsistent", "fail", "metadata that disagrees with itself or the data files (frames the index promises but cannot deliver): fail, or warn (report each on stderr and go on without those frames); docs/validate.md")
	fs.BoolVar(&f.strict, "strict", false, "fail instead of warning when --episodes names episodes the dataset does not have")
	def := f.camerasDefault
	if def == "" {
		def = "auto"
	}
	f.camerasDefault = def
	fs.StringVar(&f.cameras, "cameras", def, "camera frames in the batches: auto (the cameras whose video files exist), all, none, or KEY,KEY... (docs/video.md; needs FFmpeg)")
	fs.StringVar(&f.depthUnit, "depth-unit", "mm", "unit of depth cameras' float32 values: mm (as LeRobotDataset's depth_output_unit) or m (docs/video.md, Depth cameras)")
	fs.StringVar(&f.resize, "resize", "", "resize camera frames to HxW, e.g. 224x224 (bilinear: FFmpeg for videos, torchvision-exact for image features, see docs/video.md; default: the dataset's size)")
	fs.StringVar(&f.videoBackend, "video-backend", video.BackendTorchcodec, "the LeRobot video backend (LeRobotDataset's video_backend) whose RGB camera frames to reproduce where the two differ — 10- and 12-bit videos, videos tagged BT.709 or BT.2020: torchcodec, which LeRobot uses unless told otherwise, or pyav (docs/video.md, Which LeRobot backend)")
	fs.Int64Var(&f.pieceMB, "piece-mb", pipeline.DefaultPieceBytes>>20, "MiB of decoded camera frames per decoding job: longer episodes are decoded in pieces; in flight at most (workers+1) pieces (docs/video.md, Memory)")
	f.hub.register(fs)
	f.frameCache.register(fs)
}

// datasetList is the repeatable --dataset flag: SPEC or SPEC:WEIGHT.
type datasetList []datasetSpec

type datasetSpec struct {
	spec   string
	weight float64
}

func (l *datasetList) String() string {
	var parts []string
	for _, d := range *l {
		parts = append(parts, d.spec)
	}
	return strings.Join(parts, ",")
}

func (l *datasetList) Set(v string) error {
	d := datasetSpec{spec: v, weight: 1}
	if i := strings.LastIndex(v, ":"); i > 0 {
		if w, err := strconv.ParseFloat(v[i+1:], 64); err == nil {
			if !(w > 0) || math.IsInf(w, 0) {
				return fmt.Errorf("weight %q must be a positive number", v[i+1:])
			}
			d = datasetSpec{spec: v[:i], weight: w}
		}
	}
	*l = append(*l, d)
	return nil
}

// open builds the pipeline configuration the flags describe, for commands
// that read one dataset.
func (f *runFlags) open(ctx context.Context, e *env) (*pipeline.Config, error) {
	if len(f.datasets) > 1 {
		return nil, errors.New("several --dataset flags: only stream and serve mix datasets")
	}
	mix, err := f.openMix(ctx, e)
	if err != nil {
		return nil, err
	}
	return mix[0].Config, nil
}

// openMix opens every --dataset (the demo dataset when none is given).
func (f *runFlags) openMix(ctx context.Context, e *env) ([]pipeline.Mix, error) {
	specs := f.datasets
	if len(specs) == 0 {
		specs = datasetList{{spec: "", weight: 1}}
	}
	if err := f.chooseRecipe(specs); err != nil {
		return nil, err
	}
	var out []pipeline.Mix
	var rec *render.Recipe
	for _, d := range specs {
		cfg, err := f.openOne(ctx, e, d.spec, rec)
		if err != nil {
			return nil, err
		}
		rec = cfg.Recipe
		name := d.spec
		if name == "" {
			name = lrstream.DemoName
		}
		out = append(out, pipeline.Mix{Config: cfg, Weight: d.weight, Name: name})
	}
	return out, nil
}

// noRecipe is the --recipe value that asks for no recipe explicitly (a
// file of that name is given as ./none).
const noRecipe = "none"

// chooseRecipe decides whether the datasets of specs have a recipe (it is
// loaded by openOne, after the dataset's own checks, as before recipes
// were optional). Without --recipe the demo dataset (alone, or mixed only
// with itself) gets its demo recipe and any other dataset none; --recipe
// none asks for none. No recipe renders nothing: every frame is kept
// without messages, so --mode drop, which drops the frames a recipe
// renders as None, needs a recipe.
func (f *runFlags) chooseRecipe(specs datasetList) error {
	mode, err := render.ParseMode(f.mode)
	if err != nil {
		return err
	}
	demoOnly := true
	for _, d := range specs {
		demoOnly = demoOnly && d.spec == ""
	}
	f.unrendered = f.recipe == noRecipe || f.recipe == "" && !demoOnly
	if f.unrendered && mode == render.ModeDrop {
		return errors.New("--mode drop needs a --recipe: drop removes the frames a recipe renders as None; without a recipe nothing is rendered, every frame is kept without messages and --mode does not apply (docs/recipes.md)")
	}
	return nil
}

// loadRecipe loads the recipe chooseRecipe chose: nil for none, the demo
// recipe, or --recipe's file.
func (f *runFlags) loadRecipe() (*render.Recipe, error) {
	switch {
	case f.unrendered:
		return nil, nil
	case f.recipe == "":
		return render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	}
	return loadCheckedRecipe(f.recipe)
}

// loadCheckedRecipe loads a recipe file and runs `recipe check`'s checks
// on it (render.Recipe.Check: resolvers, styles and arguments every
// binding needs), so that a binding that can never resolve is refused at
// startup, with the YAML line of its component, rather than at the first
// frame that draws it.
func loadCheckedRecipe(path string) (*render.Recipe, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--recipe: %w", err)
	}
	r, err := render.Load(data, filepath.Base(path))
	if err == nil {
		err = r.Check()
	}
	if err != nil {
		return nil, fmt.Errorf("--recipe %s: %w (lrstream recipe check %s describes it)", path, withLine(data, err), path)
	}
	return r, nil
}

// noLanguageWarning is the warning for a recipe on a dataset without
// language columns: every frame renders as its task (the fallback), or
// with --mode drop passes through without messages; "" when the dataset
// has language.
func noLanguageWarning(ds *schema.Dataset, rec *render.Recipe, mode render.Mode) string {
	if rec == nil || ds.Info.HasLanguage(schema.ColumnPersistent) || ds.Info.HasLanguage(schema.ColumnEvents) {
		return ""
	}
	what := "renders every frame as its task (the fallback)"
	if mode == render.ModeDrop {
		what = "renders no frame: every frame passes through without messages (--mode drop)"
	}
	return fmt.Sprintf("%s has no language columns (no language_persistent or language_events in info.json): the recipe %s %s; without --recipe (or with --recipe none) the batches carry the frames without messages", ds.ID, rec.Name(), what)
}

// openOne opens one dataset; rec, when set, is the recipe already loaded
// (chooseRecipe must have run).
func (f *runFlags) openOne(ctx context.Context, e *env, dataset string, rec *render.Recipe) (*pipeline.Config, error) {
	mode, err := render.ParseMode(f.mode)
	if err != nil {
		return nil, err
	}
	if err := f.checkErrorFlags(); err != nil {
		return nil, err
	}
	deltas, err := pipeline.ParseDeltaTimestamps(f.deltas)
	if err != nil {
		return nil, err
	}
	sel, err := shard.ParseSelection(f.episodes, f.exclude)
	if err != nil {
		return nil, err
	}
	features := parseFeatures(f.features)
	src, err := f.datasetSource(ctx, e, dataset)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		if rec, err = f.loadRecipe(); err != nil {
			return nil, err
		}
	}
	openOpts, err := f.openOptions(e)
	if err != nil {
		return nil, err
	}
	ds, err := shard.OpenDatasetWith(ctx, src, openOpts)
	if err != nil {
		return nil, err
	}
	if err := shard.CheckSelection(ds, sel); err != nil {
		return nil, err
	}
	if sel, err = f.splitSelection(ds, sel); err != nil {
		return nil, err
	}
	if err := f.warnMissingEpisodes(e, ds, sel); err != nil {
		return nil, err
	}
	if err := checkFeatures(ds, features); err != nil {
		return nil, err
	}
	cfg := &pipeline.Config{
		Source: src, Dataset: ds, Recipe: rec, Mode: mode, NoTaskAug: f.noTaskAug,
		Selection: sel, Features: features, SkipErrors: f.onError == "skip", MaxErrors: f.maxErrors, Workers: f.workers,
		Deltas: deltas, Tolerance: f.tolerance,
		Footers: shard.NewFooters(0), // shared by serve's clients (docs/training.md, "Storage")
	}
	if !f.noBatchCheck {
		// Refuse --mode drop before the first batch rather than after
		// streaming for a while (one pass over the language columns;
		// before cameras are set up, so it decodes no video).
		if err := pipeline.CheckBatchable(ctx, cfg); err != nil {
			return nil, err
		}
	}
	if err := f.setupCameras(ctx, e, cfg, dataset == ""); err != nil {
		return nil, err
	}
	// Once the dataset is checked: a failing run prints only its error.
	if w := noLanguageWarning(ds, rec, mode); w != "" {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	return cfg, nil
}

// checkErrorFlags checks --on-error and --max-errors.
func (f *runFlags) checkErrorFlags() error {
	if f.onError != "fail" && f.onError != "skip" {
		return fmt.Errorf("--on-error must be fail or skip, not %q", f.onError)
	}
	if f.maxErrors < 0 {
		return fmt.Errorf("--max-errors must be >= 0, not %d", f.maxErrors)
	}
	return nil
}

// parseFeatures parses --features: nil for every numeric feature (""), an
// empty list for "none", else the comma-separated names.
func parseFeatures(spec string) []string {
	var features []string
	switch spec {
	case "":
	case "none":
		features = []string{}
	default:
		for _, n := range strings.Split(spec, ",") {
			if n = strings.TrimSpace(n); n != "" {
				features = append(features, n)
			}
		}
	}
	return features
}

// datasetSource opens --dataset: the embedded demo dataset when empty,
// else a local directory or a Hub dataset.
func (f *runFlags) datasetSource(ctx context.Context, e *env, dataset string) (fetch.Source, error) {
	if dataset == "" {
		if f.hub.revision != "" {
			return nil, fmt.Errorf("--revision %s needs a Hub --dataset ORG/NAME", f.hub.revision)
		}
		return fetch.NewFS(lrstream.DemoName, lrstream.Demo()), nil
	}
	return f.hub.open(ctx, e, dataset)
}

// openOptions returns the dataset's open options for --on-inconsistent:
// with warn, inconsistencies are printed as warnings instead of failing.
func (f *runFlags) openOptions(e *env) (shard.OpenOptions, error) {
	var openOpts shard.OpenOptions
	switch f.onInconsistent {
	case "fail":
	case "warn":
		var mu sync.Mutex // Plan reports from its own goroutine
		openOpts.Tolerate = func(err error) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(e.stderr, "warning: %v\n", err)
		}
	default:
		return openOpts, fmt.Errorf("--on-inconsistent must be fail or warn, not %q", f.onInconsistent)
	}
	return openOpts, nil
}

// splitSelection applies --eval-split and --split to sel: the episodes
// kept for training or the held-out ones.
func (f *runFlags) splitSelection(ds *schema.Dataset, sel shard.Selection) (shard.Selection, error) {
	if f.evalSplit != 0 {
		return shard.SplitSelection(ds, sel, f.evalSplit, f.split)
	}
	if f.split != "" && f.split != "train" {
		return sel, fmt.Errorf("--split %s needs --eval-split", f.split)
	}
	return sel, nil
}

// warnMissingEpisodes warns about --episodes the dataset does not have,
// or refuses them with --strict.
func (f *runFlags) warnMissingEpisodes(e *env, ds *schema.Dataset, sel shard.Selection) error {
	if miss := shard.MissingEpisodes(ds, sel); len(miss) > 0 {
		msg := fmt.Sprintf("--episodes: %s has no episode %s (it has %d episodes)", ds.ID, miss, len(ds.Episodes))
		if f.strict {
			return errors.New(msg + " (--strict)")
		}
		fmt.Fprintf(e.stderr, "warning: %s; reading the others\n", msg)
	}
	return nil
}

// checkFeatures checks that each --features name is a numeric feature of
// ds.
func checkFeatures(ds *schema.Dataset, features []string) error {
	for _, n := range features {
		ft, ok := ds.Info.Feature(n)
		if !ok {
			return fmt.Errorf("--features: %s has no feature %q", ds.ID, n)
		}
		if !ft.IsNumeric() {
			return fmt.Errorf("--features: %q is a %s feature, not decoded as a --features column: --features lists numeric features (cameras are chosen with --cameras)", n, ft.DType)
		}
	}
	return nil
}

// setupCameras applies --piece-mb, --cameras, --depth-unit, --resize and
// the --frame-cache flags
// to cfg.
func (f *runFlags) setupCameras(ctx context.Context, e *env, cfg *pipeline.Config, demo bool) error {
	if f.pieceMB < 0 {
		return fmt.Errorf("--piece-mb %d: want a positive number of MiB", f.pieceMB)
	}
	if err := f.frameCache.check(e); err != nil {
		return err
	}
	cfg.PieceBytes = f.pieceMB << 20 // 0 (commands without the flag): the default
	co := pipeline.CameraOptions{Spec: f.cameras, DepthUnit: f.depthUnit, VideoBackend: f.videoBackend, FrameCache: f.frameCache.opener(e)}
	if f.resize != "" {
		var err error
		if co.ResizeH, co.ResizeW, err = parseResize(f.resize); err != nil {
			return err
		}
	}
	return setupCameras(ctx, cfg, co, demo) // the embedded demo without FFmpeg: democams.go
}

// parseResize parses --resize HxW.
func parseResize(s string) (h, w int, err error) {
	hs, ws, ok := strings.Cut(strings.ToLower(s), "x")
	if ok {
		h, err = strconv.Atoi(hs)
		if err == nil {
			w, err = strconv.Atoi(ws)
		}
	}
	if !ok || err != nil || h <= 0 || w <= 0 || h > 1<<14 || w > 1<<14 {
		return 0, 0, fmt.Errorf("--resize %q: want HEIGHTxWIDTH, e.g. 224x224", s)
	}
	return h, w, nil
}

// optionsJSON records the options that shape the output, for headers.
func (f *runFlags) optionsJSON(extra map[string]any) json.RawMessage {
	mode := f.mode
	if f.unrendered {
		mode = sink.ModeNoRecipe // --mode does not apply
	}
	m := map[string]any{
		"datasets": f.datasets.String(), "mode": mode, "no_task_aug": f.noTaskAug, "episodes": f.episodes,
		"exclude_episodes": f.exclude, "features": f.features, "on_error": f.onError,
		"delta_timestamps": f.deltas, "tolerance_s": f.tolerance,
	}
	// The decoded cameras are in the header's cameras list and features;
	// --resize only shows in their shapes, so it is recorded.
	if f.resize != "" {
		m["resize"] = f.resize
	}
	// So is a backend other than LeRobot's default, which changes some
	// videos' pixels.
	if f.videoBackend != "" && f.videoBackend != video.BackendTorchcodec {
		m["video_backend"] = f.videoBackend
	}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m) // map keys are sorted: deterministic
	return b
}

// reportSkipped reports the frames skipped with --on-error skip, grouped
// by error message: the count and the first frames of each (bounded, so a
// run skipping every frame prints a few lines, not one per frame).
func reportSkipped(w io.Writer, st *pipeline.Stats) {
	sk := &st.Skipped
	total := sk.Total()
	if total == 0 {
		return
	}
	fmt.Fprintf(w, "skipped %d frame(s) whose rendering failed, %d distinct error(s):\n", total, len(sk.Groups))
	for _, g := range sk.Groups {
		fmt.Fprintf(w, "  %d × %s\n", g.Count, g.Message)
		for _, fe := range g.First {
			fmt.Fprintf(w, "      %s %s row group %d: episode %d, index %d\n", fe.Dataset, fe.File, fe.RowGroup, fe.Episode, fe.Index)
		}
		if g.Count > int64(len(g.First)) {
			fmt.Fprintf(w, "      ... and %d more\n", g.Count-int64(len(g.First)))
		}
	}
	if sk.Other > 0 {
		fmt.Fprintf(w, "  %d more frame(s) with other errors\n", sk.Other)
	}
}

// nothingKept returns an error when every frame that was not dropped
// failed to render: a run that kept nothing must not look successful.
func nothingKept(st *pipeline.Stats) error {
	if st == nil || st.Errors == 0 || st.Rendered+st.Passthrough > 0 {
		return nil
	}
	return fmt.Errorf("no frame kept: %d frame(s) failed to render and were skipped (--on-error skip), none rendered", st.Errors)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// buildVersion, when set at link time (-ldflags "-X
// main.buildVersion=v1.2.3"), is the version; release builds set it.
var buildVersion string

// version is the lrstream version recorded in headers and indexes.
func version() string {
	bi, _ := debug.ReadBuildInfo()
	return versionFrom(buildVersion, bi)
}

// versionFrom picks the version: the link-time stamp, else the module
// version Go stamps from the VCS tag (go install ...@v1.2.3, or a build
// in a tagged checkout), else "devel-" + the VCS revision (+ "-dirty"
// for uncommitted changes), else "devel" (go run, tests, -buildvcs=false).
func versionFrom(stamp string, bi *debug.BuildInfo) string {
	if stamp != "" {
		return stamp
	}
	if bi == nil {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) < 12 {
		return "devel"
	}
	v := "devel-" + rev[:12]
	if dirty {
		v += "-dirty"
	}
	return v
}

// parseFlags parses args with fs. A bad flag prints the error, a "did you
// mean" suggestion when a flag name is close, and one line pointing at
// --help, rather than the whole usage; -h prints the usage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseFlagsArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	return nil
}

// parseFlagsArgs is parseFlags for commands that take positional
// arguments after the flags.
func parseFlagsArgs(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	if err == flag.ErrHelp {
		usage()
		return err
	}
	if err != nil {
		msg := err.Error()
		if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
			// As the user typed it: -q, --q and --quiet differ.
			msg = "unknown flag " + typedFlag(args, name)
			if s := suggestFlag(fs, name); s != "" {
				msg += "; did you mean --" + s + "?"
			}
		} else {
			msg = dashFlagNames(msg)
		}
		return usageError(fs, msg)
	}
	return nil
}

// parseInterspersed parses args with fs where positional arguments may
// come before, between or after the flags (validate DATASET --json, verify
// DIR -q), with parseFlagsArgs's errors; it returns the positional
// arguments. "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlagsArgs(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) >= len(rest)+1 && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// typedFlag returns the argument of args that names the flag name, as
// typed ("-q" or "--q"), for an error message; "--name" when not found.
func typedFlag(args []string, name string) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		for _, p := range []string{"-", "--"} {
			if a == p+name || strings.HasPrefix(a, p+name+"=") {
				return p + name
			}
		}
	}
	return "--" + name
}

// flagNameInError is how the flag package names a flag in its errors:
// "for -batch-size:", "for flag -batch-size:", "argument: -batch-size".
var flagNameInError = regexp.MustCompile(`(for flag |for |argument: )-([A-Za-z0-9][-_A-Za-z0-9]+)`)

// dashFlagNames respells the flag package's "-name" in an error message
// as the docs and help spell flags, "--name" (one-letter flags keep one
// dash).
func dashFlagNames(msg string) string {
	return flagNameInError.ReplaceAllString(msg, "$1--$2")
}

// usageError prints msg and a pointer at --help for the command fs parses,
// and returns the usage exit status (2).
func usageError(fs *flag.FlagSet, msg string) error {
	fmt.Fprintf(fs.Output(), "%s: %s\nRun '%s --help' for usage.\n", fs.Name(), msg, fs.Name())
	return exitError{2}
}

// missingFlag reports that the flag name is required.
func missingFlag(fs *flag.FlagSet, name string) error {
	return usageError(fs, "--"+name+" is required")
}

// suggestFlag returns the defined flag closest to name ("batch_size" →
// "batch-size"), or "" when none is close.
func suggestFlag(fs *flag.FlagSet, name string) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "-")) }
	n := norm(strings.SplitN(name, "=", 2)[0])
	best, bestD := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		d := textdist.EditDistance(n, norm(f.Name))
		if d < bestD || (d == bestD && best != "" && f.Name < best) {
			best, bestD = f.Name, d
		}
	})
	if bestD > len(n)/3 && bestD > 0 {
		// Short names: only a near-exact match is a suggestion.
		if bestD > 1 || len(n) < 3 {
			return ""
		}
	}
	return best
}

// optInt is an integer flag that knows whether it was set; its help line
// shows no "(default ...)" of its own, since its default comes from the
// environment and the flag's text says so.
type optInt struct {
	v   int
	set bool
}

func (o *optInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.Itoa(o.v)
}

func (o *optInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not an integer")
	}
	o.v, o.set = n, true
	return nil
}

// tidyError renders err for "lrstream CMD: ..." without the stutter of
// wrapped errors repeating context: a leading "CMD: " (the package
// prefix of the command's own package) and a later repetition of the
// message's first "subject: " segment are dropped.
func tidyError(cmd string, err error) string {
	msg := err.Error()
	for {
		rest, ok := strings.CutPrefix(msg, cmd+": ")
		if !ok {
			break
		}
		msg = rest
	}
	if i := strings.Index(msg, ": "); i > 0 {
		head := msg[:i+2]
		// Only a repetition that is a segment of its own (after ": ") is
		// stutter; "materialize F in DIR: stat ..." needs its DIR.
		for from := i + 2; from < len(msg); {
			j := strings.Index(msg[from:], head)
			if j < 0 {
				break
			}
			at := from + j
			if strings.HasSuffix(msg[:at], ": ") {
				msg = msg[:at] + msg[at+len(head):]
				break
			}
			from = at + 1
		}
	}
	return msg
}

// ffmpegVersion names the FFmpeg camera frames are decoded with (the
// first on PATH, or LRSTREAM_FFMPEG's: video.NewFFmpeg) and its version
// line, or why there is none.
func ffmpegVersion(ctx context.Context) string {
	ff, err := video.NewFFmpeg()
	if err != nil {
		return "ffmpeg: none: " + err.Error()
	}
	id, err := ff.Identity(ctx)
	if err != nil {
		return fmt.Sprintf("ffmpeg: %s, ffprobe %s: %v", ff.Path, ff.Probe, err)
	}
	first, _, _ := strings.Cut(id, "\n")
	first, _, _ = strings.Cut(first, " Copyright")
	return fmt.Sprintf("ffmpeg: %s (%s), ffprobe %s", ff.Path, first, ff.Probe)
}
