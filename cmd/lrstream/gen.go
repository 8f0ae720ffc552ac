package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/lrstream/lrstream/bench/datagen"
)

// genCommand is `lrstream gen`: write a synthetic annotated LeRobot v3
// dataset.
func genCommand() command {
	return command{
		name:    "gen",
		summary: "generate a synthetic annotated LeRobot v3 dataset",
		run:     runGen,
	}
}

func runGen(ctx context.Context, e *env, args []string) error {
	d := datagen.DefaultOptions()
	fs := flag.NewFlagSet("lrstream gen", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	out := fs.String("out", "", "output dataset directory (required)")
	episodes := fs.Int("episodes", d.Episodes, "number of episodes")
	minFrames := fs.Int("min-frames", d.MinFrames, "minimum frames per episode")
	maxFrames := fs.Int("max-frames", d.MaxFrames, "maximum frames per episode")
	fps := fs.Int("fps", d.FPS, "frames per second")
	cameras := fs.String("cameras", strings.Join(d.Cameras, ","), "comma-separated camera names (observation.images.<name>); empty for none")
	dim := fs.Int("dim", d.Dim, "width of observation.state and action")
	density := fs.String("density", string(d.Density), "annotation density: none, sparse or full")
	variant := fs.String("variant", string(d.Variant), "language schema variant: documented, inferred, inferred-sorted or json-ext")
	tasks := fs.Int("tasks", d.Tasks, "number of distinct tasks")
	seed := fs.Uint64("seed", d.Seed, "random seed (same seed and flags give identical files)")
	filesPerChunk := fs.Int("files-per-chunk", d.FilesPerChunk, "data files per chunk directory (chunks_size)")
	framesPerFile := fs.Int("frames-per-file", d.FramesPerFile, "target rows per data file (episodes are never split)")
	workers := fs.Int("workers", 0, "data files written concurrently (0: GOMAXPROCS)")
	force := fs.Bool("force", false, "replace a non-empty output directory")
	quiet := fs.Bool("q", false, "no progress line and no summary")
	videos := fs.Bool("videos", false, "write the cameras' mp4 files through FFmpeg (one per camera and data file, episodes back to back)")
	videoSize := fs.String("video-size", "480x640", "camera frame size HEIGHTxWIDTH: the cameras' declared shape, the frame VQA boxes, points and traces lie in, and with --videos the videos' size")
	videoCodec := fs.String("video-codec", "h264", "video codec with --videos: h264 (fast to write) or av1 (what LeRobot writes)")
	videoGOP := fs.Int("video-gop", datagen.DefaultVideoGOP, "keyframe interval of the videos with --videos (LeRobot writes 2; longer: smaller files)")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: lrstream gen --out DIR [flags]\n\nWrites a synthetic LeRobot v3 dataset with language annotations.\n\nflags:")
		printFlags(fs)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return missingFlag(fs, "out")
	}
	cams := cameraNames(*cameras)
	opts := datagen.Options{
		Episodes: *episodes, MinFrames: *minFrames, MaxFrames: *maxFrames, FPS: *fps,
		Cameras: cams, Dim: *dim, Density: datagen.Density(*density), Variant: datagen.Variant(*variant),
		Tasks: *tasks, Seed: *seed, FilesPerChunk: *filesPerChunk, FramesPerFile: *framesPerFile,
		Workers: *workers, Force: *force, Videos: *videos, VideoCodec: *videoCodec, VideoGOP: *videoGOP,
	}
	// The size is declared (info.json) and the annotations point into it
	// with or without --videos.
	h, w, err := parseResize(*videoSize)
	if err != nil {
		return fmt.Errorf("--video-size: %w", err)
	}
	opts.VideoHeight, opts.VideoWidth = h, w
	if *episodes <= 0 {
		return fmt.Errorf("--episodes must be positive")
	}
	tty := !*quiet && genIsTerminal(e.stderr)
	if tty {
		opts.Progress = genProgress(e.stderr)
	}
	res, err := datagen.Generate(ctx, *out, opts)
	if tty {
		fmt.Fprint(e.stderr, "\r\033[K")
	}
	if errors.Is(err, datagen.ErrNotEmpty) {
		return fmt.Errorf("%s is not empty: pass --force to replace it", *out)
	}
	if err != nil {
		return err
	}
	if !*quiet {
		printGenSummary(e.stdout, *out, &res)
	}
	return nil
}

// cameraNames parses gen's --cameras: comma-separated names, none when
// empty.
func cameraNames(spec string) []string {
	cams := []string{}
	for c := range strings.SplitSeq(spec, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cams = append(cams, c)
		}
	}
	return cams
}

// genProgress returns gen's progress line on w, redrawn at most every
// 100ms and at the last episode.
func genProgress(w io.Writer) func(datagen.Progress) {
	var last time.Time
	return func(p datagen.Progress) {
		now := time.Now()
		if p.Episodes < p.TotalEpisodes && now.Sub(last) < 100*time.Millisecond {
			return
		}
		last = now
		fmt.Fprintf(w, "\rgen: %d/%d episodes, %d/%d frames (%.0f%%)", p.Episodes, p.TotalEpisodes,
			p.Frames, p.TotalFrames, 100*float64(p.Frames)/float64(max(1, p.TotalFrames)))
	}
}

// printGenSummary prints what gen wrote.
func printGenSummary(w io.Writer, out string, res *datagen.Result) {
	files := "data files"
	if res.DataFiles == 1 {
		files = "data file"
	}
	fmt.Fprintf(w, "wrote %s: %d episodes, %d frames, %d tasks, %d %s, %.1f MB in %s (%.0f frames/s)\n",
		out, res.Episodes, res.Frames, res.Tasks, res.DataFiles, files, float64(res.Bytes)/1e6,
		res.Elapsed.Round(time.Millisecond), res.FramesPerSecond())
}

// genIsTerminal reports whether w is a terminal.
func genIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
