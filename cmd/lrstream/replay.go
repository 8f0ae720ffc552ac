package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/prerender"
	"github.com/lrstream/lrstream/sink"
)

// replayFlags are the flags a replay (--from DIR) honours; every other
// flag shaped the batches when DIR was pre-rendered and is refused.
var replayFlags = []string{
	"from", "format", "q", "shuffle", "seed", "shuffle-buffer", "epochs", "resume", "rank", "world-size",
	"socket", "max-clients", "client-buffer", "write-timeout", "log-level",
}

// checkReplayFlags refuses flags set on the command line that a replay
// cannot honour, naming them.
func checkReplayFlags(fs *flag.FlagSet) error {
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		if !slices.Contains(replayFlags, f.Name) {
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		return fmt.Errorf("--from replays DIR as it was pre-rendered and cannot honour %s (they were fixed by lrstream prerender; see index.json); replay takes --shuffle, --seed, --shuffle-buffer, --epochs, --resume, --rank, --world-size",
			strings.Join(bad, ", "))
	}
	return nil
}

// replayTrain returns the training options of a replay, nil for a plain
// pass. The shuffle buffer (in samples) becomes a number of batches.
func replayTrain(tf *trainFlags, resume string, x *prerender.Index) *prerender.TrainOptions {
	if !tf.shuffle && tf.epochs == 1 && resume == "" {
		return nil
	}
	return &prerender.TrainOptions{
		Epochs: tf.epochs, Shuffle: tf.shuffle, Seed: tf.seed,
		BufferBatches: max(1, (tf.buffer+x.BatchSize-1)/max(x.BatchSize, 1)),
		Resume:        resume,
	}
}

// replay writes the pre-rendered stream in dir to stdout: msgpack, JSON
// lines, or on a terminal a readable preview.
// rankNote, when set, prints stream's rank note once the index is read.
func replay(ctx context.Context, e *env, fs *flag.FlagSet, dir, format string, tf trainFlags, quiet bool, rankNote func()) error {
	if err := checkReplayFlags(fs); err != nil {
		return err
	}
	spec := dir
	if isStoreURL(dir) { // an object store prefix: mirrored into the node's cache (docs/storage.md)
		local, cleanup, err := mirrorStore(ctx, e, dir)
		if err != nil {
			failInBand(e, format, err)
			return err
		}
		defer cleanup()
		dir = local
	}
	x, err := prerender.ReadIndex(dir)
	err = inSpec(err, dir, spec)
	if err != nil {
		failInBand(e, format, err)
		return err
	}
	if rankNote != nil {
		rankNote()
	}
	opts := prerender.ReplayOptions{Train: replayTrain(&tf, tf.resume, x)}
	if tf.resume != "" && prerender.IsLiveToken(tf.resume) {
		// A token the stored batches of a training pre-render carry:
		// it resumes the plain replay that emitted it (issue 24 item 4).
		if tf.shuffle || tf.epochs != 1 || tf.worldSize > 1 {
			err := errors.New("--resume: this token was carried by a plain replay's batches (as pre-rendered); it resumes 'stream --from DIR --resume TOKEN' without --shuffle, --epochs, --world-size")
			failInBand(e, format, err)
			return err
		}
		opts.Train, opts.LiveResume = nil, tf.resume
	}
	share := pipeline.Share{Worker: tf.rank, NumWorkers: tf.worldSize}
	if tf.worldSize > 1 {
		if !quiet {
			fmt.Fprintf(e.stderr, "lrstream stream: replaying rank %d of %d (a 1/%d share of the batches)\n", tf.rank, tf.worldSize, tf.worldSize)
		}
		opts.HeaderShare = &sink.Share{Rank: tf.rank, WorldSize: tf.worldSize, Worker: 0, NumWorkers: 1}
	}
	out := bufio.NewWriterSize(e.stdout, 1<<20)
	var w io.Writer = out
	var conv *converter
	switch {
	case format == "jsonl":
		conv = newConverter(out, jsonLine)
	case isTerminal(e.stdout):
		fmt.Fprintln(e.stderr, "lrstream stream: stdout is a terminal, so this is a readable preview instead of msgpack;\n  pipe the output into a consumer (| python3 train.py) or redirect it (> batches.msgpack), or use --format jsonl")
		conv = newConverter(out, (&replayPreview{}).line)
	}
	if conv != nil {
		w = conv
	}
	err = inSpec(prerender.ReplayWith(ctx, dir, share, w, opts), dir, spec)
	if conv != nil {
		if cerr := conv.Close(); err == nil {
			err = cerr
		}
	}
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil && isBrokenPipe(err) {
		return nil
	}
	return err
}

