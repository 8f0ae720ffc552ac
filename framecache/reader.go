package framecache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Lookup returns a reader of a published, valid entry of (group, file) whose range
// covers t (Start <= t <= Covered); when several do, the one with the largest Covered.
// It returns (nil, nil) on a miss. group is the dataset (free text, shown by List); file
// is an opaque identity of the source file (everything that changes its frames); both
// are hashed (SHA-256) for paths, and an entry is served only if its header holds the
// same two strings. An entry found damaged (bad header, index or footer: a torn or
// truncated file) is removed and the next candidate tried; an entry that cannot be read
// for another reason is skipped. The error is nil: an unreadable cache is a miss, so the
// caller decodes. Counts a hit when a reader is returned, else a miss.
func (c *Cache) Lookup(group, file string, t float64) (*Reader, error) {
	g := c.group(group)
	if r := c.lookup(group, file, t, g); r != nil {
		c.st.hits.Add(1)
		g.hits.Add(1)
		return r, nil
	}
	c.st.misses.Add(1)
	g.misses.Add(1)
	return nil, nil
}

// Holds reports whether a published entry of (group, file) names a range
// covering t, without opening it or counting a hit or a miss: a hint (the
// entry may yet be found damaged by Lookup).
func (c *Cache) Holds(group, file string, t float64) bool {
	if c == nil || c.root == "" || math.IsNaN(t) {
		return false
	}
	dir := c.fileDir(group, file)
	all, err := c.entriesOf(dir)
	if err != nil {
		return false
	}
	for _, cd := range all {
		if cd.start <= t && t <= cd.covered && !c.knownBad(filepath.Join(dir, cd.name)) {
			return true
		}
	}
	return false
}

// Empty reports whether the cache holds no published entry of group: none was ever
// stored, or all were removed. A nil Cache is empty.
func (c *Cache) Empty(group string) bool {
	if c == nil || c.root == "" {
		return true
	}
	gdir := c.groupDir(group)
	dirs, err := os.ReadDir(gdir)
	if err != nil {
		return true
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		if all, err := c.entriesOf(filepath.Join(gdir, d.Name())); err == nil && len(all) > 0 {
			return false
		}
	}
	return true
}

type candidate struct {
	name           string
	start, covered float64
}

func (c *Cache) lookup(group, file string, t float64, g *groupCounters) *Reader {
	if c.root == "" || math.IsNaN(t) {
		return nil
	}
	dir := c.fileDir(group, file)
	all, err := c.entriesOf(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.log.Debug("frame cache: lookup", "dir", dir, "err", err)
		}
		return nil
	}
	for _, cd := range all {
		if !(cd.start <= t && t <= cd.covered) {
			continue
		}
		p := filepath.Join(dir, cd.name)
		if c.knownBad(p) {
			continue
		}
		r, err := c.openReader(p, cd)
		switch {
		case err == nil && (r.info.group != group || r.info.file != file):
			r.Close() // a hash collision of another group or file: not ours
		case err == nil:
			r.g = g
			c.touch(p)
			return r
		case errors.Is(err, ErrCorrupt):
			c.log.Warn("frame cache: damaged entry: not used, removed where the cache is writable", "path", p, "err", err)
			c.st.corrupt.Add(1)
			if r != nil {
				c.removeBad(p, r.f)
				r.f.Close()
			}
		case !errors.Is(err, fs.ErrNotExist):
			c.log.Debug("frame cache: reading entry", "path", p, "err", err)
		}
	}
	return nil
}

// listing is a file directory's entries as this process last read them.
type listing struct {
	mtime   time.Time   // the directory's mtime when read
	entries []candidate // by Covered, largest first; never modified once stored
}

// listingAge is how old a directory's mtime must be for its listing to be kept: any
// later change to the directory then gives it a later mtime, even where the filesystem's
// timestamps are coarse (a jiffy). A listing that missed a change costs a miss or a
// skipped candidate, never wrong frames.
const listingAge = time.Second

