package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/lrstream/lrstream/internal/pipesize"
	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/sink"
)

func streamCommand() command {
	return command{name: "stream", summary: "render and batch a dataset to stdout (msgpack or jsonl)", run: runStream}
}

// batchFlags are the batching flags of stream and serve.
type batchFlags struct {
	batchSize    int
	dropLast     bool
	keepLanguage bool
}

func (b *batchFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&b.batchSize, "batch-size", 32, "kept samples per batch")
	fs.BoolVar(&b.dropLast, "drop-last", false, "drop the last batch when it is short")
	fs.BoolVar(&b.keepLanguage, "keep-language", false, "also emit the raw language_persistent / language_events rows per sample")
}

func (b *batchFlags) validate() error {
	if b.batchSize < 1 {
		return fmt.Errorf("--batch-size must be at least 1, not %d", b.batchSize)
	}
	return nil
}

// options returns the stream options; extra adds to the header's options.
func (b *batchFlags) options(rf *runFlags, extra map[string]any) pipeline.StreamOptions {
	opts := map[string]any{"batch_size": b.batchSize, "drop_last": b.dropLast, "keep_language": b.keepLanguage}
	for k, v := range extra {
		opts[k] = v
	}
	return pipeline.StreamOptions{
		BatchSize: b.batchSize, DropLast: b.dropLast, KeepLanguage: b.keepLanguage,
		Version: version(), Options: rf.optionsJSON(opts),
	}
}

