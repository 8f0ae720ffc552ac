package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/prerender"
)

// shuffleSpillEnv is --shuffle-spill's default, shuffleSpillGBEnv
// --shuffle-spill-gb's.
const (
	shuffleSpillEnv   = "LRSTREAM_SHUFFLE_SPILL"
	shuffleSpillGBEnv = "LRSTREAM_SHUFFLE_SPILL_GB"
)

// trainFlags are the training-iteration flags of stream and serve.
type trainFlags struct {
	// log gets the training iteration's warnings (set by the command:
	// its stderr logger, silent under -q).
	log          *slog.Logger
	shuffle      bool
	seed         uint64
	buffer       int
	bufferBytes  string
	bufferBudget int64
	spill        string
	// spillGB is --shuffle-spill-gb, spillBudget its bytes
	// (pipeline.TrainOptions.SpillBytes: 0 default, -1 none); space
	// shares the spill directory's free space between the process's
	// streams (serve's clients).
	spillGB         string
	spillBudget     int64
	space           *pipeline.SpillSpace
	epochs          int64
	resume          string
	rank, worldSize int
	order           string
	partitions      int
	// rankFlag and worldFlag are --rank and --world-size as given;
	// resolve fills rank and worldSize from them or the environment.
	rankFlag, worldFlag optInt
	getenv              func(string) string
	// fromEnv names the environment variables rank and worldSize came
	// from ("" when from the flags or the defaults).
	fromEnv string
}

// resolve sets rank and worldSize from the flags, else from torchrun's
// RANK and WORLD_SIZE, else 0 of 1.
func (t *trainFlags) resolve() {
	if t.getenv == nil {
		return
	}
	t.rank, t.worldSize = 0, 1
	var env []string
	if t.rankFlag.set {
		t.rank = t.rankFlag.v
	} else if v := t.getenv("RANK"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			t.rank = n
			env = append(env, "RANK="+v)
		}
	}
	if t.worldFlag.set {
		t.worldSize = t.worldFlag.v
	} else if v := t.getenv("WORLD_SIZE"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			t.worldSize = n
			env = append(env, "WORLD_SIZE="+v)
		}
	}
	t.fromEnv = strings.Join(env, " ")
}

func (t *trainFlags) register(fs *flag.FlagSet, e *env, withRank bool) {
	fs.BoolVar(&t.shuffle, "shuffle", false, "shuffle: permute episodes and mix frames across episodes through a shuffle buffer (order fixed by --seed, epoch, revision and selection)")
	fs.Uint64Var(&t.seed, "seed", 0, "shuffle seed")
	fs.IntVar(&t.buffer, "shuffle-buffer", pipeline.DefaultBufferSize, "shuffle buffer size in frames")
	fs.StringVar(&t.bufferBytes, "shuffle-buffer-bytes", "auto", "memory budget of the shuffle buffer (e.g. 512MiB, 2GB; 0 for none; auto: 1GiB, with camera frames what a 1400MiB stream leaves beside decoding): --shuffle-buffer is lowered so that its frames fit (bytes per sample from metadata: numeric features, camera frames, overhead; docs/training.md)")
	spill, spillGB := "", ""
	if e != nil && e.getenv != nil {
		spill, spillGB = e.getenv(shuffleSpillEnv), e.getenv(shuffleSpillGBEnv)
	}
	fs.StringVar(&t.spill, "shuffle-spill", spill, "directory `DIR` where a shuffled stream's held camera frames wait for their batch, in a private file unlinked at once, instead of in memory: --shuffle-buffer-bytes then bounds only what stays in memory, so camera streams keep --shuffle-buffer frames (same order as without it for the same buffer size; default $"+shuffleSpillEnv+", \"\" = off; docs/training.md)")
	fs.StringVar(&t.spillGB, "shuffle-spill-gb", spillGB, fmt.Sprintf("most GB (1e9 bytes) one stream's --shuffle-spill file may hold: the shuffle buffer is lowered (from metadata, the same on every node and run) so that one consumer's worst case fits, and a stream whose worst case does not fit the directory's free space is refused at its start (default $%s, else %g; 0: no budget; docs/training.md)", shuffleSpillGBEnv, float64(pipeline.DefaultSpillBytes)/1e9))
	fs.Int64Var(&t.epochs, "epochs", 1, "passes over the selection, each reshuffled; 0 = forever")
	fs.StringVar(&t.order, "order", pipeline.OrderGlobal, "training order: global (every consumer reads the whole selection; exact cover of kept frames), partitioned (each consumer reads only its canonical partitions) or stratified (partitioned, each batch drawn evenly across many episodes of its partition); see docs/training.md")
	fs.IntVar(&t.partitions, "partitions", pipeline.DefaultPartitions, "canonical partitions of --order partitioned or stratified; world size × workers must divide it")
	if withRank {
		fs.StringVar(&t.resume, "resume", "", "resume token (from a batch's \"resume\" field): continue right after that batch")
		fs.Var(&t.rankFlag, "rank", "this process's rank `N` (default: $RANK as set by torchrun, else 0)")
		fs.Var(&t.worldFlag, "world-size", "number of ranks `N` (default: $WORLD_SIZE as set by torchrun, else 1)")
		t.getenv = e.getenv
	} else {
		t.worldSize = 1
	}
}

// active reports whether the stream needs the training iteration (a global
// order shared out by global batches) rather than a plain sequential pass.
func (t *trainFlags) active() bool {
	return t.shuffle || t.epochs != 1 || t.resume != "" || t.worldSize > 1 || t.order != pipeline.OrderGlobal
}

