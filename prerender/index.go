package prerender

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/lrstream/lrstream/collate"
)

// IndexFormat is the format version of index.json. A reader refuses other
// versions.
const IndexFormat = "lrstream-prerender/1"

// IndexFile is the name of a pre-render directory's index: the index of a
// single-process run, or the merged index written by Finalize.
const IndexFile = "index.json"

// Compression describes how shard files are compressed (recorded in the
// index).
const Compression = "zstd"

// Index describes a pre-rendered directory: what was rendered, how, and
// every shard file. It is stored as indented JSON in index.json (or
// rankNNNNN-index.json for one rank of a multi-rank run).
type Index struct {
	// Format is IndexFormat.
	Format string `json:"format"`
	// Complete is true only once every rank's run finished (its end
	// message is recorded); an interrupted run leaves it false.
	Complete bool `json:"complete"`
	// WireFormat is the wire format of the stored messages ("lrstream/1").
	WireFormat string `json:"wire_format"`
	// LrstreamVersion is the version of lrstream that wrote the shards.
	LrstreamVersion string `json:"lrstream_version"`
	// Dataset is the dataset id and Revision its resolved revision ("" for
	// a local directory).
	Dataset  string `json:"dataset"`
	Revision string `json:"revision"`
	FPS      int    `json:"fps"`
	// Recipe is the recipe's name and RecipeSHA256 the hex SHA-256 of its
	// bytes.
	Recipe       string `json:"recipe"`
	RecipeSHA256 string `json:"recipe_sha256"`
	// Mode is the render mode.
	Mode         string `json:"mode"`
	BatchSize    int    `json:"batch_size"`
	DropLast     bool   `json:"drop_last"`
	KeepLanguage bool   `json:"keep_language"`
	// Options is the header's options object: every option that shaped the
	// batches.
	Options json.RawMessage `json:"options"`
	// ShardSize is the uncompressed size at which shards are cut (after
	// the batch that reaches it), and Compression how shards are
	// compressed.
	ShardSize   int64  `json:"shard_size"`
	Compression string `json:"compression"`
	// Selection describes the selected episodes, before sharing among
	// ranks.
	Selection Selection `json:"selection"`
	// Features is the numeric feature schema of the batches (the header's
	// features), Strings the extra string columns and Components the blend
	// components. Set once a rank's header is known.
	Features   []Feature `json:"features"`
	Strings    []string  `json:"strings"`
	Components []string  `json:"components"`
	// WorldSize is the number of ranks the episodes were shared among (1
	// for a single-process run).
	WorldSize int `json:"world_size"`
	// Ranks describes each rank's stream: one entry for a single-process
	// run or a rank's own index, all of them (in rank order) once
	// finalized.
	Ranks []Rank `json:"ranks"`
	// Shards lists the shard files in replay order: by rank, then by batch.
	Shards []Shard `json:"shards"`
	// Totals sums the shards and the ranks' end counts.
	Totals Totals `json:"totals"`
}

// Feature is one numeric column of the batches: numpy dtype and
// per-sample shape.
type Feature struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
}

// Selection describes the episodes a run selected (before sharing among
// ranks): their number, frames and the SHA-256 of their indices (decimal,
// one per line), so ranks of one run can be checked to agree.
type Selection struct {
	Episodes int64  `json:"episodes"`
	Frames   int64  `json:"frames"`
	SHA256   string `json:"sha256"`
}

// Rank is one rank's stream: the episodes it was given, its header and end
// messages and what its shards hold.
type Rank struct {
	Rank int `json:"rank"`
	// Episodes lists the rank's share of the selected episodes as
	// inclusive [first, last] ranges, and EpisodeCount / Frames its size.
	Episodes     [][2]int64 `json:"episodes"`
	EpisodeCount int64      `json:"episode_count"`
	Frames       int64      `json:"frames"`
	// Complete is true once the rank's run finished.
	Complete bool `json:"complete"`
	// Header is the rank's header message, exactly as encoded (msgpack;
	// base64 in JSON); empty until known.
	Header []byte `json:"header"`
	// End is the rank's end message, exactly as encoded; empty until the
	// run completes. EndCounts is the same, readable.
	End       []byte     `json:"end"`
	EndCounts *EndCounts `json:"end_counts"`
	// Shards, Batches and Samples count the rank's shards and what they
	// hold.
	Shards  int   `json:"shards"`
	Batches int64 `json:"batches"`
	Samples int64 `json:"samples"`
}

// EndCounts are the counts of an end message.
type EndCounts struct {
	Frames      int64            `json:"frames"`
	Rendered    int64            `json:"rendered"`
	Dropped     int64            `json:"dropped"`
	Passthrough int64            `json:"passthrough"`
	Skipped     int64            `json:"skipped"`
	Errors      int64            `json:"errors"`
	Batches     int64            `json:"batches"`
	Samples     int64            `json:"samples"`
	Components  []ComponentCount `json:"components"`
}

