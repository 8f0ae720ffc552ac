package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lrstream/lrstream/fetch/hfbucket"
	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/prerender"
	"github.com/lrstream/lrstream/sink"
)

func prerenderCommand() command {
	return command{name: "prerender", summary: "render a whole dataset once into zstd shard files (resumable, multi-rank)", run: runPrerender}
}

// render runs the pre-render and says how it ended: skipped frames, an
// interruption (resumable), nothing kept.
func (p *prerenderFlags) render(ctx context.Context, e *env, cfg *pipeline.Config, so pipeline.StreamOptions,
	opts prerender.Options, prog *progress) (*prerender.Result, error) {
	res, err := prerender.Run(ctx, cfg, so, opts)
	prog.finish()
	if res != nil && res.Stats != nil && !p.quiet {
		reportSkipped(e.stderr, res.Stats)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("interrupted; run the same command again to resume: %w", err)
		}
		return nil, err
	}
	return res, nothingKept(res.Stats)
}

// streamOptions returns the run's stream and training options (nil
// without training flags) and where its notes go, refusing here — before
// any note, progress line or file — what the stream would refuse at its
// first batch.
func (p *prerenderFlags) streamOptions(e *env, mix []pipeline.Mix) (pipeline.StreamOptions, *pipeline.TrainOptions, io.Writer, error) {
	so := p.bf.options(&p.rf, p.tf.json())
	var notes io.Writer = e.stderr
	if p.quiet {
		notes = io.Discard
	}
	p.tf.log = stderrLog(notes)
	var to *pipeline.TrainOptions
	if p.tf.active() {
		o := p.tf.options(0, 1, 0, 1, "")
		to = &o
	}
	if err := pipeline.CheckStart(mix, so, to); err != nil {
		return so, nil, nil, err
	}
	return so, to, notes, nil
}

func runPrerender(ctx context.Context, e *env, args []string) error {
	var p prerenderFlags
	fs := p.flagSet(e)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkPrerenderOut("--out", p.out); err != nil {
		return err
	}
	if err := checkPrerenderOut("--finalize", p.finalize); err != nil {
		return err
	}
	if p.finalize != "" {
		if isStoreURL(p.finalize) {
			return finalizeStore(ctx, e, p.finalize, p.quiet)
		}
		return runFinalize(e, p.finalize, p.quiet)
	}
	if p.out == "" {
		return missingFlag(fs, "out")
	}
	size, re, err := p.check(e)
	if err != nil {
		return err
	}
	mix, err := p.rf.openMix(ctx, e)
	if err != nil {
		return err
	}
	defer p.rf.frameCache.close(e.stderr, p.quiet)
	if len(mix) > 1 {
		return errors.New("several --dataset flags: prerender renders one dataset")
	}
	cfg := mix[0].Config
	so, to, notes, err := p.streamOptions(e, mix)
	if err != nil {
		return err
	}
	if err := p.tf.measureHeldFrames(ctx, mix, to); err != nil {
		return err
	}
	dir := p.out
	if isStoreURL(p.out) { // rendered locally, then published (docs/storage.md)
		if dir, err = storeStaging(e, p.out); err != nil {
			return err
		}
		if err := checkStoreWrite(ctx, e, p.out); err != nil {
			return err
		}
	}
	var shards, raw atomic.Int64
	opts := prerender.Options{
		Dir: dir, ShardSize: size, Rank: re.Rank, WorldSize: re.WorldSize, Overwrite: p.overwrite,
		Log: notes, RawBytes: &raw, OnShard: func(prerender.Shard) { shards.Add(1) },
	}
	if to != nil {
		opts.Stream = trainMixStream(mix[0], *to)
	}
	prog := p.progress(e, cfg, re, &shards, &raw)
	// Notes and progress once the output directory is checked: a run
	// refused there prints only its error.
	opts.Started = p.started(ctx, e, fs, notes, mix, re, prog)
	res, err := p.render(ctx, e, cfg, so, opts, prog)
	if err != nil {
		return err
	}
	if dir != p.out {
		if err := p.publish(ctx, e, dir); err != nil {
			return err
		}
	}
	if !p.quiet {
		printPrerenderSummary(e.stdout, p.out, re, res)
	}
	return nil
}

// prerenderFlags are the flags of lrstream prerender.
type prerenderFlags struct {
	rf        runFlags
	bf        batchFlags
	tf        trainFlags
	out       string
	shardSize string
	rank      optInt
	worldSize int
	overwrite bool
	finalize  string
	quiet     bool
}