// entriesOf returns the entries of a file directory, largest Covered first: a stat of the
// directory when this process's listing of it is current, else a ReadDir (the one cost of
// a lookup that grows with the directory: 300 entries took ~0.3 ms).
func (c *Cache) entriesOf(dir string) ([]candidate, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	l := c.lists[dir]
	c.mu.Unlock()
	if l != nil && l.mtime.Equal(st.ModTime()) {
		return l.entries, nil
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []candidate
	for _, d := range des {
		if s, cv, ok := parseEntryName(d.Name()); ok {
			out = append(out, candidate{d.Name(), s, cv})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].covered > out[j].covered })
	c.mu.Lock()
	if time.Since(st.ModTime()) >= listingAge {
		c.lists[dir] = &listing{mtime: st.ModTime(), entries: out}
	} else {
		delete(c.lists, dir)
	}
	c.mu.Unlock()
	return out, nil
}

// Reader reads the records of one entry in order. It is not safe for concurrent use.
type Reader struct {
	c    *Cache
	g    *groupCounters
	f    *os.File
	path string
	recs records
	info *entryInfo
	next int   // the record Next returns
	err  error // sticky: a corrupt record ends the reader
}

// records reads the records of an entry whose header, index and footer were checked.
type records struct {
	ra     io.ReaderAt
	info   *entryInfo
	codecs *codecs
	rbuf   []byte // one record as stored
	dbuf   []byte // one record's payload decompressed
	// prev holds the previous record's buffers, untouched while the next record
	// is read (read alternates the two pairs): a payload stays valid until the
	// second read after it.
	prev [2][]byte
}

// openReader opens and checks an entry file. On an ErrCorrupt error the returned Reader
// (not usable) carries the open file, so the caller can remove that very file.
func (c *Cache) openReader(p string, cd candidate) (*Reader, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("entry %s: %w", p, err)
	}
	info, err := readEntry(f, st.Size(), nil)
	if err == nil && (math.Float64bits(info.foot.start) != math.Float64bits(cd.start) ||
		math.Float64bits(info.foot.covered) != math.Float64bits(cd.covered)) {
		err = fmt.Errorf("%w: footer covers [%v, %v], name says [%v, %v]", ErrCorrupt, info.foot.start, info.foot.covered, cd.start, cd.covered)
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return &Reader{f: f}, fmt.Errorf("entry %s: %w", p, err)
		}
		f.Close()
		return nil, fmt.Errorf("entry %s: %w", p, err)
	}
	rd := &Reader{c: c, f: f, path: p, info: info, recs: records{ra: f, info: info, codecs: &c.codecs}}
	rd.recs.rbuf, rd.recs.dbuf = c.getBuf(), c.getBuf()
	rd.recs.prev = [2][]byte{c.getBuf(), c.getBuf()}
	return rd, nil
}

// touch sets an entry's mtime to now, for LRU eviction, at most once a touchEvery per
// entry in this process.
func (c *Cache) touch(p string) {
	now := c.now()
	c.mu.Lock()
	last, ok := c.touched[p]
	if ok && now.Sub(last) < touchEvery {
		c.mu.Unlock()
		return
	}
	c.touched[p] = now
	c.mu.Unlock()
	if err := os.Chtimes(p, now, now); err != nil {
		c.log.Debug("frame cache: touching entry", "path", p, "err", err)
	}
}

// removeBad removes the damaged entry at p if it is still the file f (a writer may have
// published a good one under the same name since). One that cannot be removed (a
// read-only cache) is remembered, so that later lookups pass it over without reading
// or warning again.
func (c *Cache) removeBad(p string, f *os.File) {
	a, err1 := os.Stat(p)
	b, err2 := f.Stat()
	if err1 == nil && err2 == nil && os.SameFile(a, b) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.log.Debug("frame cache: removing a damaged entry", "path", p, "err", err)
			c.mu.Lock()
			c.bad[p] = b
			c.mu.Unlock()
		}
	}
}