func (t *trainFlags) validate() error {
	t.resolve()
	if t.epochs < 0 {
		return fmt.Errorf("--epochs must be >= 0")
	}
	if t.order != pipeline.OrderGlobal && t.order != pipeline.OrderPartitioned && t.order != pipeline.OrderStratified {
		return fmt.Errorf("--order must be %s, %s or %s", pipeline.OrderGlobal, pipeline.OrderPartitioned, pipeline.OrderStratified)
	}
	if t.partitions < 1 {
		return fmt.Errorf("--partitions must be >= 1")
	}
	if t.buffer < 1 {
		return fmt.Errorf("--shuffle-buffer must be >= 1")
	}
	t.bufferBudget = -1 // "0": no budget
	switch b := strings.TrimSpace(t.bufferBytes); {
	case b == "auto":
		t.bufferBudget = 0 // pipeline.TrainOptions.BufferBytes' default
	case b != "0":
		n, err := prerender.ParseSize(t.bufferBytes)
		if err != nil {
			return fmt.Errorf("--shuffle-buffer-bytes: %w", err)
		}
		t.bufferBudget = n
	}
	if err := t.parseSpillGB(); err != nil {
		return err
	}
	if t.spill != "" {
		t.space = &pipeline.SpillSpace{}
		if st, err := os.Stat(t.spill); err != nil {
			return fmt.Errorf("--shuffle-spill: %w", err)
		} else if !st.IsDir() {
			return fmt.Errorf("--shuffle-spill: %s is not a directory", t.spill)
		}
	}
	if t.worldSize < 1 || t.rank < 0 || t.rank >= t.worldSize {
		return fmt.Errorf("--rank %d is not in [0, --world-size %d)", t.rank, t.worldSize)
	}
	return nil
}

// measureHeldFrames has a training stream that spills (to, nil for none)
// size its pieces by the form its camera frames are held in
// (pipeline.MeasureHeldFrames: one frame decoded a camera), before its
// memory estimates.
func (t *trainFlags) measureHeldFrames(ctx context.Context, mix []pipeline.Mix, to *pipeline.TrainOptions) error {
	if to == nil || to.Spill == "" {
		return nil
	}
	return pipeline.MeasureHeldFrames(ctx, mix)
}

// parseSpillGB sets spillBudget from --shuffle-spill-gb.
func (t *trainFlags) parseSpillGB() error {
	g := strings.TrimSpace(t.spillGB)
	if g == "" {
		t.spillBudget = 0 // pipeline.DefaultSpillBytes
		return nil
	}
	v, err := strconv.ParseFloat(g, 64)
	if err != nil || !(v >= 0) || v*1e9 > math.MaxInt64 {
		return fmt.Errorf("--shuffle-spill-gb %q: want a positive number of GB, or 0 for no budget", t.spillGB)
	}
	t.spillBudget = max(int64(v*1e9), 1)
	if v == 0 {
		t.spillBudget = -1 // none
	}
	return nil
}

// options returns the pipeline options for consumer worker of numWorkers
// on this rank.
func (t *trainFlags) options(rank, worldSize, worker, numWorkers int, resume string) pipeline.TrainOptions {
	return pipeline.TrainOptions{
		Shuffle: t.shuffle, Seed: t.seed, BufferSize: t.buffer, BufferBytes: t.bufferBudget, Spill: t.spill,
		SpillBytes: t.spillBudget, SpillSpace: t.space, Epochs: t.epochs,
		Consumer: rank*numWorkers + worker, Consumers: worldSize * numWorkers, Resume: resume,
		Order: t.order, Partitions: t.partitions, WorldSize: worldSize, Log: t.log,
	}
}

func (t *trainFlags) json() map[string]any {
	m := map[string]any{"shuffle": t.shuffle, "seed": t.seed, "shuffle_buffer": t.buffer, "epochs": t.epochs}
	if t.shuffle {
		m["shuffle_buffer_bytes"] = t.bufferBudget
		if t.bufferBudget == 0 {
			m["shuffle_buffer_bytes"] = "auto"
		}
	}
	if t.order != pipeline.OrderGlobal {
		m["order"], m["partitions"] = t.order, t.partitions
	}
	return m
}

// trainMemoryLimit is the least soft memory limit (GOMEMLIMIT) of a
// language-only training stream, and trainMemoryRest what the limit leaves
// above the stream's own estimate (pipeline.TrainBytes: held frames, keep
// index and orders) for the rest of the process: parsed footers, decoding,
// collation and encoding. Under the default GOGC of 400 the heap would
// grow to five times the live set (2 GB for 10M frames); the limit makes
// the collector run more often instead once the heap nears it (10M frames:
// under 0.5 GB peak RSS, docs/training.md "Memory").
const (
	trainMemoryLimit = 448 << 20
	trainMemoryRest  = pipeline.TrainRestBytes
)

// limitTrainMemory sets a soft memory limit of pipeline.TrainBytes plus
// trainMemoryRest, at least trainMemoryLimit, for a training stream
// (with camera frames too: TrainBytes then counts the pieces being decoded,
// docs/video.md "Memory"), unless GOMEMLIMIT is set.
func limitTrainMemory(e *env, mix []pipeline.Mix, to pipeline.TrainOptions) {
	if e.memoryLimit == nil || e.getenv == nil || e.getenv("GOMEMLIMIT") != "" {
		return
	}
	e.memoryLimit(trainLimit(mix, to))
}

// trainLimit is the soft memory limit of a training stream.
func trainLimit(mix []pipeline.Mix, to pipeline.TrainOptions) int64 {
	return max(trainMemoryLimit, pipeline.TrainBytes(mix, to)+trainMemoryRest)
}