const prerenderUsage = `usage: lrstream prerender --out DIR [--dataset DIR|ORG/NAME] [--recipe FILE] [--shard-size 256MB] [flags]
       lrstream prerender --finalize DIR

Renders every frame and writes the batches 'lrstream stream' would emit, byte
for byte, into zstd-compressed shards in DIR with an index (DIR/index.json).
Camera frames only on request: --cameras defaults to none here (stream's
default is auto), so pass stream's --cameras to get its bytes; a note says
so when the dataset has cameras auto would decode (docs/video.md).
Interrupted runs resume where they stopped when run again; 'lrstream verify DIR'
checks the result; 'lrstream stream --from DIR' replays it. Without a recipe
(a --dataset without --recipe, or --recipe none) nothing is rendered and the
shards hold batches without messages. With --rank R
--world-size W each of W processes renders a disjoint share of the episodes
into DIR; '--finalize DIR' merges them once all are done. See docs/prerender.md.

flags:`

// flagSet registers the prerender flags into p.
func (p *prerenderFlags) flagSet(e *env) *flag.FlagSet {
	fs := flag.NewFlagSet("lrstream prerender", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	p.rf.camerasDefault = "none" // frames in shards only on request (docs/video.md)
	p.rf.register(fs)
	p.bf.register(fs)
	p.tf.register(fs, e, false)
	fs.StringVar(&p.out, "out", "", "output directory (required; created if missing), or s3://BUCKET/PREFIX or hf://buckets/NS/NAME/PREFIX (rendered locally, then published, index last: docs/storage.md)")
	fs.StringVar(&p.shardSize, "shard-size", "256MB", "uncompressed size at which a shard is cut (after the batch reaching it): 256MB, 1GiB, 20KB...")
	fs.Var(&p.rank, "rank", "this process's rank `N`: it renders share N of WORLD_SIZE of the episodes (default from LRSTREAM_RANK, RANK, SLURM_ARRAY_TASK_ID, SLURM_PROCID or JOB_COMPLETION_INDEX; see docs/prerender.md)")
	fs.IntVar(&p.worldSize, "world-size", 0, "number of ranks (default from LRSTREAM_WORLD_SIZE, WORLD_SIZE, SLURM_ARRAY_TASK_COUNT or SLURM_NTASKS; 1 without any)")
	fs.BoolVar(&p.overwrite, "overwrite", false, "discard a previous pre-render in --out (of this rank) and start over, instead of resuming or refusing a different one")
	fs.StringVar(&p.finalize, "finalize", "", "merge the per-rank indexes of `DIR` (a multi-rank pre-render; or an s3:// or hf://buckets/ prefix) into DIR/index.json, then exit")
	fs.BoolVar(&p.quiet, "q", false, "no progress line, notes or summary")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, prerenderUsage)
		printFlags(fs)
	}
	return fs
}

// check validates the flags of a run (not --finalize) and returns the
// shard size and this process's rank.
func (p *prerenderFlags) check(e *env) (size int64, re prerender.RankEnv, err error) {
	if err := p.bf.validate(); err != nil {
		return 0, re, err
	}
	if err := p.tf.validate(); err != nil {
		return 0, re, err
	}
	if p.tf.epochs == 0 {
		return 0, re, fmt.Errorf("--epochs 0 (forever) cannot be pre-rendered")
	}
	size, err = prerender.ParseSize(p.shardSize)
	if err != nil {
		return 0, re, fmt.Errorf("--shard-size: %w", err)
	}
	rank := -1
	if p.rank.set {
		rank = p.rank.v
	}
	re, err = resolveRank(e.getenv, rank, p.worldSize)
	if err != nil {
		return 0, re, err
	}
	if p.tf.active() && re.WorldSize > 1 {
		return 0, re, fmt.Errorf("--shuffle and --epochs apply to a single-process pre-render (ranks share out episodes, not a global shuffled order); drop --rank/--world-size or the training flags")
	}
	return size, re, nil
}

// trainMixStream streams m in the training order of to.
func trainMixStream(m pipeline.Mix, to pipeline.TrainOptions) func(context.Context, *pipeline.Config, pipeline.StreamOptions, sink.Sink) (*pipeline.Stats, error) {
	return func(ctx context.Context, cfg *pipeline.Config, so pipeline.StreamOptions, s sink.Sink) (*pipeline.Stats, error) {
		// As stream does: the dataset's name and weight are part
		// of the order's fingerprint (in the resume tokens).
		return pipeline.TrainMix(ctx, []pipeline.Mix{{Config: cfg, Weight: m.Weight, Name: m.Name}}, so, to, s)
	}
}