func runStream(ctx context.Context, e *env, args []string) error {
	var rf runFlags
	var bf batchFlags
	fs := flag.NewFlagSet("lrstream stream", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	rf.register(fs)
	bf.register(fs)
	var tf trainFlags
	tf.register(fs, e, true)
	from := fs.String("from", "", "replay the pre-rendered shards in DIR (lrstream prerender) instead of rendering")
	format := fs.String("format", "msgpack", "output format: msgpack (the wire format, docs/wire-format.md) or jsonl")
	quiet := fs.Bool("q", false, "no progress line and no summary on stderr")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: lrstream stream [--dataset DIR|ORG/NAME] [--recipe FILE] [flags] > batches.msgpack\n\nRenders every frame, collates batches and writes the stream to stdout.\nWithout a recipe (a --dataset without --recipe, or --recipe none) nothing is\nrendered: every frame is kept and the batches carry no messages (--mode does\nnot apply).\nOn a terminal, msgpack output is replaced by a readable preview.\n\nflags:")
		printFlags(fs)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := bf.validate(); err != nil {
		return err
	}
	if err := tf.validate(); err != nil {
		return err
	}
	if *format != "msgpack" && *format != "jsonl" {
		return fmt.Errorf("--format must be msgpack or jsonl, not %q", *format)
	}
	// rankNote says that torchrun's variables shard the stream, as
	// prerender does; printed once the inputs are checked, so that a
	// failing run prints only its error.
	rankNote := func() {
		if tf.fromEnv != "" && tf.worldSize > 1 && !*quiet {
			fmt.Fprintf(e.stderr, "stream: rank %d of %d (from %s): streaming this rank's share; pass --world-size 1 for the whole selection\n", tf.rank, tf.worldSize, tf.fromEnv)
		}
	}
	if *from != "" {
		return replay(ctx, e, fs, *from, *format, tf, *quiet, rankNote)
	}
	return streamRendered(ctx, e, &rf, &bf, &tf, *format, *quiet, rankNote)
}

// streamRendered renders the datasets of the run flags and writes their
// batches to stdout in format: the plain stream, or the training order
// when training flags are given or datasets are mixed.
func streamRendered(ctx context.Context, e *env, rf *runFlags, bf *batchFlags, tf *trainFlags, format string, quiet bool, rankNote func()) error {
	tf.log = stderrLog(e.stderr)
	if quiet {
		tf.log = stderrLog(nil)
	}
	// Batches of one sample never mix rendered and passthrough frames:
	// --mode drop always batches then.
	rf.noBatchCheck = rf.noBatchCheck || bf.batchSize == 1
	mix, err := rf.openMix(ctx, e)
	if err != nil {
		// Metadata (or option) errors come before the stream: the consumer
		// gets them in-band too.
		failInBand(e, format, interruptedErr(ctx, err))
		return err
	}
	defer rf.frameCache.close(e.stderr, quiet)
	cfg := mix[0].Config
	so := bf.options(rf, tf.json())
	var to *pipeline.TrainOptions
	if tf.active() || len(mix) > 1 {
		o := tf.options(tf.rank, tf.worldSize, 0, 1, tf.resume)
		to = &o
	}
	// What the stream would refuse at its first batch is refused here,
	// before any note or progress line.
	if err := pipeline.CheckStart(mix, so, to); err != nil {
		failInBand(e, format, err)
		return err
	}
	if err := tf.measureHeldFrames(ctx, mix, to); err != nil {
		failInBand(e, format, interruptedErr(ctx, err))
		return err
	}
	preview := format == "msgpack" && isTerminal(e.stdout)
	if !preview {
		// The preview lists the cameras and why one is not decoded; -q
		// does not hide the warning.
		logCameraNotes(stderrLog(e.stderr), mix)
	}
	rankNote()
	o := openStreamOutput(ctx, e, format, preview, tf.epochs)
	s := o.sink
	prog := streamProgress(e, quiet, cfg, o.written)
	var st *pipeline.Stats
	if to != nil {
		limitTrainMemory(e, mix, *to)
		st, err = pipeline.TrainMix(ctx, mix, so, *to, s)
	} else {
		st, err = pipeline.Stream(ctx, cfg, so, s)
	}
	return finishStream(e, quiet, o, prog, st, err)
}

// finishStream flushes the output, ends the progress display and reports
// what the run skipped; it returns the run's outcome.
func finishStream(e *env, quiet bool, o streamOutput, prog *progress, st *pipeline.Stats, err error) error {
	if ferr := o.buf.Flush(); err == nil {
		err = ferr
	}
	if err != nil && isBrokenPipe(err) {
		// The consumer closed the pipe: that ends the stream, as `head`
		// ends a producer, and is no failure (status 0, so that
		// `lrstream stream | head` passes under pipefail); the progress
		// line says why it stopped short.
		prog.finishWith(fmt.Sprintf("stopped: the reader closed stdout after %.1f MB of the stream", float64(o.delivered.n)/1e6))
		return nil
	}
	prog.finish()
	if st != nil && !quiet {
		reportSkipped(e.stderr, st)
		reportUnserved(e.stderr, st)
	}
	if err == nil {
		err = nothingKept(st)
	}
	return err
}

// reportUnserved states the frames a training run's epochs left out (the
// last global batches that cannot go to every consumer alike, and frames
// short of a batch: fewer than consumers × batch size an epoch), so that
// nothing is left out silently.
func reportUnserved(w io.Writer, st *pipeline.Stats) {
	if st.Unserved > 0 {
		fmt.Fprintf(w, "stream: %d frames not served by any consumer over the run's epochs (each epoch's remainder: its last global batches that cannot go to every consumer alike, and frames short of a batch; docs/training.md)\n", st.Unserved)
	}
}

// interruptedErr is what a consumer reading the stream is told when
// SIGINT/SIGTERM (ctx's cause) cut it: that the server was interrupted,
// not a bare "context canceled". Other errors are returned as they are.
func interruptedErr(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || !errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("lrstream stream was interrupted (%v): the stream stops here, before its end", context.Cause(ctx))
}

// The stream's sinks, failing in-band with interruptedErr's message.
type (
	interruptMsgpack struct {
		*sink.Msgpack
		ctx context.Context
	}
	interruptJSONL struct {
		*sink.JSONL
		ctx context.Context
	}
)

func (s interruptMsgpack) Fail(err error) error { return s.Msgpack.Fail(interruptedErr(s.ctx, err)) }
func (s interruptJSONL) Fail(err error) error   { return s.JSONL.Fail(interruptedErr(s.ctx, err)) }

// streamOutput is stream's stdout: the buffered writer, the sink writing
// the chosen format into it, and the counts of bytes encoded (written,
// nil for the preview) and accepted by stdout (delivered).
type streamOutput struct {
	buf       *bufio.Writer
	sink      sink.Sink
	written   func() int64
	delivered *countingWriter
}

// openStreamOutput sets up stdout for format: msgpack, JSON lines, or on
// a terminal (preview) a readable preview, saying so on stderr.
func openStreamOutput(ctx context.Context, e *env, format string, preview bool, epochs int64) streamOutput {
	if f, ok := e.stdout.(*os.File); ok {
		// A consumer reading a pipe (a training script's stdin) wakes
		// once per MiB instead of once per 64 KiB: with camera frames
		// (~1 MB per sample) that is a third of its reading CPU.
		pipesize.Grow(f, pipesize.MiB)
	}
	o := streamOutput{delivered: &countingWriter{w: e.stdout}}
	o.buf = bufio.NewWriterSize(o.delivered, 1<<20)
	switch {
	case format == "jsonl":
		j := sink.NewJSONL(o.buf)
		o.sink, o.written = interruptJSONL{j, ctx}, j.BytesWritten
	case preview:
		fmt.Fprintln(e.stderr, "lrstream stream: stdout is a terminal, so this is a readable preview instead of msgpack;\n  pipe the output into a consumer (| python3 train.py) or redirect it (> batches.msgpack), or use --format jsonl")
		if n := previewForeverNote(epochs); n != "" {
			fmt.Fprintln(e.stderr, n)
		}
		o.sink = sink.NewPreview(o.buf, 2)
	default:
		m := sink.NewMsgpack(largeThrough{o.buf, o.delivered})
		o.sink, o.written = interruptMsgpack{m, ctx}, m.BytesWritten
	}
	return o
}

// largeThrough is a buffered writer whose large writes (camera frames, which the
// sink writes straight from the frames' buffers) go to the underlying writer
// directly, after what is buffered: copying them into the buffer first would cost
// a memmove of every frame (a tenth of a cached camera stream's CPU).
type largeThrough struct {
	b *bufio.Writer
	w io.Writer
}

// largeWrite is the size from which a write bypasses the buffer.
const largeWrite = 64 << 10

func (l largeThrough) Write(p []byte) (int, error) {
	if len(p) < largeWrite {
		return l.b.Write(p)
	}
	if err := l.b.Flush(); err != nil {
		return 0, err
	}
	return l.w.Write(p)
}

// streamProgress is stream's progress display: a live line on a
// terminal (unless stdout is one too), one summary line at the end on
// other stderr (a Slurm log), nothing with -q.
func streamProgress(e *env, quiet bool, cfg *pipeline.Config, written func() int64) *progress {
	var prog *progress
	switch {
	case !quiet && isTerminal(e.stderr) && !isTerminal(e.stdout):
		prog = startProgress(e.stderr, "stream", pipeline.SelectedFrames(cfg), written)
	case !quiet && !isTerminal(e.stderr) && e.stderr != nil:
		prog = summaryOnly(e.stderr, "stream", pipeline.SelectedFrames(cfg), written)
	default:
		return startProgress(nil, "", 0, nil)
	}
	cfg.Progress, cfg.ProgressTotal = prog.add, prog.setTotal
	return prog
}

// previewForeverNote is what a terminal is told when the preview never
// ends: after its first batches it shows nothing more while the stream
// runs on (--epochs 0), which looks like a hang.
func previewForeverNote(epochs int64) string {
	if epochs != 0 {
		return ""
	}
	return "lrstream stream: --epochs 0 streams forever: the preview shows the first batches, then nothing until you stop it (Ctrl-C)"
}

// isBrokenPipe reports whether err comes from writing to a closed pipe or
// socket.
func isBrokenPipe(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrClosedPipe)
}

// countingWriter counts the bytes its writer accepted: how much of the
// stream reached the reader's pipe.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
