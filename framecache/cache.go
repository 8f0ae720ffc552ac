// Package framecache is lrstream's on-disk frame cache store: a node-local directory of
// entries, each an ordered list of frame records (pts + payload bytes) covering a time
// range [Start, Covered] of one source file, shared by every process and goroutine of the
// node. It knows nothing about video: the caller (video's caching decoder) decides what a
// record's payload is and what identifies a file.
//
// Layout under Dir (directories 0700, files 0600):
//
//	v1/.lock                                       flock taken while evicting or clearing
//	v1/<sha256(group)[:16]>/label                  the group's text, for List
//	v1/<sha256(group)[:16]>/lastrun.json           the last run's statistics (Close)
//	v1/<sha256(group)[:16]>/<sha256(file)[:32]>/<start>-<covered>.fc
//
// where <start> and <covered> are the 16 hex digits of the float64 bits, so a Lookup is
// one ReadDir of one file's small directory, or a stat of it while this process's last
// listing of it is current. No caller string becomes a path component.
// Entries are written to a temporary file (".<random>.tmp", which readers never pick up;
// one older than an hour is a dead writer's, removed by a later Open or eviction) in the
// entry's own directory and published by rename: two writers of the same entry both
// publish a valid file and the last rename wins; a process killed mid-write leaves only
// a temporary file; a reader holding an entry that is evicted or replaced keeps reading it
// (unlink while open).
//
// The budget is kept across processes: each process counts what it adds from the total
// found by one walk at Open, and walks again under the flock — evicting the least
// recently used entries (oldest mtime; a hit touches the entry's mtime at most once a
// minute per process) down to 90% of the budget — when its count passes the budget or
// after it has written a sixteenth of the budget since its last walk. An entry larger
// than the budget is not kept.
//
// A cache that cannot write (unwritable directory, full disk, any write error) degrades
// to read-only with one warning: it goes on serving the entries it can read, and its
// writers do nothing, so the run goes on decoding.
package framecache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures Open.
type Options struct {
	Dir    string       // root directory; "" means DefaultDir()
	Budget int64        // byte budget for all entries on disk; 0 means DefaultBudget(Dir)
	Codec  string       // "s2" (klauspost/compress/s2 block encoding, per frame), "zstd" (klauspost zstd, fastest level), "none", "auto" (default, below)
	Log    *slog.Logger // nil: slog.Default()

	// RawEstimate is the uncompressed bytes the caller expects to store in this run (e.g.
	// camera frames × bytes per frame); 0 means unknown. It only serves Codec "auto":
	// "none" when 0 < RawEstimate <= 90% of the budget and <= half the machine's RAM —
	// the frames then fit the cache and the page cache, and a hit costs a copy instead of
	// a decompression (~0.04 ms instead of ~0.3 ms of CPU per 460 KB frame, and 0.14 ms
	// instead of 0.7 ms to store it) — else "s2", whose 2–2.4× smaller files keep more
	// frames within the budget and halve the disk reads once they outgrow the page cache.
	RawEstimate int64

	// MaxPending bounds the bytes of records queued for the background writer and
	// not yet written: 0 means DefaultMaxPending; negative writes each record as Add
	// is called (synchronously). See async.go.
	MaxPending int64

	// Background makes Writers queue every record for the background writer, which
	// writes it, from the start; by default records are written where they are added
	// until those writes are slow (inline.go). Direct implies it.
	Background bool

	// Direct makes the background writer write entries with O_DIRECT where the file
	// system allows it, bypassing the page cache (direct.go): less CPU to store a frame,
	// but its first read comes from the disk. Off: through the page cache.
	Direct bool
}

// DefaultMaxPending is Options.MaxPending's default: about 140 frames of 480×640
// YUV, half a second of two cameras' decoding.
const DefaultMaxPending = 64 << 20

// Stats counts what one Cache did. BytesX are bytes on disk, RawBytesWritten the
// payloads' uncompressed size.
type Stats struct {
	Hits, Misses, Corrupt, EntriesWritten, FramesWritten, FramesRead, BytesWritten, BytesRead, RawBytesWritten, Evicted int64
	// Dropped counts entries not stored because the background writer was behind
	// (Options.MaxPending): their frames are decoded again next time.
	Dropped int64
	// Direct counts entries the background writer wrote with O_DIRECT (direct.go).
	Direct int64
	// SlowWrites is 1 when the writes made where frames are decoded were slow and
	// the cache went on writing in the background (inline.go).
	SlowWrites int64
}

