package prerender

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/sink"
)

// DefaultShardSize is the default uncompressed shard size (256 MB).
const DefaultShardSize = 256_000_000

// Options configure Run.
type Options struct {
	// Dir is the output directory; it is created if missing.
	Dir string
	// ShardSize closes a shard after the batch that brings its
	// uncompressed size to at least ShardSize bytes (0: DefaultShardSize).
	ShardSize int64
	// Rank and WorldSize select this process's share of the selected
	// episodes: share Rank of WorldSize (pipeline.ShareEpisodes). A
	// WorldSize of 0 or 1 renders everything into index.json; a larger
	// one writes rank-prefixed files and a per-rank index, merged later
	// by Finalize.
	Rank, WorldSize int
	// Overwrite discards whatever pre-render files (of this rank) Dir
	// holds and starts over, instead of resuming or refusing.
	Overwrite bool
	// Log receives notes about resuming and cleaning up; nil discards
	// them.
	Log io.Writer
	// OnShard, when set, is called after each shard is committed.
	OnShard func(Shard)
	// RawBytes, when set, is increased by the encoded size of every batch
	// written (for progress displays).
	RawBytes *atomic.Int64
	// Stream produces the stream; nil means pipeline.Stream. It must be
	// deterministic (e.g. pipeline.Train with a fixed seed and a finite
	// number of epochs) for resuming to be correct.
	Stream func(ctx context.Context, cfg *pipeline.Config, so pipeline.StreamOptions, s sink.Sink) (*pipeline.Stats, error)
	// Started, when set, is called once Dir is checked (a different run
	// refused, a complete one found), just before rendering: commands
	// print their notes and begin their progress then, so that a refused
	// run prints only its error.
	Started func()

	// explain, set by Run for a dataset in an object store, says which
	// objects changed since an earlier revision (the source's
	// ExplainRevision), for the refusal of a directory rendered from it.
	explain func(old string) (string, bool)
}

// revisionExplainer is a source that can say which objects changed since
// an earlier revision of the dataset (objstore.Source).
type revisionExplainer interface {
	ExplainRevision(old string) (string, bool)
}

// explained adds to the differences d between have and want, when the
// dataset revision is one of them and opts can tell, which objects changed.
func (o Options) explained(d []string, have, want *Index) []string {
	if o.explain == nil || have.Dataset != want.Dataset || have.Revision == want.Revision {
		return d
	}
	if msg, ok := o.explain(have.Revision); ok {
		d = append(d, "objects: "+msg)
	}
	return d
}

// Result reports what Run did.
type Result struct {
	// Index is the index as last written.
	Index *Index
	// Stats counts the frames of the run (nil when AlreadyComplete).
	Stats *pipeline.Stats
	// AlreadyComplete is set when Dir already held this run, complete:
	// nothing was rendered.
	AlreadyComplete bool
	// KeptShards is the number of shards kept from an interrupted run,
	// and SkippedBatches the batches rendered again but not rewritten
	// because those shards hold them; NewShards were written by this run.
	KeptShards     int
	SkippedBatches int64
	NewShards      int
	// Elapsed is the run's wall time.
	Elapsed time.Duration
}

// encoderOptions make shard compression deterministic: one fixed level,
// synchronous (single-goroutine) encoding, frame checksums.
func encoderOptions() []zstd.EOption {
	return []zstd.EOption{
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(true),
	}
}

