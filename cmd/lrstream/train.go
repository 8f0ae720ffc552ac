package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/lrstream/lrstream/pipeline"
)

// trainFlags are the training-iteration flags of stream and serve.
type trainFlags struct {
	shuffle         bool
	seed            uint64
	buffer          int
	epochs          int64
	resume          string
	rank, worldSize int
	order           string
	partitions      int
}

func (t *trainFlags) register(fs *flag.FlagSet, e *env, withRank bool) {
	fs.BoolVar(&t.shuffle, "shuffle", false, "shuffle: permute episodes and mix frames across episodes through a shuffle buffer (order fixed by --seed, epoch, revision and selection)")
	fs.Uint64Var(&t.seed, "seed", 0, "shuffle seed")
	fs.IntVar(&t.buffer, "shuffle-buffer", pipeline.DefaultBufferSize, "shuffle buffer size in frames")
	fs.Int64Var(&t.epochs, "epochs", 1, "passes over the selection, each reshuffled; 0 = forever")
	fs.StringVar(&t.order, "order", pipeline.OrderGlobal, "training order: global (every consumer reads the whole selection; exact cover of kept frames) or partitioned (each consumer reads only its canonical partitions; see docs/training.md)")
	fs.IntVar(&t.partitions, "partitions", pipeline.DefaultPartitions, "canonical partitions of --order partitioned; world size × workers must divide it")
	if withRank {
		fs.StringVar(&t.resume, "resume", "", "resume token (from a batch's \"resume\" field): continue right after that batch")
		fs.IntVar(&t.rank, "rank", envInt(e, "RANK", 0), "this process's rank (default $RANK, as set by torchrun)")
		fs.IntVar(&t.worldSize, "world-size", envInt(e, "WORLD_SIZE", 1), "number of ranks (default $WORLD_SIZE)")
	} else {
		t.worldSize = 1
	}
}

// active reports whether the stream needs the training iteration (a global
// order shared out by global batches) rather than a plain sequential pass.
func (t *trainFlags) active() bool {
	return t.shuffle || t.epochs != 1 || t.resume != "" || t.worldSize > 1 || t.order == pipeline.OrderPartitioned
}

func (t *trainFlags) validate() error {
	if t.epochs < 0 {
		return fmt.Errorf("--epochs must be >= 0")
	}
	if t.order != pipeline.OrderGlobal && t.order != pipeline.OrderPartitioned {
		return fmt.Errorf("--order must be %s or %s", pipeline.OrderGlobal, pipeline.OrderPartitioned)
	}
	if t.partitions < 1 {
		return fmt.Errorf("--partitions must be >= 1")
	}
	if t.buffer < 1 {
		return fmt.Errorf("--shuffle-buffer must be >= 1")
	}
	if t.worldSize < 1 || t.rank < 0 || t.rank >= t.worldSize {
		return fmt.Errorf("--rank %d is not in [0, --world-size %d)", t.rank, t.worldSize)
	}
	return nil
}

// options returns the pipeline options for consumer worker of numWorkers
// on this rank.
func (t *trainFlags) options(rank, worldSize, worker, numWorkers int, resume string) pipeline.TrainOptions {
	return pipeline.TrainOptions{
		Shuffle: t.shuffle, Seed: t.seed, BufferSize: t.buffer, Epochs: t.epochs,
		Consumer: rank*numWorkers + worker, Consumers: worldSize * numWorkers, Resume: resume,
		Order: t.order, Partitions: t.partitions, WorldSize: worldSize,
	}
}

func (t *trainFlags) json() map[string]any {
	m := map[string]any{"shuffle": t.shuffle, "seed": t.seed, "shuffle_buffer": t.buffer, "epochs": t.epochs}
	if t.order == pipeline.OrderPartitioned {
		m["order"], m["partitions"] = t.order, t.partitions
	}
	return m
}

// envInt reads an integer environment variable, or def.
func envInt(e *env, name string, def int) int {
	if v := e.getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}
