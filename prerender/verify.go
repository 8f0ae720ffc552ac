package prerender

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/lrstream/lrstream/sink"
)

// Report is what Verify found.
type Report struct {
	// Index is the directory's index (nil if it could not be read).
	Index *Index
	// What the shards hold, as read (not as the index says).
	Shards                            int
	Batches, Samples, Bytes, RawBytes int64
	// Problems lists every mismatch, each naming its file; Verify returns
	// an error when there is any.
	Problems []string
	// Notes lists harmless findings (leftover temporary files, files the
	// index does not list).
	Notes []string
}

func (r *Report) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Verify checks a pre-rendered directory against its index: the index is
// complete and consistent (ranks, header and end messages, seq
// continuity, totals), and every shard has its recorded size and SHA-256,
// decompresses, and decodes to exactly the recorded batch messages (seq,
// sizes, samples, feature columns, episode range). It reads everything and
// reports every problem found; the error is non-nil when there is any.
func Verify(ctx context.Context, dir string) (*Report, error) {
	rep := &Report{}
	x, err := ReadIndex(dir)
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	rep.Index = x
	verifyIndex(x, rep)
	dec, err := zstd.NewReader(nil)
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	defer dec.Close()
	// Short batches per rank (names, order and seq continuity are
	// checkIndex's).
	short := map[int]*shortBatch{}
	for _, s := range x.Shards {
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("verify: %w", err)
		}
		if !validShardName(s.File) {
			continue // refused by checkIndex; never opened
		}
		if short[s.Rank] == nil {
			short[s.Rank] = &shortBatch{}
		}
		verifyShard(dir, x, s, short[s.Rank], dec, rep)
	}
	// Files the index does not account for.
	listed := map[string]bool{IndexFile: true}
	for _, s := range x.Shards {
		listed[s.File] = true
	}
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			name := e.Name()
			switch {
			case listed[name] || rankIndexRE.MatchString(name) || strings.HasPrefix(name, "."):
			case strings.HasSuffix(name, tmpExt):
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s: leftover temporary file of an interrupted run", name))
			case strings.HasSuffix(name, shardExt):
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s: shard file not listed in the index", name))
			}
		}
	}
	if len(rep.Problems) > 0 {
		return rep, fmt.Errorf("verify: %s: %d problem(s), the first: %s", dir, len(rep.Problems), rep.Problems[0])
	}
	return rep, nil
}

// verifyIndex checks the index on its own: ranks, header and end messages,
// totals.
func verifyIndex(x *Index, rep *Report) {
	rep.Problems = append(rep.Problems, checkIndex(x)...)
	if !x.Complete {
		rep.problem("%s: incomplete (an interrupted lrstream prerender: run the same command again to finish it)", IndexFile)
	}
	if len(x.Ranks) != x.WorldSize {
		rep.problem("%s: %d ranks listed, world size %d", IndexFile, len(x.Ranks), x.WorldSize)
	}
	batches := map[int]int64{}
	samples := map[int]int64{}
	for _, s := range x.Shards {
		batches[s.Rank] += s.Batches
		samples[s.Rank] += s.Samples
	}
	for i, rk := range x.Ranks {
		if rk.Rank != i {
			rep.problem("%s: rank entry %d is rank %d", IndexFile, i, rk.Rank)
		}
		if !rk.Complete {
			rep.problem("%s: rank %d is incomplete", IndexFile, rk.Rank)
		}
		if rk.Batches != batches[rk.Rank] || rk.Samples != samples[rk.Rank] {
			rep.problem("%s: rank %d counts %d batches, %d samples; its shards %d, %d", IndexFile, rk.Rank, rk.Batches, rk.Samples, batches[rk.Rank], samples[rk.Rank])
		}
		m, err := decodeOne(rk.Header)
		switch {
		case err != nil:
			rep.problem("%s: rank %d header message: %v", IndexFile, rk.Rank, err)
		case m.Header == nil:
			rep.problem("%s: rank %d header message is a %q message", IndexFile, rk.Rank, m.Type)
		default:
			h := m.Header
			for _, c := range [][3]string{
				{"format", h.Format, x.WireFormat}, {"dataset", h.Dataset, x.Dataset}, {"revision", h.Revision, x.Revision},
				{"recipe_sha256", h.RecipeSHA256, x.RecipeSHA256}, {"mode", h.Mode, x.Mode},
				{"batch_size", fmt.Sprint(h.BatchSize), fmt.Sprint(x.BatchSize)},
			} {
				if c[1] != c[2] {
					rep.problem("%s: rank %d header has %s %q, the index %q", IndexFile, rk.Rank, c[0], c[1], c[2])
				}
			}
			if rk.Batches > 0 && !sameFeatures(h, x.Features) {
				rep.problem("%s: rank %d header features differ from the index's", IndexFile, rk.Rank)
			}
		}
		if len(rk.End) == 0 {
			continue
		}
		m, err = decodeOne(rk.End)
		switch {
		case err != nil:
			rep.problem("%s: rank %d end message: %v", IndexFile, rk.Rank, err)
		case m.End == nil:
			rep.problem("%s: rank %d end message is a %q message", IndexFile, rk.Rank, m.Type)
		case m.End.Batches != batches[rk.Rank] || m.End.Samples != samples[rk.Rank]:
			rep.problem("%s: rank %d end message counts %d batches, %d samples; its shards %d, %d",
				IndexFile, rk.Rank, m.End.Batches, m.End.Samples, batches[rk.Rank], samples[rk.Rank])
		}
	}
	want := *x
	want.Ranks = slices.Clone(x.Ranks)
	want.recount()
	if want.Totals != x.Totals {
		rep.problem("%s: totals %+v do not add up (want %+v)", IndexFile, x.Totals, want.Totals)
	}
}