// knownBad reports whether p is a damaged entry removeBad could not remove, still the
// same file.
func (c *Cache) knownBad(p string) bool {
	c.mu.Lock()
	info, ok := c.bad[p]
	c.mu.Unlock()
	if !ok {
		return false
	}
	now, err := os.Stat(p)
	return err == nil && os.SameFile(now, info)
}

// Start is the start of the entry's coverage.
func (r *Reader) Start() float64 { return r.info.foot.start }

// Covered is the end of the entry's coverage.
func (r *Reader) Covered() float64 { return r.info.foot.covered }

// Meta is the meta given to Create.
func (r *Reader) Meta() []byte { return r.info.meta }

// Len is the number of records.
func (r *Reader) Len() int { return len(r.info.pts) }

// PTS is the pts of record i (0 <= i < Len()), from the entry's index.
func (r *Reader) PTS(i int) float64 { return r.info.pts[i] }

// SkipTo positions the reader so that Next returns the first record whose pts is at or
// after t (io.EOF if none), without reading the records skipped.
func (r *Reader) SkipTo(t float64) {
	r.next = sort.SearchFloat64s(r.info.pts, t)
}

// Next returns the next record. The payload is valid until the second call to Next
// after this one, or Close: a caller may hold the previous record while it reads the
// next (the reader alternates two sets of buffers). It returns io.EOF after the last record. A record that fails its checksum or
// structure returns an error wrapping ErrCorrupt (naming the file and record) and the
// entry is removed from the cache; the reader then returns that error from every call.
//
// Each record is read with one pread of its whole stored form into a buffer reused
// across records, then decompressed into a second reused buffer (a raw record is returned
// from the first): two copies of a 460 KB frame at most, no allocation per frame. pread
// rather than mmap: the same cost for records this large (the kernel copy replaces the
// page faults of a mapping), no SIGBUS when the disk fails under a mapping, and a reader
// of an entry evicted meanwhile keeps its open file.
func (r *Reader) Next() (pts float64, payload []byte, err error) {
	return r.next1(nil, false)
}

// NextInto is Next with the payload read, or decompressed, into dst (grown when
// short) instead of the reader's buffers: it stays valid as long as the caller keeps
// dst, whatever the reader does next — also after Close. A raw record is read from the
// file straight into dst (one copy of the frame, the kernel's, where Next and a copy
// make two).
func (r *Reader) NextInto(dst []byte) (pts float64, payload []byte, err error) {
	return r.next1(dst, true)
}

// next1 is Next (into false) and NextInto.
func (r *Reader) next1(dst []byte, into bool) (pts float64, payload []byte, err error) {
	if r.err != nil {
		return 0, nil, r.err
	}
	if r.f == nil {
		return 0, nil, fmt.Errorf("framecache: reader of %s is closed", r.path)
	}
	if r.next >= len(r.info.pts) {
		return 0, nil, io.EOF
	}
	i := r.next
	if into {
		pts, payload, err = r.recs.readInto(i, dst)
	} else {
		pts, payload, err = r.recs.read(i)
	}
	if err != nil {
		r.err = fmt.Errorf("entry %s, record %d: %w", r.path, i, err)
		if errors.Is(err, ErrCorrupt) {
			r.c.log.Warn("frame cache: damaged entry: not used, removed where the cache is writable", "path", r.path, "err", r.err)
			r.c.st.corrupt.Add(1)
			r.c.removeBad(r.path, r.f)
		}
		return 0, nil, r.err
	}
	r.next++
	r.c.st.framesRead.Add(1)
	r.c.st.bytesRead.Add(int64(r.info.off[i+1] - r.info.off[i]))
	if r.g != nil {
		r.g.framesRead.Add(1)
	}
	return pts, payload, nil
}