// ComponentCount is a blend component's rendered sample count.
type ComponentCount struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// Shard is one shard file: a zstd frame holding consecutive batch messages
// of one rank's stream (batches only; the header and end messages are in
// the index).
type Shard struct {
	// File is the file name, relative to the directory.
	File string `json:"file"`
	Rank int    `json:"rank"`
	// Bytes is the file size and SHA256 the hex SHA-256 of the file;
	// RawBytes is the size of the decompressed messages.
	Bytes    int64  `json:"bytes"`
	SHA256   string `json:"sha256"`
	RawBytes int64  `json:"raw_bytes"`
	// Batches and Samples count the shard's batch messages and their
	// samples; FirstSeq and LastSeq are the seq of its first and last batch
	// in the rank's stream.
	Batches  int64 `json:"batches"`
	Samples  int64 `json:"samples"`
	FirstSeq int64 `json:"first_seq"`
	LastSeq  int64 `json:"last_seq"`
	// FirstEpisode and LastEpisode are the lowest and highest episode
	// index of its samples.
	FirstEpisode int64 `json:"first_episode"`
	LastEpisode  int64 `json:"last_episode"`
}

// Totals sums a directory's shards and the end counts of its ranks.
type Totals struct {
	Shards   int   `json:"shards"`
	Batches  int64 `json:"batches"`
	Samples  int64 `json:"samples"`
	Bytes    int64 `json:"bytes"`
	RawBytes int64 `json:"raw_bytes"`
	// Frame counts from the ranks' end messages (zero until complete).
	Frames      int64 `json:"frames"`
	Rendered    int64 `json:"rendered"`
	Dropped     int64 `json:"dropped"`
	Passthrough int64 `json:"passthrough"`
	Errors      int64 `json:"errors"`
}

// ReadIndex reads dir's index.json (a single-process run, or a finalized
// multi-rank run). It checks the format version but not the shards (see
// Verify).
func ReadIndex(dir string) (*Index, error) {
	path := filepath.Join(dir, IndexFile)
	x, err := readIndexFile(path)
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		if ranks, _ := rankIndexes(dir); len(ranks) > 0 {
			return nil, fmt.Errorf("%s has no %s but per-rank indexes (%s...): run `lrstream prerender --finalize %s` once every rank finished: %w",
				dir, IndexFile, filepath.Base(ranks[0]), dir, err)
		}
	}
	return x, err
}

func readIndexFile(path string) (*Index, error) {
	data, err := readRegular(path, MaxIndexBytes)
	if err != nil {
		return nil, fmt.Errorf("read pre-render index: %w", err)
	}
	return parseIndex(path, data)
}

// parseIndex decodes an index read from path (named in errors) and checks
// its format version and world size.
func parseIndex(path string, data []byte) (*Index, error) {
	var x Index
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&x); err != nil {
		return nil, fmt.Errorf("%s: not a valid pre-render index: %w", path, err)
	}
	if x.Format != IndexFormat {
		return nil, fmt.Errorf("%s: index format %q, this lrstream reads %q", path, x.Format, IndexFormat)
	}
	if x.WorldSize < 1 {
		return nil, fmt.Errorf("%s: world_size %d", path, x.WorldSize)
	}
	return &x, nil
}

// encode returns the index as indented JSON.
func (x *Index) encode() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(x); err != nil {
		return nil, fmt.Errorf("encode index: %w", err)
	}
	return b.Bytes(), nil
}

// recount recomputes the totals and per-rank shard counts from the shards
// and end messages.
func (x *Index) recount() {
	t := Totals{}
	per := map[int]*Rank{}
	for i := range x.Ranks {
		r := &x.Ranks[i]
		r.Shards, r.Batches, r.Samples = 0, 0, 0
		per[r.Rank] = r
	}
	for _, s := range x.Shards {
		t.Shards++
		t.Batches += s.Batches
		t.Samples += s.Samples
		t.Bytes += s.Bytes
		t.RawBytes += s.RawBytes
		if r := per[s.Rank]; r != nil {
			r.Shards++
			r.Batches += s.Batches
			r.Samples += s.Samples
		}
	}
	for _, r := range x.Ranks {
		if e := r.EndCounts; e != nil {
			t.Frames += e.Frames
			t.Rendered += e.Rendered
			t.Dropped += e.Dropped
			t.Passthrough += e.Passthrough
			t.Errors += e.Errors
		}
	}
	x.Totals = t
}