// converter turns a msgpack stream written to it into lines (JSON or a
// preview), one message at a time.
type converter struct {
	pw   *io.PipeWriter
	done chan error
}

func newConverter(out io.Writer, line func(dst []byte, m *sink.Message) ([]byte, error)) *converter {
	pr, pw := io.Pipe()
	c := &converter{pw: pw, done: make(chan error, 1)}
	go func() {
		d := sink.NewDecoder(pr)
		var b []byte
		for {
			m, err := d.Next()
			if errors.Is(err, io.EOF) {
				c.done <- nil
				return
			}
			if err == nil {
				b, err = line(b[:0], m)
			}
			if err == nil && len(b) > 0 {
				_, err = out.Write(b)
			}
			if err != nil {
				pr.CloseWithError(err)
				c.done <- err
				return
			}
		}
	}()
	return c
}

// Write hands stream bytes to the converter.
func (c *converter) Write(p []byte) (int, error) { return c.pw.Write(p) }

// Close ends the stream and waits for the converter.
func (c *converter) Close() error {
	c.pw.Close()
	return <-c.done
}

// jsonLine is a message as a JSON line (as --format jsonl writes it).
func jsonLine(dst []byte, m *sink.Message) ([]byte, error) {
	b, err := sink.AppendMessageJSON(dst, m.Raw)
	return append(b, '\n'), err
}

// replayPreview prints a replayed stream readably: the header, the first
// sink.PreviewBatches batches (their first samples' indices and tasks) and
// the end or error.
type replayPreview struct{ batches int }

func (p *replayPreview) line(dst []byte, m *sink.Message) ([]byte, error) {
	switch {
	case m.Header != nil:
		h := m.Header
		rev := h.Revision
		if rev == "" {
			rev = "local"
		}
		recipe := fmt.Sprintf("recipe %s, mode %s", h.Recipe, h.Mode)
		if h.Mode == sink.ModeNoRecipe {
			recipe = "no recipe (no messages)"
		}
		dst = fmt.Appendf(dst, "%s replay: dataset %s @ %s, %d fps, %s, batch size %d\n", h.Format, h.Dataset, rev, h.FPS, recipe, h.BatchSize)
		var cols []string
		for _, f := range h.Features {
			cols = append(cols, fmt.Sprintf("%s %s%v", f.Name, f.DType, f.Shape))
		}
		dst = fmt.Appendf(dst, "columns: %s\n", strings.Join(cols, ", "))
	case m.Batch != nil:
		p.batches++
		if p.batches > sink.PreviewBatches {
			return dst, nil
		}
		b := m.Batch
		dst = fmt.Appendf(dst, "\nbatch %d (epoch %d): %d samples\n", b.Meta.Seq, b.Meta.Epoch, b.Size)
		tasks, _ := b.Column("task").([]any)
		for i := 0; i < b.Size && i < 2; i++ {
			var task any
			if i < len(tasks) {
				task = tasks[i]
			}
			dst = fmt.Appendf(dst, "  [%d] task %q\n", i, fmt.Sprint(task))
		}
		if b.Size > 2 {
			dst = fmt.Appendf(dst, "  … %d more\n", b.Size-2)
		}
	case m.End != nil:
		if p.batches > sink.PreviewBatches {
			dst = fmt.Appendf(dst, "\n… %d more batches\n", p.batches-sink.PreviewBatches)
		}
		dst = fmt.Appendf(dst, "\nend: %d batches, %d samples\n", m.End.Batches, m.End.Samples)
	case m.Type == sink.TypeError:
		dst = fmt.Appendf(dst, "\nerror: %s\n", m.Error)
	}
	return dst, nil
}