// read reads, decompresses and checks record i.
func (r *records) read(i int) (float64, []byte, error) {
	r.rbuf, r.dbuf, r.prev[0], r.prev[1] = r.prev[0], r.prev[1], r.rbuf, r.dbuf
	span := r.info.off[i+1] - r.info.off[i]
	if span > recHeader+maxRecord+maxRecord/8 {
		return 0, nil, fmt.Errorf("%w: record of %d bytes", ErrCorrupt, span)
	}
	if cap(r.rbuf) < int(span) {
		r.rbuf = make([]byte, r.info.maxSpan()) // once per reader: the largest record
	}
	r.rbuf = r.rbuf[:span]
	if _, err := r.ra.ReadAt(r.rbuf, int64(r.info.off[i])); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, nil, fmt.Errorf("%w: file cut short", ErrCorrupt)
		}
		return 0, nil, err
	}
	h := parseRecordHeader(r.rbuf)
	if uint64(h.stored) != span-recHeader || h.raw > maxRecord ||
		math.Float64bits(h.pts) != math.Float64bits(r.info.pts[i]) {
		return 0, nil, fmt.Errorf("%w: record header does not match the index", ErrCorrupt)
	}
	raw, dbuf, err := r.codecs.decompress(r.dbuf, r.rbuf[recHeader:], h.kind, int(h.raw))
	r.dbuf = dbuf
	if err != nil {
		return 0, nil, err
	}
	if recordCRC(r.rbuf, raw) != h.crc {
		return 0, nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	return h.pts, raw, nil
}

// readInto reads, decompresses and checks record i into dst (grown when short): a raw
// record's payload is read from the file into dst directly, after its header.
func (r *records) readInto(i int, dst []byte) (float64, []byte, error) {
	off := int64(r.info.off[i])
	span := r.info.off[i+1] - r.info.off[i]
	if span < recHeader || span > recHeader+maxRecord+maxRecord/8 {
		return 0, nil, fmt.Errorf("%w: record of %d bytes", ErrCorrupt, span)
	}
	var hb [recHeader]byte
	if err := r.readAt(hb[:], off); err != nil {
		return 0, nil, err
	}
	h := parseRecordHeader(hb[:])
	if uint64(h.stored) != span-recHeader || h.raw > maxRecord ||
		math.Float64bits(h.pts) != math.Float64bits(r.info.pts[i]) {
		return 0, nil, fmt.Errorf("%w: record header does not match the index", ErrCorrupt)
	}
	var raw []byte
	if h.kind == kindRaw {
		if h.raw != h.stored {
			return 0, nil, fmt.Errorf("%w: raw record of %d bytes, header says %d", ErrCorrupt, h.stored, h.raw)
		}
		raw = growBuf(dst, int(h.raw))
		if err := r.readAt(raw, off+recHeader); err != nil {
			return 0, nil, err
		}
	} else {
		r.rbuf = growBuf(r.rbuf, int(h.stored))
		if err := r.readAt(r.rbuf, off+recHeader); err != nil {
			return 0, nil, err
		}
		var err error
		if raw, _, err = r.codecs.decompress(dst, r.rbuf, h.kind, int(h.raw)); err != nil {
			return 0, nil, err
		}
	}
	if recordCRC(hb[:], raw) != h.crc {
		return 0, nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	return h.pts, raw, nil
}

// readAt fills b from the entry at off; a short file is ErrCorrupt.
func (r *records) readAt(b []byte, off int64) error {
	if _, err := r.ra.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: file cut short", ErrCorrupt)
		}
		return err
	}
	return nil
}

// Close closes the reader's file. Idempotent.
func (r *Reader) Close() error {
	if r == nil || r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	if r.c != nil {
		r.c.putBuf(r.recs.rbuf)
		r.c.putBuf(r.recs.dbuf)
		r.c.putBuf(r.recs.prev[0])
		r.c.putBuf(r.recs.prev[1])
	}
	r.recs = records{}
	if err != nil {
		return fmt.Errorf("closing entry %s: %w", r.path, err)
	}
	return nil
}

// getBuf returns a buffer of a closed Reader, for a new one (nil when there is none):
// readers of a camera's segments then reuse the same frame buffers.
func (c *Cache) getBuf() []byte {
	if b, ok := c.bufs.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return nil
}

func (c *Cache) putBuf(b []byte) {
	if cap(b) > 0 {
		c.bufs.Put(&b)
	}
}