// counters is Stats, updated atomically.
type counters struct {
	hits, misses, corrupt, entriesWritten, framesWritten, framesRead, bytesWritten, bytesRead, rawBytesWritten, evicted, dropped, direct, slowWrites atomic.Int64
}

// groupCounters is a group's share of this process's run, recorded by Close.
type groupCounters struct {
	since                                   time.Time // this process's first use of the group
	hits, misses, framesRead, framesWritten atomic.Int64
}

// Cache is an open frame cache. Its methods are safe for concurrent use.
type Cache struct {
	dir    string // absolute; "" when there is no cache directory at all
	root   string // dir/v1
	budget int64
	kind   byte
	log    *slog.Logger
	codecs codecs

	now        func() time.Time // the clock for LRU touches (tests move it)
	staleAfter time.Duration    // a temporary file older than this is a dead writer's

	direct   bool // Options.Direct
	readonly atomic.Bool
	closed   atomic.Bool
	st       counters

	mu      sync.Mutex
	groups  map[string]*groupCounters // by group text
	touched map[string]time.Time      // entry path → when this process last touched it
	lists   map[string]*listing       // file directory → its entries (Lookup)
	bad     map[string]os.FileInfo    // damaged entries that could not be removed (removeBad)

	bufs sync.Pool // *[]byte: record buffers of closed Readers

	bg bgWriter // background publishing (Writer, async.go)

	usage     atomic.Int64 // estimated bytes of entries on disk
	sinceWalk atomic.Int64 // bytes this process published since its last walk
	evictMu   sync.Mutex
}

const (
	layoutVersion = "v1"
	touchEvery    = time.Minute
	staleTemp     = time.Hour
	probeBytes    = 4096
)

