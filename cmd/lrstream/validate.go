package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/validate"
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
	var hub hubFlags
	hub.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: lrstream validate DATASET [--recipe FILE] [--json] [flags]\n\nChecks a local dataset directory or a Hub dataset ORG/NAME[@REVISION] and reports\nevery problem found. Exit status: 0 no error found, 1 errors found, 2 usage.\n\nflags:")
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
	opts := validate.Options{NoTaskAug: *noTaskAug, MaxFindings: *maxFindings}
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
	opts.Probe, opts.ProbeNote = ffprobe(dataset)
	rep, err := validate.Run(ctx, src, opts)
	if err != nil {
		return err
	}
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
	verdict := "clean"
	if !rep.Clean() {
		verdict = "problems found"
	}
	fmt.Fprintf(w, "%d errors, %d warnings: %s\n", rep.Errors, rep.Warnings, verdict)
}

// ffprobe returns a video duration probe for a local dataset directory
// when ffprobe is on PATH, else nil and why.
func ffprobe(dataset string) (func(ctx context.Context, name string) (float64, error), string) {
	st, err := os.Stat(dataset)
	if err != nil || !st.IsDir() {
		return nil, "not checked for Hub datasets (the videos are not downloaded)"
	}
	bin, err := exec.LookPath("ffprobe")
	if err != nil {
		return nil, "not checked: ffprobe is not on PATH"
	}
	root := dataset
	return func(ctx context.Context, name string) (float64, error) {
		out, err := exec.CommandContext(ctx, bin, "-v", "error", "-show_entries", "format=duration", "-of", "default=noprint_wrappers=1:nokey=1", filepath.Join(root, filepath.FromSlash(name))).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
				return 0, fmt.Errorf("ffprobe: %s", strings.TrimSpace(string(ee.Stderr)))
			}
			return 0, fmt.Errorf("ffprobe: %w", err)
		}
		d, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			return 0, fmt.Errorf("ffprobe: duration %q: %w", strings.TrimSpace(string(out)), err)
		}
		return d, nil
	}, ""
}
