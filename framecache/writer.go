package framecache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
)

// Writer writes one entry. It is not safe for concurrent use; a nil *Writer (the cache
// does not write) accepts every call and does nothing.
type Writer struct {
	c     *Cache
	g     *groupCounters
	dir   string // the entry's directory
	start float64
	hcrc  uint32 // CRC-32C of the header bytes
	off   uint64 // bytes written so far
	raw   uint64 // raw payload bytes so far
	n     int
	last  float64 // the last record's pts
	idx   []byte
	buf   []byte
	done  bool  // committed or aborted
	err   error // why the writer was aborted, when it was the caller's doing
	// e is the entry's temporary file: written on the caller's goroutine until the
	// records are queued, then by the cache's background writer, which publishes it
	// in either case unless the cache has none (sync) (async.go).
	e      *bgEntry
	queued bool         // records go to the background writer
	sync   bool         // no background writer: published on the caller's goroutine
	ch     pendingChunk // queued: records not yet handed to the background writer
}

// Create starts an entry of (group, file) whose coverage starts at start, carrying meta
// (returned by Reader.Meta). It returns nil when the cache does not write (read-only,
// closed, or start not a finite number); a failure to create the file degrades the
// cache to read-only (one warning). Never an error.
func (c *Cache) Create(group, file string, start float64, meta []byte) *Writer {
	if c.root == "" || c.readonly.Load() || c.closed.Load() || math.IsNaN(start) || math.IsInf(start, 0) {
		return nil
	}
	if len(group) > maxKey || len(file) > maxKey || len(meta) > maxKey {
		c.log.Debug("frame cache: key or meta too long to cache", "group_bytes", len(group), "file_bytes", len(file), "meta_bytes", len(meta))
		return nil
	}
	if err := c.ensureGroup(group); err != nil {
		c.degrade(err)
		return nil
	}
	dir := c.fileDir(group, file)
	w := &Writer{c: c, g: c.group(group), dir: dir, start: start, e: &bgEntry{dir: dir},
		queued: c.bg.queueing(), sync: c.bg.max < 0}
	if !w.queued {
		if err := w.e.open(c, false); err != nil {
			c.degrade(err)
			return nil
		}
	}
	w.buf = appendHeader(w.buf[:0], header{start: start, group: group, file: file, meta: meta})
	w.hcrc = crc32.Update(0, castagnoli, w.buf)
	if err := w.put(w.buf, nil); err != nil {
		w.putFailed(err)
		return nil
	}
	w.off = uint64(len(w.buf))
	return w
}

// put writes b and then rest to the entry's temporary file, or (queued) copies them
// into a chunk for the background writer: errDropped when it is too far behind.
func (w *Writer) put(b, rest []byte) error { return w.putRecord(b, rest, false) }

// putRecord is put; crc asks the background writer to fill in the checksum of the
// raw record b+rest.
func (w *Writer) putRecord(b, rest []byte, crc bool) error {
	if w.queued {
		return w.queue(b, rest, crc)
	}
	return w.write(b, rest)
}

// putFailed aborts the writer after put's error: a dropped entry quietly (counted),
// a write error degrading the cache.
func (w *Writer) putFailed(err error) {
	w.abort()
	if errors.Is(err, errDropped) {
		w.c.st.dropped.Add(1)
		return
	}
	w.c.degrade(err)
}