func sameFeatures(h *sink.Header, fs []Feature) bool {
	if len(h.Features) != len(fs) {
		return false
	}
	for i, f := range h.Features {
		if f.Name != fs[i].Name || f.DType != fs[i].DType || !slices.Equal(f.Shape, fs[i].Shape) {
			return false
		}
	}
	return true
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

// Read reads through, counting.
func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// shortBatch remembers the last short batch of a rank's stream: only the
// last batch of an epoch may be short.
type shortBatch struct {
	file       string
	seq, epoch int64
	set        bool
}

// verifyShard reads one shard and checks it against its index entry.
func verifyShard(dir string, x *Index, s Shard, short *shortBatch, dec *zstd.Decoder, rep *Report) {
	f, st, err := openRegular(filepath.Join(dir, s.File))
	if err != nil {
		rep.problem("%s: %v", s.File, err)
		return
	}
	defer f.Close()
	if st.Size() != s.Bytes {
		// Not read: the size alone condemns it (and bounds what is read).
		rep.problem("%s: %d bytes, the index says %d", s.File, st.Size(), s.Bytes)
		return
	}
	h := sha256.New()
	fc := &countingReader{r: io.TeeReader(f, h)}
	if err := dec.Reset(fc); err != nil {
		rep.problem("%s: zstd: %v", s.File, err)
		return
	}
	raw := &countingReader{r: dec}
	d := sink.NewDecoder(raw)
	t := verifyTally{firstEp: -1, lastEp: -1}
	t.readBatches(d, x, s, short, rep)
	batches, samples, firstEp, lastEp := t.batches, t.samples, t.firstEp, t.lastEp
	// Hash the whole file, whatever the decoder left unread.
	if _, err := io.Copy(io.Discard, fc); err != nil {
		rep.problem("%s: %v", s.File, err)
		return
	}
	if fc.n != s.Bytes {
		rep.problem("%s: %d bytes, the index says %d", s.File, fc.n, s.Bytes)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != s.SHA256 {
		rep.problem("%s: SHA-256 %s does not match the index (%s)", s.File, sum, s.SHA256)
	}
	rep.Shards++
	rep.Bytes += fc.n
	rep.Batches += batches
	rep.Samples += samples
	rep.RawBytes += raw.n
	if t.bad {
		return
	}
	if batches != s.Batches || samples != s.Samples {
		rep.problem("%s: holds %d batches, %d samples; the index says %d, %d", s.File, batches, samples, s.Batches, s.Samples)
	}
	if raw.n != s.RawBytes {
		rep.problem("%s: %d bytes decompressed, the index says %d", s.File, raw.n, s.RawBytes)
	}
	if batches > 0 && (firstEp != s.FirstEpisode || lastEp != s.LastEpisode) {
		rep.problem("%s: episodes %d..%d, the index says %d..%d", s.File, firstEp, lastEp, s.FirstEpisode, s.LastEpisode)
	}
}

// verifyTally is what verifyShard counts as it reads a shard's batches.
type verifyTally struct {
	batches, samples int64
	firstEp, lastEp  int64 // episode range; -1 before any
	bad              bool  // a message stopped the reading
}

// readBatches reads the batches of shard s from d, checking each one's
// type, sequence number, size (short only at an epoch's end) and columns.
func (t *verifyTally) readBatches(d *sink.Decoder, x *Index, s Shard, short *shortBatch, rep *Report) {
	for {
		m, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			rep.problem("%s: message %d does not decode: %v", s.File, t.batches, err)
			t.bad = true
			break
		}
		if m.Batch == nil {
			rep.problem("%s: message %d is a %q message, shards hold batches only", s.File, t.batches, m.Type)
			t.bad = true
			break
		}
		b := m.Batch
		if want := s.FirstSeq + t.batches; b.Meta.Seq != want {
			rep.problem("%s: batch %d has seq %d, want %d", s.File, t.batches, b.Meta.Seq, want)
			t.bad = true
			break
		}
		if short.set && short.epoch == b.Meta.Epoch {
			rep.problem("%s: batch seq %d has fewer than %d samples but is not the last of epoch %d", short.file, short.seq, x.BatchSize, short.epoch)
		}
		short.set = false
		if b.Size < 1 || b.Size > x.BatchSize {
			rep.problem("%s: batch seq %d has %d samples (batch size %d)", s.File, b.Meta.Seq, b.Size, x.BatchSize)
		} else if b.Size < x.BatchSize {
			*short = shortBatch{file: s.File, seq: b.Meta.Seq, epoch: b.Meta.Epoch, set: true}
		}
		if msg := checkColumns(x, b); msg != "" {
			rep.problem("%s: batch seq %d: %s", s.File, b.Meta.Seq, msg)
		}
		t.episodes(b)
		t.batches++
		t.samples += int64(b.Size)
	}
}

// episodes widens the tally's episode range to batch b's episodes.
func (t *verifyTally) episodes(b *sink.DecodedBatch) {
	if a, ok := b.Column("episode_index").(*sink.Array); ok && a.DType == "<i8" {
		for i := 0; i+8 <= len(a.Data); i += 8 {
			e := int64(binary.LittleEndian.Uint64(a.Data[i:]))
			if t.firstEp < 0 || e < t.firstEp {
				t.firstEp = e
			}
			t.lastEp = max(t.lastEp, e)
		}
	}
}

// checkColumns checks a batch's numeric columns against the index's
// feature schema; it returns "" when they agree.
func checkColumns(x *Index, b *sink.DecodedBatch) string {
	if len(b.Columns) < len(x.Features)+1 {
		return fmt.Sprintf("%d columns, want at least %d", len(b.Columns), len(x.Features)+1)
	}
	for i, f := range x.Features {
		c := b.Columns[i]
		a, ok := c.Value.(*sink.Array)
		if c.Name != f.Name || !ok {
			return fmt.Sprintf("column %d is %q, want the array %q", i, c.Name, f.Name)
		}
		want := append([]int{b.Size}, f.Shape...)
		if a.DType != f.DType || !slices.Equal(a.Shape, want) {
			return fmt.Sprintf("column %s is %s%v, want %s%v", f.Name, a.DType, a.Shape, f.DType, want)
		}
	}
	if t, ok := b.Columns[len(x.Features)].Value.([]any); b.Columns[len(x.Features)].Name != "task" || !ok || len(t) != b.Size {
		return "no task column of one string per sample after the numeric columns"
	}
	return ""
}