// progress returns the progress line of the run: shards written and
// frames of this rank's share, on a terminal without -q; else silent.
func (p *prerenderFlags) progress(e *env, cfg *pipeline.Config, re prerender.RankEnv, shards, raw *atomic.Int64) *progress {
	if p.quiet || !isTerminal(e.stderr) {
		return newProgress(nil, "", 0, nil)
	}
	c := *cfg
	if re.WorldSize > 1 {
		c.Share = pipeline.Share{Worker: re.Rank, NumWorkers: re.WorldSize}
	}
	prog := newProgress(&shardCounter{w: e.stderr, n: shards}, "prerender", pipeline.SelectedFrames(&c), raw.Load)
	cfg.Progress = prog.add
	return prog
}

// started returns what the run does once the output directory is
// checked: the camera notes, the rank line and the progress line.
func (p *prerenderFlags) started(ctx context.Context, e *env, fs *flag.FlagSet, notes io.Writer, mix []pipeline.Mix, re prerender.RankEnv, prog *progress) func() {
	camerasGiven := false
	fs.Visit(func(f *flag.Flag) { camerasGiven = camerasGiven || f.Name == "cameras" })
	cfg := mix[0].Config
	return func() {
		log := stderrLog(notes)
		if !camerasGiven {
			if n := prerenderCameraNote(ctx, cfg, p.out); n != "" {
				log.Warn(n)
			}
		}
		logCameraNotes(stderrLog(e.stderr), mix) // not hidden by -q
		if re.WorldSize > 1 {
			src := re.Source
			if src == "" {
				src = "flags"
			}
			fmt.Fprintf(notes, "prerender: rank %d of %d (from %s)\n", re.Rank, re.WorldSize, src)
		}
		prog.begin()
	}
}

// resolveRank combines the --rank / --world-size flags (-1 / 0: unset)
// with the launcher environment.
func resolveRank(getenv func(string) string, rank, worldSize int) (prerender.RankEnv, error) {
	if rank >= 0 && worldSize > 0 {
		if rank >= worldSize {
			return prerender.RankEnv{}, fmt.Errorf("--rank %d is not below --world-size %d", rank, worldSize)
		}
		return prerender.RankEnv{Rank: rank, WorldSize: worldSize}, nil
	}
	if worldSize < 0 {
		return prerender.RankEnv{}, fmt.Errorf("--world-size %d", worldSize)
	}
	re, err := prerender.RankFromEnv(getenv, worldSize)
	if err != nil {
		return re, fmt.Errorf("rank from the environment: %w", err)
	}
	switch {
	case rank >= 0:
		// --rank alone: the world size comes from the environment.
		if re.Source == "" {
			return re, fmt.Errorf("--rank %d needs --world-size", rank)
		}
		re.Rank, re.Source = rank, "--rank and "+re.Source
	case worldSize > 0:
		if re.Source == "" && worldSize > 1 {
			return re, fmt.Errorf("--world-size %d needs --rank (or RANK, SLURM_PROCID, JOB_COMPLETION_INDEX... in the environment)", worldSize)
		}
		if re.Source != "" && re.WorldSize != worldSize {
			return re, fmt.Errorf("--world-size %d, but %s say world size %d", worldSize, re.Source, re.WorldSize)
		}
		re.WorldSize = worldSize
	}
	if re.Rank >= re.WorldSize {
		return re, fmt.Errorf("rank %d is not below world size %d", re.Rank, re.WorldSize)
	}
	return re, nil
}

// shardCounter appends the shard count to the progress line.
type shardCounter struct {
	w io.Writer
	n *atomic.Int64
}

func (s *shardCounter) Write(p []byte) (int, error) {
	line := string(p)
	nl := strings.HasSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\n")
	line += fmt.Sprintf("  %d shards", s.n.Load())
	if nl {
		line += "\n"
	}
	if _, err := io.WriteString(s.w, line); err != nil {
		return 0, err
	}
	return len(p), nil
}