// Run renders cfg's selection (or, with WorldSize > 1, share Rank of it)
// with pipeline.Stream (or opts.Stream) and writes the batch messages `lrstream stream`
// would write, byte for byte, into zstd-compressed shard files in
// opts.Dir, with an index (see Index and docs/prerender.md).
//
// Run is crash safe and resumable: shards are written to a temporary
// name, fsynced and renamed, and the index is rewritten atomically after
// each shard. Running it again with the same inputs after an interruption
// at any point keeps the committed shards, renders the stream again (it
// is deterministic) without rewriting the batches they hold, and ends
// with the same bytes as an uninterrupted run. A directory holding a
// different run (dataset revision, recipe, options, shard size, version,
// ranks) is refused, naming the differences, unless opts.Overwrite.
func Run(ctx context.Context, cfg *pipeline.Config, so pipeline.StreamOptions, opts Options) (*Result, error) {
	start := time.Now()
	if opts.Dir == "" {
		return nil, errors.New("prerender: no output directory")
	}
	if opts.ShardSize == 0 {
		opts.ShardSize = DefaultShardSize
	}
	if opts.ShardSize < 0 {
		return nil, fmt.Errorf("prerender: shard size %d", opts.ShardSize)
	}
	if opts.WorldSize < 1 {
		opts.WorldSize = 1
	}
	if opts.Rank < 0 || opts.Rank >= opts.WorldSize {
		return nil, fmt.Errorf("prerender: rank %d is not in [0, %d)", opts.Rank, opts.WorldSize)
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	c := *cfg
	if opts.WorldSize > 1 {
		c.Share = pipeline.Share{Worker: opts.Rank, NumWorkers: opts.WorldSize}
	} else {
		c.Share = pipeline.Share{}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("prerender: %w", err)
	}
	prefix := rankPrefix(opts.Rank, opts.WorldSize)
	unlock, err := lock(opts.Dir, "."+prefix+"lock")
	if err != nil {
		return nil, fmt.Errorf("prerender: %w", err)
	}
	defer unlock()

	want := newIndex(&c, so, opts)
	if ex, ok := cfg.Source.(revisionExplainer); ok {
		opts.explain = ex.ExplainRevision
	}
	x, kept, err := prepare(opts, prefix, want)
	if err != nil {
		return nil, err
	}
	res := &Result{Index: x}
	if x.Complete {
		res.AlreadyComplete = true
		res.KeptShards = len(x.Shards)
		res.Elapsed = time.Since(start)
		return res, nil
	}
	res.KeptShards = kept
	w := &shardSink{opts: opts, prefix: prefix, x: x}
	for _, s := range x.Shards {
		w.skipSeq = s.LastSeq + 1
		w.keptSamples += s.Samples
	}
	w.nextSeq = w.skipSeq
	if err := w.writeIndex(); err != nil {
		return nil, fmt.Errorf("prerender: %w", err)
	}
	if w.enc, err = zstd.NewWriter(nil, encoderOptions()...); err != nil {
		return nil, fmt.Errorf("prerender: %w", err)
	}
	stream := opts.Stream
	if stream == nil {
		stream = pipeline.Stream
	}
	if opts.Started != nil {
		opts.Started()
	}
	st, err := stream(ctx, &c, so, w)
	res.Stats = st
	res.SkippedBatches = w.skipped
	res.NewShards = len(x.Shards) - kept
	res.Elapsed = time.Since(start)
	if err != nil {
		return res, err
	}
	return res, nil
}

// newIndex is the empty index of the run cfg/so/opts describe.
func newIndex(cfg *pipeline.Config, so pipeline.StreamOptions, opts Options) *Index {
	all := pipeline.ShareEpisodes(cfg.Dataset, cfg.Selection, pipeline.Share{})
	lens := map[int64]int64{}
	for _, e := range cfg.Dataset.Episodes {
		lens[e.Index] = e.Length
	}
	h := sha256.New()
	var frames int64
	for _, e := range all {
		fmt.Fprintf(h, "%d\n", e)
		frames += lens[e]
	}
	mine := all
	if opts.WorldSize > 1 {
		mine = pipeline.ShareEpisodes(cfg.Dataset, cfg.Selection, cfg.Share)
	}
	var myFrames int64
	for _, e := range mine {
		myFrames += lens[e]
	}
	return &Index{
		Format: IndexFormat, WireFormat: sink.FormatVersion, LrstreamVersion: so.Version,
		Dataset: cfg.Dataset.ID, Revision: cfg.Dataset.Revision,
		Recipe: cfg.Recipe.Name(), RecipeSHA256: cfg.Recipe.SHA256(), Mode: pipeline.ModeName(cfg),
		BatchSize: so.BatchSize, DropLast: so.DropLast, KeepLanguage: so.KeepLanguage,
		Options: compactJSON(so.Options), ShardSize: opts.ShardSize, Compression: Compression,
		Selection: Selection{Episodes: int64(len(all)), Frames: frames, SHA256: hex.EncodeToString(h.Sum(nil))},
		Features:  []Feature{}, Strings: []string{}, Components: []string{},
		WorldSize: opts.WorldSize,
		Ranks: []Rank{{
			Rank: opts.Rank, Episodes: episodeRanges(mine), EpisodeCount: int64(len(mine)), Frames: myFrames,
		}},
		Shards: []Shard{},
	}
}

// episodeRanges compresses ascending episode indices to inclusive ranges.
func episodeRanges(eps []int64) [][2]int64 {
	out := [][2]int64{}
	for _, e := range eps {
		if k := len(out); k > 0 && out[k-1][1]+1 == e {
			out[k-1][1] = e
			continue
		}
		out = append(out, [2]int64{e, e})
	}
	return out
}

func compactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// differences lists, readably, how index have differs from the run want
// describes (nil when they are the same run).
func differences(have, want *Index) []string {
	var d []string
	cmp := func(what, a, b string) {
		if a != b {
			d = append(d, fmt.Sprintf("%s: %s in the directory, %s now", what, show(a), show(b)))
		}
	}
	cmp("index format", have.Format, want.Format)
	cmp("dataset", have.Dataset, want.Dataset)
	cmp("dataset revision", have.Revision, want.Revision)
	cmp("recipe", have.Recipe, want.Recipe)
	cmp("recipe SHA-256", have.RecipeSHA256, want.RecipeSHA256)
	cmp("mode", have.Mode, want.Mode)
	od := optionDifferences(have.Options, want.Options)
	if len(od) == 0 || !strings.Contains(string(want.Options), `"batch_size"`) {
		cmp("batch size", strconv.Itoa(have.BatchSize), strconv.Itoa(want.BatchSize))
	}
	d = append(d, od...)
	cmp("shard size", strconv.FormatInt(have.ShardSize, 10), strconv.FormatInt(want.ShardSize, 10))
	cmp("compression", have.Compression, want.Compression)
	cmp("world size", strconv.Itoa(have.WorldSize), strconv.Itoa(want.WorldSize))
	cmp("episode selection", selString(have.Selection), selString(want.Selection))
	cmp("lrstream version", have.LrstreamVersion, want.LrstreamVersion)
	cmp("wire format", have.WireFormat, want.WireFormat)
	return d
}

// optionDifferences compares two options objects key by key.
func optionDifferences(a, b json.RawMessage) []string {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		if ca, cb := string(compactJSON(a)), string(compactJSON(b)); ca != cb {
			return []string{fmt.Sprintf("options: %s in the directory, %s now", ca, cb)}
		}
		return nil
	}
	keys := map[string]bool{}
	for k := range ma {
		keys[k] = true
	}
	for k := range mb {
		keys[k] = true
	}
	var d []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		va, vb := "(unset)", "(unset)"
		if v, ok := ma[k]; ok {
			va = string(compactJSON(v))
		}
		if v, ok := mb[k]; ok {
			vb = string(compactJSON(v))
		}
		if va != vb {
			d = append(d, fmt.Sprintf("option %s: %s in the directory, %s now", k, va, vb))
		}
	}
	return d
}

