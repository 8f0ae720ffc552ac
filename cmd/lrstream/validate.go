package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/validate"
	"github.com/lrstream/lrstream/video"
)

func validateCommand() command {
	return command{"validate", "lint a dataset (metadata, data, language, videos, a recipe) and report every problem", runValidate}
}

func runValidate(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("lrstream validate", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	recipe := fs.String("recipe", "", "also check what this recipe YAML does on the dataset")
	mode := fs.String("mode", "fallback", "the --mode the recipe is checked in: fallback or drop (the default is stream's)")
	noTaskAug := fs.Bool("no-task-aug", false, "check the recipe as with stream --no-task-aug")
	asJSON := fs.Bool("json", false, "print the report as JSON (docs/validate.md)")
	maxFindings := fs.Int("max-findings", 50, "findings listed per check; the others are counted")
	deep := fs.Bool("deep", false, "also decode every video frame and every image (damaged media bytes show only then)")
	var hub hubFlags
	hub.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: lrstream validate DATASET [--recipe FILE] [--deep] [--json] [flags]\n\nChecks a local dataset directory or a Hub dataset ORG/NAME[@REVISION] and reports\nevery problem found. Exit status: 0 no error found, 1 errors found, 2 usage.\n\nflags:")
		printFlags(fs)
	}
	// DATASET may come before, between or after the flags.
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usageError(fs, "DATASET is required")
	case len(pos) > 1:
		return usageError(fs, fmt.Sprintf("unexpected argument %q", pos[1]))
	}
	dataset := pos[0]
	opts := validate.Options{NoTaskAug: *noTaskAug, MaxFindings: *maxFindings, Deep: *deep}
	m, err := render.ParseMode(*mode)
	if err != nil {
		return usageError(fs, err.Error())
	}
	opts.Mode = m
	if *recipe != "" {
		if opts.Recipe, err = render.LoadFile(*recipe); err != nil {
			return err
		}
	}
	src, err := hub.open(ctx, e, dataset)
	if err != nil {
		return err
	}
	opts.Video, opts.VideoNote = videoChecker(dataset, *deep)
	if opts.Video != nil {
		defer opts.Video.Close()
	}
	rep, err := validate.Run(ctx, src, opts)
	if err != nil {
		return err
	}
	rep.StreamLeavesOut = streamLeavesOut(ctx, src)
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printReport(e, rep)
	}
	if !rep.Clean() {
		return exitError{1}
	}
	return nil
}

func printReport(e *env, rep *validate.Report) {
	w := e.stdout
	fmt.Fprintf(w, "dataset %s", rep.Dataset)
	if rep.Revision != "" {
		fmt.Fprintf(w, "@%s", rep.Revision)
	}
	fmt.Fprintf(w, ": %d episodes, %d frames indexed, %d read\n", rep.Episodes, rep.Frames, rep.FramesRead)
	for _, f := range rep.Findings {
		fmt.Fprintln(w, f.String())
	}
	if rep.Omitted > 0 {
		fmt.Fprintf(w, "(%d more findings not listed: --max-findings)\n", rep.Omitted)
	}
	fmt.Fprintln(w, "checked:")
	for _, c := range rep.Checked {
		fmt.Fprintf(w, "  %s\n", c)
	}
	if len(rep.NotChecked) > 0 {
		fmt.Fprintln(w, "not checked:")
		for _, c := range rep.NotChecked {
			fmt.Fprintf(w, "  %s\n", c)
		}
	}
	if len(rep.StreamLeavesOut) > 0 {
		fmt.Fprintln(w, "lrstream stream (default flags) leaves out:")
		for _, c := range rep.StreamLeavesOut {
			fmt.Fprintf(w, "  %s\n", c)
		}
	}
	verdict := "clean"
	if !rep.Clean() {
		verdict = "problems found"
	}
	fmt.Fprintf(w, "%d errors, %d warnings: %s\n", rep.Errors, rep.Warnings, verdict)
}

// videoChecker returns FFmpeg for validate's per-file video checks of a
// local dataset, or of a Hub dataset with --deep (its videos are then
// downloaded, as stream would), else nil and why.
func videoChecker(dataset string, deep bool) (*video.FFmpeg, string) {
	if st, err := os.Stat(dataset); (err != nil || !st.IsDir()) && !deep {
		return nil, "not checked for Hub datasets without --deep (the videos are not downloaded)"
	}
	ff, err := video.NewFFmpeg()
	if err != nil {
		return nil, "not checked: " + err.Error()
	}
	return ff, ""
}

// streamLeavesOut says what `lrstream stream` with its default flags
// leaves out of src: each camera --cameras auto does not decode, with why
// (video files absent, a kind stream does not decode by default), or why
// it refuses the cameras at all. It opens the metadata and resolves the
// cameras as stream does, without decoding anything; nil when the
// metadata cannot be opened (the report's findings say why).
func streamLeavesOut(ctx context.Context, src fetch.Source) []string {
	ds, err := shard.OpenDataset(ctx, src)
	if err != nil {
		return nil
	}
	cfg := &pipeline.Config{Source: src, Dataset: ds, Workers: 1}
	err = pipeline.SetupCameras(ctx, cfg, pipeline.CameraOptions{Spec: video.ModeAuto, NewDecoder: func() (video.Decoder, error) { return noDecoder{}, nil }})
	if cfg.Cameras != nil {
		cfg.Cameras.Release()
	}
	if err != nil {
		return []string{"cameras: stream refuses them: " + err.Error()}
	}
	var out []string
	for _, c := range cfg.CameraStatus {
		if !c.Decoded {
			out = append(out, fmt.Sprintf("camera %s: %s", c.Key, c.Reason))
		}
	}
	return out
}

// noDecoder stands for FFmpeg where cameras are resolved but never
// decoded (streamLeavesOut).
type noDecoder struct{}

func (noDecoder) Decode(context.Context, video.Segment, func(video.Frame) error) error {
	return errors.New("not decoding")
}