// ensureGroup writes the group's label if it is missing; once more if a Clear removed
// the group's directory meanwhile.
func (c *Cache) ensureGroup(group string) error {
	gdir := c.groupDir(group)
	if _, err := os.Stat(filepath.Join(gdir, labelFile)); err == nil {
		return nil
	}
	var err error
	for range 2 {
		if err = os.MkdirAll(gdir, 0o700); err != nil {
			err = fmt.Errorf("creating %s: %w", gdir, err)
			continue
		}
		if err = writeAtomic(gdir, labelFile, []byte(group)); !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return err
}

// createTemp creates a temporary entry file in dir, creating dir; once more if an
// eviction or Clear removed dir between the two.
func createTemp(dir string) (*os.File, error) {
	var err error
	for range 2 {
		if err = os.MkdirAll(dir, 0o700); err != nil {
			continue
		}
		var f *os.File
		if f, err = os.CreateTemp(dir, ".w-*.tmp"); err == nil {
			return f, nil
		}
	}
	return nil, fmt.Errorf("creating an entry in %s: %w", dir, err)
}

// Add appends a record (pts ascending; the payload is compressed and written before Add
// returns). A write error (disk full, file too large, I/O error) aborts the writer and
// degrades the cache to read-only with one warning; a pts not above the previous one or a
// payload over 256 MiB aborts the writer (Commit returns why). An entry that grows past
// the budget is aborted quietly. Adds after any of these are no-ops.
func (w *Writer) Add(pts float64, payload []byte) {
	if w == nil || w.done {
		return
	}
	if w.c.readonly.Load() {
		w.abort()
		return
	}
	switch {
	case math.IsNaN(pts) || math.IsInf(pts, 0) || w.n > 0 && !(pts > w.last):
		w.fail(fmt.Errorf("framecache: record pts %v after %v: records must be in ascending pts", pts, w.last))
		return
	case len(payload) > maxRecord:
		w.fail(fmt.Errorf("framecache: record of %d bytes (at most %d)", len(payload), maxRecord))
		return
	}
	buf, rest, kind, err := w.c.codecs.compress(w.buf, payload, w.c.kind)
	w.buf = buf
	if err != nil {
		w.fail(err)
		return
	}
	n := len(buf) + len(rest)
	putRecordHeader(buf, recordHeader{stored: uint32(n - recHeader), raw: uint32(len(payload)), pts: pts, kind: kind})
	w.queued = w.queued || w.c.bg.queueing() // the writes became slow (inline.go)
	// A raw record queued for the background writer gets its checksum there (from
	// the copy: the caller's thread only copies); any other here, while the payload
	// is in the CPU's cache.
	crcLater := w.queued && kind == kindRaw
	if !crcLater {
		binary.LittleEndian.PutUint32(buf[20:], recordCRC(buf, payload))
	}
	if int64(w.off)+int64(n)+int64(w.n+1)*indexEntry+footerSize > w.c.budget {
		w.c.log.Debug("frame cache: entry larger than the budget, not kept", "budget", w.c.budget)
		w.abort()
		return
	}
	if err := w.putRecord(buf, rest, crcLater); err != nil {
		w.putFailed(err)
		return
	}
	w.idx = binary.LittleEndian.AppendUint64(w.idx, math.Float64bits(pts))
	w.idx = binary.LittleEndian.AppendUint64(w.idx, w.off)
	w.off += uint64(n)
	w.raw += uint64(len(payload))
	w.n++
	w.last = pts
}

// Commit writes the index and footer and publishes the entry atomically (rename) with
// coverage [start, covered], then keeps the cache within its budget. It returns nil when
// the writer was aborted because of the cache (read-only, budget); an error for the
// caller's mistakes (covered before start or before a record, records out of order).
func (w *Writer) Commit(covered float64) error {
	if w == nil {
		return nil
	}
	if w.done {
		return w.err
	}
	if w.c.readonly.Load() {
		w.abort()
		return nil
	}
	if math.IsNaN(covered) || math.IsInf(covered, 0) || covered < w.start {
		w.fail(fmt.Errorf("framecache: coverage [%v, %v] is empty", w.start, covered))
		return w.err
	}
	if w.n > 0 && covered < w.last {
		w.fail(fmt.Errorf("framecache: coverage ends at %v, before the last record's pts %v", covered, w.last))
		return w.err
	}
	ft := footer{count: uint64(w.n), start: w.start, covered: covered, indexOff: w.off, raw: w.raw}
	tail := appendFooterFields(w.idx, ft)
	crc := crc32.Update(w.hcrc, castagnoli, tail)
	tail = binary.LittleEndian.AppendUint32(tail, crc)
	tail = append(tail, endMagic...)
	if err := w.put(tail, nil); err != nil {
		w.putFailed(err)
		return nil
	}
	size := int64(w.off) + int64(len(tail))
	w.done = true
	w.handOver()
	if w.sync {
		w.e.publish(w.c, w, covered, size)
		return nil
	}
	w.c.bg.submit(w.c, bgJob{e: w.e, publish: w, covered: covered, size: size})
	return nil
}

// publish closes f, w's complete temporary file, and renames it into place with
// coverage [start, covered].
func (c *Cache) publish(w *Writer, f *os.File, covered float64, size int64) {
	tmp := f.Name()
	err := f.Close()
	final := filepath.Join(w.dir, entryName(w.start, covered))
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		os.Remove(tmp)
		if !errors.Is(err, fs.ErrNotExist) { // ErrNotExist: the directory was cleared meanwhile
			c.degrade(fmt.Errorf("publishing %s: %w", final, err))
		}
		return
	}
	c.published(w, final, size)
}

// published counts a committed entry and keeps the cache within its budget.
func (c *Cache) published(w *Writer, path string, size int64) {
	c.st.entriesWritten.Add(1)
	c.st.framesWritten.Add(int64(w.n))
	c.st.bytesWritten.Add(size)
	c.st.rawBytesWritten.Add(int64(w.raw))
	w.g.framesWritten.Add(int64(w.n))
	c.mu.Lock()
	c.touched[path] = c.now()
	c.mu.Unlock()
	c.afterCommit(path, size)
}

// Abort drops the entry (its temporary file is removed). Safe on nil; idempotent.
func (w *Writer) Abort() {
	if w == nil || w.done {
		return
	}
	w.abort()
}

func (w *Writer) abort() {
	w.done = true
	w.dropChunk()
	if w.e != nil {
		if w.queued {
			w.c.bg.submit(w.c, bgJob{e: w.e, abort: true})
		} else {
			w.e.discard()
		}
		w.e = nil
	}
	w.buf, w.idx = nil, nil
}

// fail aborts the writer for a mistake of the caller, which Commit reports.
func (w *Writer) fail(err error) {
	w.err = err
	w.abort()
}
