package framecache

import (
	"fmt"
	"unsafe"
)

// Direct writes (Options.Direct). The background writer writes entries with O_DIRECT
// where the file system allows it (Linux): the bytes go from the writer's buffers to the
// disk without passing through the page cache. A buffered write costs the kernel a
// page allocation, a copy and dirty-page bookkeeping, then write-back by kernel
// threads — on the 2-core VM of docs/performance.md 0.4–2 CPU-s per GiB against 0.05
// with O_DIRECT — CPU the decoder of the first epoch needs. But the entry is then not
// in the page cache: its first read fills it from the disk, which costs the next epoch
// about what the buffered write would have cost this one (docs/video.md, "Direct
// writes"), so buffered writes are the default.
//
// O_DIRECT wants the memory, the file offset and the length of each write aligned,
// which records are not (a 480×640 frame's record is 460,840 bytes). So a record's
// chunk is copied (the one copy the decoding thread makes anyway) to offset
// off mod dioAlign of an aligned buffer, off being the record's offset in the entry;
// the writer puts the entry's last partial block (tail) in front of it, writes the
// whole blocks and keeps the rest as the new tail. The entry's end is written padded
// to a block, and the file truncated to its size, before it is published.

// dioAlign is the alignment of direct writes: memory, file offset and length.
const dioAlign = 4096

// alignedBuffer returns a slice of length n whose first byte is dioAlign-aligned and
// whose capacity is n rounded up to dioAlign.
func alignedBuffer(n int) []byte {
	size := (n + dioAlign - 1) &^ (dioAlign - 1)
	if size == 0 {
		size = dioAlign
	}
	b := make([]byte, size+dioAlign)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (dioAlign - 1))
	return b[off : off+n : off+size]
}

// aligned reports whether b's first byte is dioAlign-aligned.
func aligned(b []byte) bool {
	return cap(b) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))&(dioAlign-1) == 0
}

// writeChunk writes chunk[lead:], the entry's next bytes, of which chunk[:lead] is
// room for the tail: directly (whole blocks; the rest kept as the tail), or through
// the page cache when the file is not in direct mode, its blocks reserved ahead
// (internal/fsalloc: fallocate with FALLOC_FL_KEEP_SIZE, 32 MiB at a time), which
// spares the kernel the delayed-allocation bookkeeping of every page written; finish
// cuts the file to its size, freeing what was reserved beyond it. A refusal only
// stops the reservation for the entry.
func (e *bgEntry) writeChunk(chunk []byte, lead int) error {
	if !e.direct {
		e.res.Ahead(e.f, e.size, int64(len(chunk)-lead))
		n, err := e.f.Write(chunk[lead:])
		e.size += int64(n)
		return err
	}
	if len(e.tail) != lead || !aligned(chunk) {
		return fmt.Errorf("direct write at %d: %d bytes of tail for a chunk placed after %d", e.written, len(e.tail), lead)
	}
	copy(chunk, e.tail)
	whole := len(chunk) &^ (dioAlign - 1)
	if whole > 0 {
		if _, err := e.f.WriteAt(chunk[:whole], e.written); err != nil {
			return err
		}
		e.written += int64(whole)
	}
	if e.tail == nil {
		e.tail = alignedBuffer(0)
	}
	e.tail = append(e.tail[:0], chunk[whole:]...)
	return nil
}

// finish writes the tail of a direct entry, padded to a block, and cuts the file to
// size, the entry's length; a buffered entry whose blocks were reserved beyond its
// size is cut to it, which frees them.
func (e *bgEntry) finish(size int64) error {
	if !e.direct {
		if e.res.Reserved() > size {
			return e.f.Truncate(size)
		}
		return nil
	}
	if e.written+int64(len(e.tail)) != size {
		return fmt.Errorf("direct write: %d bytes written and %d of tail for an entry of %d", e.written, len(e.tail), size)
	}
	if len(e.tail) == 0 {
		return nil
	}
	block := e.tail[:dioAlign]
	clear(block[len(e.tail):])
	if _, err := e.f.WriteAt(block, e.written); err != nil {
		return err
	}
	return e.f.Truncate(size)
}