// setFeatures records a header's schema.
func (x *Index) setFeatures(fs []collate.Feature, strs, comps []string) {
	x.Features = make([]Feature, len(fs))
	for i, f := range fs {
		sh := f.Shape
		if sh == nil {
			sh = []int{}
		}
		x.Features[i] = Feature{Name: f.Name, DType: f.DType, Shape: sh}
	}
	x.Strings = nonNil(strs)
	x.Components = nonNil(comps)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// File naming. A single-process run writes shard-NNNNNN.msgpack.zst and
// index.json; rank R of a multi-rank run writes
// rankRRRRR-shard-NNNNNN.msgpack.zst and rankRRRRR-index.json. Files being
// written carry a .tmp suffix until renamed.

const (
	shardExt = ".msgpack.zst"
	tmpExt   = ".tmp"
)

// rankPrefix is the file name prefix of rank r's files ("" for a
// single-process run).
func rankPrefix(rank, worldSize int) string {
	if worldSize <= 1 {
		return ""
	}
	return fmt.Sprintf("rank%05d-", rank)
}

func shardName(prefix string, n int) string {
	return fmt.Sprintf("%sshard-%06d%s", prefix, n, shardExt)
}

func indexName(prefix string) string {
	if prefix == "" {
		return IndexFile
	}
	return prefix + "index.json"
}

var (
	rankIndexRE = regexp.MustCompile(`^rank(\d{5})-index\.json$`)
	ownFileRE   = regexp.MustCompile(`^(rank\d{5}-)?(shard-\d{6}\.msgpack\.zst|index\.json)(\.tmp)?$`)
)

// rankIndexes lists the per-rank index files in dir, sorted by name.
func rankIndexes(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		if rankIndexRE.MatchString(e.Name()) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}

// ownFiles lists dir's files that a run with file prefix prefix owns
// (shards, index and their temporary files). With all, every pre-render
// file of any rank is listed.
func ownFiles(dir, prefix string, all bool) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		m := ownFileRE.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			continue
		}
		if all || m[1] == prefix {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// rankOfIndex returns the rank number in a per-rank index file name.
func rankOfIndex(name string) int {
	m := rankIndexRE.FindStringSubmatch(filepath.Base(name))
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// checkIndex checks what replay and verify trust in an index before
// opening any file: every shard entry names a file inside the directory,
// with exactly the name the writer gives it (shard-NNNNNN.msgpack.zst, or
// rankRRRRR-shard-NNNNNN.msgpack.zst for rank R of a multi-rank run, N
// counting the rank's shards from 0: so no path separator, no "..", no
// other file), entries are in replay order (ranks ascending, each rank's
// seq continuous from 0), counts are consistent and digests are
// well-formed. It returns one line per problem (empty when none); a shard
// whose name is refused is never opened.
func checkIndex(x *Index) []string {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	rank, n, next := -1, 0, int64(0)
	for i, s := range x.Shards {
		if s.Rank < 0 || s.Rank >= x.WorldSize {
			add("%s: shard entry %d (%q) is of rank %d, world size %d", IndexFile, i, s.File, s.Rank, x.WorldSize)
			continue
		}
		if s.Rank < rank {
			add("%s: shard entry %d (%q) of rank %d follows rank %d: entries out of order", IndexFile, i, s.File, s.Rank, rank)
		}
		if s.Rank != rank {
			rank, n, next = s.Rank, 0, 0
		}
		if want := shardName(rankPrefix(s.Rank, x.WorldSize), n); s.File != want {
			add("%s: shard entry %d names %q, want %q (shard files are named by rank and position, inside the directory)", IndexFile, i, s.File, want)
		}
		if s.FirstSeq != next {
			add("%s: shard entry %d (%q) starts at seq %d, want %d: entries out of order or missing", IndexFile, i, s.File, s.FirstSeq, next)
		}
		if s.Batches < 1 || s.LastSeq != s.FirstSeq+s.Batches-1 || s.Samples < s.Batches || s.Bytes < 1 || s.RawBytes < 1 {
			add("%s: shard entry %d (%q): inconsistent counts (%d batches, seq %d..%d, %d samples, %d bytes, %d raw bytes)",
				IndexFile, i, s.File, s.Batches, s.FirstSeq, s.LastSeq, s.Samples, s.Bytes, s.RawBytes)
		}
		if len(s.SHA256) != 64 || strings.Trim(s.SHA256, "0123456789abcdef") != "" {
			add("%s: shard entry %d (%q): sha256 %q is not 64 lowercase hex digits", IndexFile, i, s.File, s.SHA256)
		}
		n++
		next = s.LastSeq + 1
	}
	return probs
}

// validShardName reports whether name could be a shard file of this
// directory (no separator, no "..": it stays inside the directory).
func validShardName(name string) bool {
	return shardFileRE.MatchString(name)
}

var shardFileRE = regexp.MustCompile(`^(rank\d{5}-)?shard-\d{6}\.msgpack\.zst$`)