func printPrerenderSummary(w io.Writer, dir string, re prerender.RankEnv, res *prerender.Result) {
	x := res.Index
	who := ""
	if re.WorldSize > 1 {
		who = fmt.Sprintf(" (rank %d of %d)", re.Rank, re.WorldSize)
	}
	if res.AlreadyComplete {
		fmt.Fprintf(w, "prerender: %s%s is already complete: %d shards, %d batches, %d samples; nothing to do (--overwrite renders it again)\n",
			dir, who, x.Totals.Shards, x.Totals.Batches, x.Totals.Samples)
		return
	}
	t := x.Totals
	ratio := 0.0
	if t.Bytes > 0 {
		ratio = float64(t.RawBytes) / float64(t.Bytes)
	}
	sec := res.Elapsed.Seconds()
	fps := 0.0
	if sec > 0 {
		fps = float64(t.Frames) / sec
	}
	kept := ""
	if res.KeptShards > 0 {
		kept = fmt.Sprintf(", %d kept from the interrupted run", res.KeptShards)
	}
	fmt.Fprintf(w, "prerender: wrote %s%s: %d shards (%d new%s), %d batches, %d samples from %d frames (%d rendered, %d dropped, %d passthrough, %d errors)\n",
		dir, who, t.Shards, res.NewShards, kept, t.Batches, t.Samples, t.Frames, t.Rendered, t.Dropped, t.Passthrough, t.Errors)
	perFrame := 0.0
	if t.Frames > 0 {
		perFrame = float64(t.Bytes) / float64(t.Frames)
	}
	fmt.Fprintf(w, "prerender: %.1f MB on disk (%.1f MB of messages, %.1fx; %.0f bytes/frame) in %s, %.0f frames/s\n",
		float64(t.Bytes)/1e6, float64(t.RawBytes)/1e6, ratio, perFrame, res.Elapsed.Round(time.Millisecond), fps)
	if re.WorldSize > 1 {
		fmt.Fprintf(w, "prerender: when all %d ranks are done: lrstream prerender --finalize %s\n", re.WorldSize, dir)
	}
}

// publish uploads the pre-render staged in dir to p.out (s3://… or
// hf://buckets/…).
func (p *prerenderFlags) publish(ctx context.Context, e *env, dir string) error {
	st, err := publishPrerender(ctx, e, p.out, dir)
	if err != nil {
		return fmt.Errorf("publish %s to %s (run the same command again to resume): %w", dir, p.out, err)
	}
	if !p.quiet {
		how := fmt.Sprintf("%d in parts", st.Multipart)
		if hfbucket.IsURL(p.out) {
			how = "through Xet"
		}
		fmt.Fprintf(e.stderr, "prerender: published %s: %d files uploaded (%s, %.1f MB), %d already there\n",
			p.out, st.Uploaded, how, float64(st.Bytes)/1e6, st.Skipped)
	}
	return nil
}

// finalizeStore finalizes a multi-rank pre-render published to spec (s3://…
// or hf://buckets/…): its files are mirrored locally, merged and checked as
// for a directory, and the merged index.json is published.
func finalizeStore(ctx context.Context, e *env, spec string, quiet bool) error {
	dir, cleanup, err := mirrorStore(ctx, e, spec)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := runFinalize(e, dir, true); err != nil {
		return inSpec(err, dir, spec)
	}
	if _, err := publishFiles(ctx, e, spec, dir, []string{prerender.IndexFile}, []string{prerender.IndexFile}); err != nil {
		return err
	}
	if !quiet {
		fmt.Fprintf(e.stdout, "prerender: finalized %s\n", spec)
	}
	return nil
}

// runFinalize merges the per-rank indexes of dir.
func runFinalize(e *env, dir string, quiet bool) error {
	x, err := prerender.Finalize(dir)
	if err != nil {
		return err
	}
	if !quiet {
		t := x.Totals
		fmt.Fprintf(e.stdout, "prerender: finalized %s: %d ranks, %d shards, %d batches, %d samples from %d frames, %.1f MB\n",
			dir, x.WorldSize, t.Shards, t.Batches, t.Samples, t.Frames, float64(t.Bytes)/1e6)
	}
	return nil
}

// prerenderCameraNote says, when prerender's default --cameras none leaves
// out cameras that stream's default (auto) would decode, that the shards
// hold no camera frames, so that `stream --from DIR` is not mistaken for
// `stream` with the same flags (issue 24 item 3); "" when the dataset has
// camera auto would decode.
func prerenderCameraNote(ctx context.Context, cfg *pipeline.Config, dir string) string {
	keys, err := pipeline.AutoCameras(ctx, cfg)
	if err != nil || len(keys) == 0 {
		return "" // auto would decode none: the same stream
	}
	return fmt.Sprintf("prerender writes no camera frames by default (--cameras none; stream's default is auto): %s's cameras %s are not in the shards, so 'lrstream stream --from %s' replays 'lrstream stream --cameras none', not 'lrstream stream'; pass --cameras auto (or KEY,...) to pre-render them (raw frames: about 3*H*W bytes per sample and camera, docs/video.md), or --cameras none to silence this",
		cfg.Dataset.ID, strings.Join(keys, ", "), dir)
}
