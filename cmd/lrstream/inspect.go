package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
)

func inspectCommand() command {
	return command{name: "inspect", summary: "show what a recipe does to a dataset, frame by frame", run: runInspect}
}

func runInspect(ctx context.Context, e *env, args []string) error {
	var rf runFlags
	fs := flag.NewFlagSet("lrstream inspect", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	rf.register(fs)
	jsonl := fs.Bool("jsonl", false, "one JSON line per frame in index order: {index, episode_index, outcome, rendered, error, fallback[, video_frames]}")
	show := fs.Int("show", 6, "frames shown in the readable view (the first frames of each outcome and blend component)")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: lrstream inspect [--dataset DIR|ORG/NAME] [--recipe FILE] [flags]\n\nRenders every frame and shows the messages, outcomes and blend choices.\nWithout a recipe (a --dataset without --recipe, or --recipe none) nothing is\nrendered: it shows the first frame of each episode with its task, every frame\nkept without messages (outcome passthrough).\nErrors do not stop inspect: they are reported per frame; with an explicit\n--on-error fail, inspect exits 1 after the report when any frame failed.\n\nflags:")
		printFlags(fs)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// inspect reports every error, then fails only with an explicit
	// --on-error fail.
	failOnErrors := false
	fs.Visit(func(f *flag.Flag) { failOnErrors = failOnErrors || (f.Name == "on-error" && rf.onError == "fail") })
	rf.noBatchCheck = true // inspect does not batch: it warns from its counts
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
	cfg.SkipErrors = true // inspect reports errors, it does not stop at them
	cfg.Features = []string{}
	w := bufio.NewWriterSize(e.stdout, 1<<16)
	defer w.Flush()
	// Progress goes to stderr when it is a terminal that is not also
	// showing the output.
	prog := startProgress(nil, "", 0, nil)
	if isTerminal(e.stderr) && !isTerminal(e.stdout) {
		prog = startProgress(e.stderr, "inspect", pipeline.SelectedFrames(cfg), nil)
		cfg.Progress = prog.add
	}
	defer prog.finish()
	st := &pipeline.Stats{}
	if *jsonl {
		var line []byte
		err = pipeline.Run(ctx, cfg, func(c *pipeline.Chunk) error {
			if err := st.Count(cfg, c); err != nil {
				return err
			}
			for i := range c.Results {
				line, err = pipeline.AppendFrameJSON(line[:0], c, i)
				if err != nil {
					return err
				}
				line = append(line, '\n')
				if _, err := w.Write(line); err != nil {
					return err
				}
			}
			return nil
		})
	} else {
		err = inspectView(ctx, cfg, st, w, *show)
	}
	if err != nil {
		return err
	}
	if cfg.Mode == render.ModeDrop && st.Passthrough > 0 && st.Rendered > 0 {
		fmt.Fprintf(e.stderr, "warning: --mode drop cannot be batched on this selection: %d frame(s) without language pass through without messages and cannot share a batch with the %d rendered ones; stream, serve and prerender refuse it (use --mode fallback)\n", st.Passthrough, st.Rendered)
	}
	if failOnErrors && st.Errors > 0 {
		w.Flush()
		return fmt.Errorf("%d frame(s) failed to render (--on-error fail)", st.Errors)
	}
	return nil
}

// inspectView prints a readable view of chosen frames and a summary.
func inspectView(ctx context.Context, cfg *pipeline.Config, st *pipeline.Stats, w io.Writer, show int) error {
	comps := cfg.Recipe.Components()
	seen := map[string]bool{}
	shown := 0
	errKinds := map[string]int{}
	err := pipeline.Run(ctx, cfg, func(c *pipeline.Chunk) error {
		if err := st.Count(cfg, c); err != nil {
			return err
		}
		for i := range c.Results {
			r := &c.Results[i]
			key := r.Outcome.String()
			if cfg.Recipe == nil {
				key = fmt.Sprint(c.Batch.EpisodeIndex[i]) // one outcome: show episodes
			} else if r.Outcome == render.Rendered && !r.Fallback && r.Component >= 0 {
				key += "/" + comps[r.Component]
			} else if r.Fallback {
				key += "/fallback"
			}
			if r.Outcome == render.Failed {
				errKinds[errorKind(r.Err)]++
			}
			if shown < show && !seen[key] {
				seen[key] = true
				shown++
				printFrame(w, cfg, c, i)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	ds := cfg.Dataset
	fmt.Fprintf(w, "dataset %s", ds.ID)
	if ds.Revision != "" {
		fmt.Fprintf(w, "@%s", ds.Revision)
	}
	if cfg.Recipe == nil {
		fmt.Fprint(w, "  no recipe (nothing rendered: every frame kept without messages)")
	} else {
		fmt.Fprintf(w, "  recipe %s  mode %s", cfg.Recipe.Name(), cfg.Mode)
	}
	if cfg.NoTaskAug && cfg.Recipe != nil {
		fmt.Fprint(w, " (no task_aug)")
	}
	fmt.Fprintf(w, "\n  frames %d: rendered %d (task fallback %d), dropped %d, passthrough %d, errors %d\n",
		st.Frames, st.Rendered, st.Fallback, st.Dropped, st.Passthrough, st.Errors)
	if cfg.Recipe.IsBlend() {
		fmt.Fprintln(w, "  blend components chosen:")
		var total int64
		for _, n := range st.Components {
			total += n
		}
		for i, name := range comps {
			pct := 0.0
			if total > 0 {
				pct = 100 * float64(st.Components[i]) / float64(total)
			}
			fmt.Fprintf(w, "    %-32s %8d  %5.1f%%\n", name, st.Components[i], pct)
		}
	}
	if len(errKinds) > 0 {
		kinds := make([]string, 0, len(errKinds))
		for k := range errKinds {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		fmt.Fprintln(w, "  errors:")
		for _, k := range kinds {
			fmt.Fprintf(w, "    %6d  %s\n", errKinds[k], k)
		}
	}
	return nil
}

// errorKind shortens a render error to its kind, for the summary.
func errorKind(err error) string {
	msg := pipeline.RootMessage(err)
	if i := strings.IndexAny(msg, ":("); i > 0 {
		msg = msg[:i]
	}
	return msg
}

func printFrame(w io.Writer, cfg *pipeline.Config, c *pipeline.Chunk, i int) {
	r := &c.Results[i]
	b := c.Batch
	fmt.Fprintf(w, "── index %d  episode %d  frame %d  t=%.3f  %s", b.Index[i], b.EpisodeIndex[i], b.FrameIndex[i], b.Timestamp[i], r.Outcome)
	if r.Fallback {
		fmt.Fprint(w, " (task fallback)")
	} else if r.Outcome == render.Rendered && r.Component >= 0 {
		fmt.Fprintf(w, " via %s", cfg.Recipe.Components()[r.Component])
	}
	fmt.Fprintln(w)
	for _, f := range c.Frames {
		if f.File[i] != "" {
			fmt.Fprintf(w, "   %s: frame at %.6fs of %s\n", f.Camera, f.PTS[i], f.File[i])
		}
	}
	if cfg.Recipe == nil {
		fmt.Fprintf(w, "   task %q\n", c.Tasks[i])
	}
	switch r.Outcome {
	case render.Failed:
		fmt.Fprintf(w, "   error: %v\n", r.Err)
	case render.Rendered:
		printSample(w, r.Sample)
	}
}

// printSample prints a sample's messages, one per line: stream, role,
// '*' on targets, then the content.
func printSample(w io.Writer, s *schema.Sample) {
	targets := map[int]bool{}
	for _, t := range s.Targets {
		targets[t] = true
	}
	for j, m := range s.Messages {
		mark := " "
		if targets[j] {
			mark = "*"
		}
		stream := ""
		if j < len(s.Streams) {
			stream = s.Streams[j]
		}
		fmt.Fprintf(w, "   %s [%-10s] %-9s %s\n", mark, stream, m.Role, messageText(m))
	}
}

func messageText(m schema.Message) string {
	var parts []string
	switch m.Kind {
	case schema.TextContent:
		parts = append(parts, fmt.Sprintf("%q", m.Text))
	case schema.BlockContent:
		for _, b := range m.Blocks {
			t, _ := b.Get("type")
			switch t {
			case "text":
				v, _ := b.Get("text")
				parts = append(parts, fmt.Sprintf("%q", v))
			default:
				f, _ := b.Get("feature")
				parts = append(parts, fmt.Sprintf("<%v %v>", t, f))
			}
		}
	}
	if m.ToolCalls != nil {
		parts = append(parts, "tool_calls="+string(m.ToolCalls))
	}
	return strings.Join(parts, " ")
}