// Open opens the cache in o.Dir, creating it if needed. It fails only for invalid
// Options (unknown codec, negative budget): a directory that cannot be created or
// written, or a full disk, gives a read-only Cache that serves what it can read and
// never writes, after one warning.
func Open(o Options) (*Cache, error) {
	kind, auto, err := codecKind(o.Codec)
	if err != nil {
		return nil, err
	}
	if o.RawEstimate < 0 {
		return nil, fmt.Errorf("framecache: negative raw estimate %d", o.RawEstimate)
	}
	if o.Budget < 0 {
		return nil, fmt.Errorf("framecache: negative budget %d", o.Budget)
	}
	c := &Cache{
		budget:     o.Budget,
		kind:       kind,
		log:        o.Log,
		now:        time.Now,
		staleAfter: staleTemp,
		groups:     map[string]*groupCounters{},
		touched:    map[string]time.Time{},
		lists:      map[string]*listing{},
		bad:        map[string]os.FileInfo{},
		direct:     o.Direct,
	}
	c.bg.max = o.MaxPending
	c.bg.inline.off = o.Background || o.Direct
	c.bg.inline.window, c.bg.inline.span, c.bg.inline.rate = inlineWindow, inlineSpan, inlineRate
	c.bg.inline.sleeps = threadSleeps
	if c.bg.max == 0 {
		c.bg.max = DefaultMaxPending
	}
	c.bg.free = make(chan []byte, freeChunks(c.bg.max))
	if c.log == nil {
		c.log = slog.Default()
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = DefaultDir(); err != nil {
			c.degrade(err)
			return c, nil
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		c.degrade(fmt.Errorf("cache directory %q: %w", o.Dir, err))
		return c, nil
	}
	c.dir, c.root = dir, filepath.Join(dir, layoutVersion)
	used, err := c.prepare()
	if err != nil {
		c.degrade(err)
	}
	if c.budget == 0 {
		free, ferr := freeBytes(nearestDir(c.root))
		if ferr != nil {
			c.log.Debug("frame cache: free space unknown", "dir", c.dir, "err", ferr)
		}
		c.budget = defaultBudget(free, used)
	}
	if auto {
		c.kind = autoKind(o.RawEstimate, c.budget, memTotal())
	}
	c.usage.Store(used)
	return c, nil
}

// prepare creates the cache's root, checks that a file can be written in it, and walks it
// (removing stale temporary files) for the bytes its entries hold.
func (c *Cache) prepare() (int64, error) {
	if err := os.MkdirAll(c.root, 0o700); err != nil {
		return c.walkUsage(), fmt.Errorf("creating %s: %w", c.root, err)
	}
	f, err := os.CreateTemp(c.root, ".probe-*.tmp")
	if err != nil {
		return c.walkUsage(), fmt.Errorf("writing in %s: %w", c.root, err)
	}
	_, err = f.Write(make([]byte, probeBytes))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	os.Remove(f.Name())
	if err != nil {
		return c.walkUsage(), fmt.Errorf("writing in %s: %w", c.root, err)
	}
	entries, err := walk(c.root, c.now().Add(-c.staleAfter))
	if err != nil {
		c.log.Debug("frame cache: walking", "dir", c.root, "err", err)
	}
	return sumSizes(entries), nil
}

// walkUsage is the bytes of the entries under the root, for a cache that cannot write.
func (c *Cache) walkUsage() int64 {
	entries, _ := walk(c.root, time.Time{})
	return sumSizes(entries)
}

// degrade makes the cache read-only, warning once.
func (c *Cache) degrade(err error) {
	if c.readonly.CompareAndSwap(false, true) {
		c.log.Warn("frame cache cannot be written: frames are decoded instead of cached (entries already cached are still read)",
			"dir", c.dir, "err", err)
	}
}

// Dir is the cache's directory ("" when none could be determined).
func (c *Cache) Dir() string { return c.dir }

// Writable tells whether the cache still writes entries (false once it degraded to
// read-only, or when it could not be written from the start).
func (c *Cache) Writable() bool { return c.root != "" && !c.readonly.Load() }

// Codec is the codec the cache writes with ("s2", "zstd" or "none"; "auto" resolved).
func (c *Cache) Codec() string { return kindNames[c.kind] }

// Budget is the byte budget for the entries on disk.
func (c *Cache) Budget() int64 { return c.budget }

// Stats returns what this Cache has done so far.
func (c *Cache) Stats() Stats {
	s := &c.st
	return Stats{
		Hits: s.hits.Load(), Misses: s.misses.Load(), Corrupt: s.corrupt.Load(),
		EntriesWritten: s.entriesWritten.Load(), FramesWritten: s.framesWritten.Load(),
		FramesRead: s.framesRead.Load(), BytesWritten: s.bytesWritten.Load(),
		BytesRead: s.bytesRead.Load(), RawBytesWritten: s.rawBytesWritten.Load(),
		Evicted: s.evicted.Load(), Dropped: s.dropped.Load(), Direct: s.direct.Load(), SlowWrites: s.slowWrites.Load(),
	}
}

// Flush waits until the entries committed so far are written and published (Writer:
// entries are published in the background).
func (c *Cache) Flush() { c.bg.flush() }

// Close records this process's run statistics per group it looked up or wrote (shown by
// List). Later Creates return nil; Lookups and open Readers go on working. Idempotent.
func (c *Cache) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.bg.drain()
	if c.readonly.Load() || c.root == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.now().UTC()
	var first error
	for group, g := range c.groups {
		rs := RunStats{Start: g.since, Time: at, Hits: g.hits.Load(), Misses: g.misses.Load(),
			FramesRead: g.framesRead.Load(), FramesWritten: g.framesWritten.Load()}
		if err := recordRun(c.groupDir(group), rs); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		c.log.Debug("frame cache: recording run statistics", "err", first)
	}
	return nil
}

// group returns the counters of a group, made on first use.
func (c *Cache) group(group string) *groupCounters {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	if g == nil {
		g = &groupCounters{since: c.now().UTC()}
		c.groups[group] = g
	}
	return g
}

func hashHex(s string, n int) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])[:n]
}

func (c *Cache) groupDir(group string) string {
	return filepath.Join(c.root, hashHex(group, 16))
}

func (c *Cache) fileDir(group, file string) string {
	return filepath.Join(c.root, hashHex(group, 16), hashHex(file, 32))
}

// entryName is the file name of an entry covering [start, covered].
func entryName(start, covered float64) string {
	return fmt.Sprintf("%016x-%016x.fc", math.Float64bits(start), math.Float64bits(covered))
}

// parseEntryName is entryName's inverse; ok is false for any other name (temporary
// files, strays).
func parseEntryName(name string) (start, covered float64, ok bool) {
	if len(name) != 36 || name[16] != '-' || name[33:] != ".fc" {
		return 0, 0, false
	}
	a, err1 := strconv.ParseUint(name[:16], 16, 64)
	b, err2 := strconv.ParseUint(name[17:33], 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return math.Float64frombits(a), math.Float64frombits(b), true
}

// nearestDir is p or its nearest existing parent.
func nearestDir(p string) string {
	for {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		p = parent
	}
}