func show(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

func selString(s Selection) string {
	return fmt.Sprintf("%d episodes, %d frames (sha256 %.12s)", s.Episodes, s.Frames, s.SHA256)
}

// mismatchError reports a directory holding a different run.
func mismatchError(dir, file string, diffs []string) error {
	return fmt.Errorf("%s holds a different pre-render (%s):\n  %s\nuse another --out directory, or --overwrite to replace it",
		dir, file, strings.Join(diffs, "\n  "))
}

// prepare inspects opts.Dir: it refuses a different run, wipes it with
// Overwrite, or resumes: it keeps the committed shards that are intact and
// removes every other file of this rank (temporary files, shards committed
// after the last index write). It returns the index to continue from and
// the number of shards kept.
func prepare(opts Options, prefix string, want *Index) (*Index, int, error) {
	dir := opts.Dir
	name := indexName(prefix)
	if opts.Overwrite {
		if err := removeForOverwrite(opts, prefix); err != nil {
			return nil, 0, err
		}
		return want, 0, syncDir(dir)
	}
	if err := checkOtherIndexes(opts, prefix, want); err != nil {
		return nil, 0, err
	}
	have, err := readIndexFile(filepath.Join(dir, name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		have = nil
	case err != nil:
		return nil, 0, fmt.Errorf("%w (use --overwrite to replace it)", err)
	}
	if have != nil {
		if d := differences(have, want); len(d) > 0 {
			return nil, 0, mismatchError(dir, name, opts.explained(d, have, want))
		}
		if len(have.Ranks) != 1 || have.Ranks[0].Rank != want.Ranks[0].Rank {
			return nil, 0, fmt.Errorf("%s: %s does not describe rank %d alone (use --overwrite to replace it)", dir, name, want.Ranks[0].Rank)
		}
		if have.Complete {
			if err := checkShardFiles(dir, have.Shards); err != nil {
				return nil, 0, fmt.Errorf("%s is complete but damaged: %w; use --overwrite to render it again", dir, err)
			}
			// Leftover temporary files (e.g. of a run killed after its
			// last index write) go.
			if err := removeTempFiles(dir, prefix); err != nil {
				return nil, 0, err
			}
			return have, len(have.Shards), nil
		}
	}
	x := want
	if have != nil {
		// Keep the intact committed shards, in order.
		x.Ranks[0].Header = have.Ranks[0].Header
		for _, s := range have.Shards {
			if err := checkShard(dir, s); err != nil {
				fmt.Fprintf(opts.Log, "resume: %v; rendering it and the shards after it again\n", err)
				break
			}
			x.Shards = append(x.Shards, s)
		}
		x.recount()
	}
	removed, err := removeLeftovers(dir, prefix, name, x)
	if err != nil {
		return nil, 0, err
	}
	if have != nil {
		fmt.Fprintf(opts.Log, "resuming %s: %d committed shard(s) (%d batches) kept, %d leftover file(s) removed\n",
			dir, len(x.Shards), x.Totals.Batches, removed)
	} else if removed > 0 {
		fmt.Fprintf(opts.Log, "%s: removed %d leftover file(s) of an interrupted run\n", dir, removed)
	}
	return x, len(x.Shards), nil
}

// removeForOverwrite removes the files of this rank's previous
// pre-render in opts.Dir (and a merged index covering it), for
// --overwrite.
func removeForOverwrite(opts Options, prefix string) error {
	dir := opts.Dir
	files, err := ownFiles(dir, prefix, prefix == "")
	if err != nil {
		return err
	}
	if prefix != "" {
		// A merged index covering this rank is no longer valid.
		files = append(files, IndexFile)
	}
	for _, f := range files {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if len(files) > 0 {
		fmt.Fprintf(opts.Log, "--overwrite: removed the previous pre-render files in %s\n", dir)
	}
	return nil
}

// checkOtherIndexes refuses to render into a directory holding another
// run: for a single process, the per-rank files of a multi-rank run not
// finalized; for a rank, a merged or single-process index of another run.
func checkOtherIndexes(opts Options, prefix string, want *Index) error {
	dir := opts.Dir
	if prefix == "" {
		if ranks, _ := rankIndexes(dir); len(ranks) > 0 {
			if _, err := os.Stat(filepath.Join(dir, IndexFile)); err != nil {
				return fmt.Errorf("%s holds the per-rank files of a multi-rank pre-render (%s...), not this single-process run; finalize it, or use --overwrite to replace it",
					dir, filepath.Base(ranks[0]))
			}
		}
	} else if top, err := readIndexFile(filepath.Join(dir, IndexFile)); err == nil {
		// A merged or single-process index: it must be the same run.
		if d := differences(top, want); len(d) > 0 {
			return mismatchError(dir, IndexFile, opts.explained(d, top, want))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// removeTempFiles removes this rank's leftover temporary files.
func removeTempFiles(dir, prefix string) error {
	files, err := ownFiles(dir, prefix, false)
	if err != nil {
		return err
	}
	for _, f := range files {
		if strings.HasSuffix(f, tmpExt) {
			if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// removeLeftovers removes this rank's files that are neither its index
// (name) nor a shard x keeps, syncing dir after any removal; it returns
// how many it removed.
func removeLeftovers(dir, prefix, name string, x *Index) (int, error) {
	keep := map[string]bool{name: true}
	for _, s := range x.Shards {
		keep[s.File] = true
	}
	files, err := ownFiles(dir, prefix, false)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, f := range files {
		if !keep[f] {
			if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, err
			}
			removed++
		}
	}
	if removed > 0 {
		if err := syncDir(dir); err != nil {
			return 0, err
		}
	}
	return removed, nil
}

// checkShardFiles checks that every shard exists with its recorded size.
func checkShardFiles(dir string, shards []Shard) error {
	for _, s := range shards {
		st, err := os.Stat(filepath.Join(dir, s.File))
		if err != nil {
			return fmt.Errorf("shard %s: %w", s.File, err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("shard %s is not a regular file (%s)", s.File, fileKind(st.Mode()))
		}
		if st.Size() != s.Bytes {
			return fmt.Errorf("shard %s is %d bytes, the index says %d", s.File, st.Size(), s.Bytes)
		}
	}
	return nil
}

// checkShard checks a committed shard's size and SHA-256.
func checkShard(dir string, s Shard) error {
	f, _, err := openRegular(filepath.Join(dir, s.File))
	if err != nil {
		return fmt.Errorf("shard %s: %w", s.File, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("shard %s: %w", s.File, err)
	}
	if n != s.Bytes {
		return fmt.Errorf("shard %s is %d bytes, the index says %d", s.File, n, s.Bytes)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != s.SHA256 {
		return fmt.Errorf("shard %s has SHA-256 %s, the index says %s", s.File, sum, s.SHA256)
	}
	return nil
}

// shardSink is the sink.Sink of Run: it encodes batches exactly as
// sink.Msgpack does and writes them into shard files.
type shardSink struct {
	opts   Options
	prefix string
	x      *Index
	enc    *zstd.Encoder
	buf    []byte

	// Batches with seq below skipSeq are in kept shards: they are counted
	// (keptSamples must match) but not written.
	skipSeq, skipped            int64
	keptSamples, skippedSamples int64
	nextSeq                     int64

	cur *openShard
}

// openShard is the shard being written.
type openShard struct {
	tmp, final string
	f          *os.File
	bw         *bufio.Writer
	hw         *hashWriter
	s          Shard
	hasEpisode bool
}

// hashWriter hashes and counts what passes through it.
type hashWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

// Write writes p through, hashing and counting what was written.
func (h *hashWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

func (w *shardSink) rank() *Rank { return &w.x.Ranks[0] }

// Header records the header message.
func (w *shardSink) Header(h sink.Header) error {
	raw, err := sink.AppendHeader(nil, h)
	if err != nil {
		return err
	}
	r := w.rank()
	if len(r.Header) > 0 && !bytes.Equal(r.Header, raw) {
		return fmt.Errorf("the stream's header differs from the one recorded in %s by the interrupted run (different input?); use --overwrite to render again",
			indexName(w.prefix))
	}
	r.Header = raw
	w.x.FPS = h.FPS
	w.x.setFeatures(h.Features, h.Strings, h.Components)
	return nil
}

// Batch writes a batch to the current shard (or counts it, when a kept
// shard already holds it).
func (w *shardSink) Batch(bt *collate.Batch, meta sink.BatchMeta) error {
	if meta.Seq < w.skipSeq {
		w.skipped++
		w.skippedSamples += int64(bt.N)
		return nil
	}
	if meta.Seq != w.nextSeq {
		return fmt.Errorf("batch seq %d, want %d", meta.Seq, w.nextSeq)
	}
	if meta.Seq == w.skipSeq && w.skipSeq > 0 {
		if err := w.checkSkipped(); err != nil {
			return err
		}
	}
	var err error
	if w.buf, err = sink.AppendBatch(w.buf[:0], bt, meta); err != nil {
		return err
	}
	if w.cur == nil {
		if err := w.open(meta.Seq); err != nil {
			return err
		}
	}
	if _, err := w.enc.Write(w.buf); err != nil {
		return fmt.Errorf("write %s: %w", w.cur.tmp, err)
	}
	s := &w.cur.s
	s.Batches++
	s.Samples += int64(bt.N)
	s.LastSeq = meta.Seq
	s.RawBytes += int64(len(w.buf))
	if bt.N > 0 && len(bt.Columns) > collate.PosEpisodeIndex {
		col := &bt.Columns[collate.PosEpisodeIndex]
		for i := 0; i < bt.N; i++ {
			e := col.Int64At(i)
			if !w.cur.hasEpisode {
				s.FirstEpisode, s.LastEpisode, w.cur.hasEpisode = e, e, true
			}
			s.FirstEpisode = min(s.FirstEpisode, e)
			s.LastEpisode = max(s.LastEpisode, e)
		}
	}
	if w.opts.RawBytes != nil {
		w.opts.RawBytes.Add(int64(len(w.buf)))
	}
	w.nextSeq++
	if s.RawBytes >= w.opts.ShardSize {
		return w.commit()
	}
	return nil
}

// checkSkipped checks that the batches re-rendered for the kept shards
// hold as many samples as those shards.
func (w *shardSink) checkSkipped() error {
	if w.skipped != w.skipSeq || w.skippedSamples != w.keptSamples {
		return fmt.Errorf("resume: this run produced %d batches with %d samples where the kept shards hold %d batches with %d samples (different input?); use --overwrite to render again",
			w.skipped, w.skippedSamples, w.skipSeq, w.keptSamples)
	}
	return nil
}

// open starts shard file number len(shards) of this rank.
func (w *shardSink) open(seq int64) error {
	final := shardName(w.prefix, len(w.x.Shards))
	tmp := filepath.Join(w.opts.Dir, final+tmpExt)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create shard: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	hw := &hashWriter{w: bw, h: sha256.New()}
	w.enc.Reset(hw)
	w.cur = &openShard{tmp: tmp, final: final, f: f, bw: bw, hw: hw,
		s: Shard{File: final, Rank: w.rank().Rank, FirstSeq: seq, LastSeq: seq}}
	return nil
}

// commit finishes the current shard, makes it durable under its final
// name and records it in the index.
func (w *shardSink) commit() error {
	c := w.cur
	w.cur = nil
	err := w.enc.Close()
	if err == nil {
		err = c.bw.Flush()
	}
	if err == nil {
		err = c.f.Sync()
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(c.tmp)
		return fmt.Errorf("write shard %s: %w", c.final, err)
	}
	if err := commit(w.opts.Dir, c.tmp, filepath.Join(w.opts.Dir, c.final)); err != nil {
		return err
	}
	c.s.Bytes = c.hw.n
	c.s.SHA256 = hex.EncodeToString(c.hw.h.Sum(nil))
	w.x.Shards = append(w.x.Shards, c.s)
	if err := w.writeIndex(); err != nil {
		return err
	}
	if w.opts.OnShard != nil {
		w.opts.OnShard(c.s)
	}
	return nil
}

// End commits the last shard and marks the index complete.
func (w *shardSink) End(e sink.End) error {
	if w.cur != nil {
		if err := w.commit(); err != nil {
			return err
		}
	}
	if w.skipSeq > 0 && w.nextSeq == w.skipSeq {
		// No batch after the kept shards: check the re-rendered ones.
		if err := w.checkSkipped(); err != nil {
			return err
		}
	}
	r := w.rank()
	r.End = sink.AppendEnd(nil, e)
	r.EndCounts = endCounts(e)
	r.Complete = true
	w.x.Complete = true
	return w.writeIndex()
}

// Fail abandons the shard being written; the index keeps the committed
// shards, for a later run to resume from.
func (w *shardSink) Fail(error) error {
	if c := w.cur; c != nil {
		w.cur = nil
		c.f.Close()
		os.Remove(c.tmp)
	}
	return nil
}

func (w *shardSink) writeIndex() error {
	w.x.recount()
	data, err := w.x.encode()
	if err != nil {
		return err
	}
	return writeAtomic(w.opts.Dir, indexName(w.prefix), data)
}

func endCounts(e sink.End) *EndCounts {
	c := &EndCounts{Frames: e.Frames, Rendered: e.Rendered, Dropped: e.Dropped, Passthrough: e.Passthrough,
		Skipped: e.Skipped, Errors: e.Errors, Batches: e.Batches, Samples: e.Samples, Components: []ComponentCount{}}
	for _, cc := range e.Components {
		c.Components = append(c.Components, ComponentCount{Name: cc.Name, Count: cc.Count})
	}
	return c
}

// decodeOne decodes a single encoded message.
func decodeOne(raw []byte) (*sink.Message, error) {
	m, err := sink.NewDecoder(bytes.NewReader(raw)).Next()
	if err != nil {
		return nil, err
	}
	return m, nil
}
