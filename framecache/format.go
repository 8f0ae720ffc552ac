package framecache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// The entry file format (version 1), all integers little-endian:
//
//	header   magic "LRFC", version u16 = 1, flags u16 = 0, start f64,
//	         group length u32, file length u32, meta length u32,
//	         group bytes, file bytes, meta bytes
//	records  per record: stored length u32, raw length u32, pts f64,
//	         kind u8 (0 raw, 1 s2 block, 2 zstd frame), 3 zero bytes,
//	         CRC-32C u32 of the record header's first 20 bytes followed by the raw
//	         (uncompressed) payload; then the stored payload
//	index    per record: pts f64, offset u64 of its record header
//	footer   record count u64, start f64, covered f64, index offset u64,
//	         raw payload bytes u64, CRC-32C u32 of the header, the index and the
//	         footer's fields before it, end magic "CFRL"
//
// The footer is written last, so a file cut short anywhere (a process killed mid-write,
// a torn copy) has no valid footer and reads as invalid; the footer's checksum covers the
// header and index, so every structural field is checked when a reader opens the file,
// and each record's own checksum is checked when it is read. The group and file strings
// stored in the header make a hash collision of the paths read as a miss, not as another
// file's frames.
const (
	magic       = "LRFC"
	endMagic    = "CFRL"
	version     = 1
	fixedHeader = 4 + 2 + 2 + 8 + 4 + 4 + 4
	recHeader   = 24
	indexEntry  = 16
	footerSize  = 8 + 8 + 8 + 8 + 8 + 4 + 4

	// maxRecord bounds one record's raw payload (a 4K RGB frame is 25 MB).
	maxRecord = 256 << 20
	// maxKey bounds the group, file and meta strings of a header.
	maxKey = 1 << 20
)

// Record kinds: how a record's payload is stored.
const (
	kindRaw  = 0
	kindS2   = 1
	kindZstd = 2
)

// ErrCorrupt is wrapped by the errors of entries whose bytes do not match their
// checksums or structure.
var ErrCorrupt = errors.New("framecache: corrupt entry")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is an entry's header.
type header struct {
	start       float64
	group, file string
	meta        []byte
}

// appendHeader appends h's encoding to b.
func appendHeader(b []byte, h header) []byte {
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint16(b, version)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(h.start))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.group)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.file)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.meta)))
	b = append(b, h.group...)
	b = append(b, h.file...)
	return append(b, h.meta...)
}

// footer is an entry's footer.
type footer struct {
	count          uint64
	start, covered float64
	indexOff       uint64
	raw            uint64
	crc            uint32
}

// appendFooterFields appends the footer's fields before its checksum.
func appendFooterFields(b []byte, f footer) []byte {
	b = binary.LittleEndian.AppendUint64(b, f.count)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f.start))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f.covered))
	b = binary.LittleEndian.AppendUint64(b, f.indexOff)
	return binary.LittleEndian.AppendUint64(b, f.raw)
}

func parseFooter(b []byte) (footer, error) {
	if len(b) != footerSize || string(b[footerSize-4:]) != endMagic {
		return footer{}, fmt.Errorf("%w: no end marker (file cut short?)", ErrCorrupt)
	}
	le := binary.LittleEndian
	return footer{
		count:    le.Uint64(b[0:]),
		start:    math.Float64frombits(le.Uint64(b[8:])),
		covered:  math.Float64frombits(le.Uint64(b[16:])),
		indexOff: le.Uint64(b[24:]),
		raw:      le.Uint64(b[32:]),
		crc:      le.Uint32(b[40:]),
	}, nil
}

// parseFixedHeader checks the fixed part of a header and returns its start and the
// lengths of the group, file and meta strings that follow it.
func parseFixedHeader(b []byte) (start float64, lens [3]int, err error) {
	if len(b) < fixedHeader || string(b[:4]) != magic {
		return 0, lens, fmt.Errorf("%w: not a frame cache entry (bad magic)", ErrCorrupt)
	}
	le := binary.LittleEndian
	if v := le.Uint16(b[4:]); v != version {
		return 0, lens, fmt.Errorf("%w: entry version %d, want %d", ErrCorrupt, v, version)
	}
	start = math.Float64frombits(le.Uint64(b[8:]))
	for i := range lens {
		n := le.Uint32(b[16+4*i:])
		if n > maxKey {
			return 0, lens, fmt.Errorf("%w: header string of %d bytes", ErrCorrupt, n)
		}
		lens[i] = int(n)
	}
	return start, lens, nil
}

// entryInfo is what opening an entry file learns from its header, index and footer.
type entryInfo struct {
	header
	foot footer
	pts  []float64 // per record
	off  []uint64  // per record, then the index offset (len(pts)+1 values)
}

// readEntry reads and checks the header, index and footer of the entry file of size
// bytes read through r. Every error wraps ErrCorrupt except r's own errors.
func readEntry(r io.ReaderAt, size int64, scratch []byte) (*entryInfo, error) {
	if size < fixedHeader+footerSize {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrCorrupt, size)
	}
	var fb [footerSize]byte
	if _, err := r.ReadAt(fb[:], size-footerSize); err != nil {
		return nil, fmt.Errorf("reading footer: %w", err)
	}
	f, err := parseFooter(fb[:])
	if err != nil {
		return nil, err
	}
	if f.count > uint64(size)/recHeader || f.indexOff > uint64(size) ||
		f.indexOff+f.count*indexEntry+footerSize != uint64(size) {
		return nil, fmt.Errorf("%w: footer says %d records, index at %d, in %d bytes", ErrCorrupt, f.count, f.indexOff, size)
	}
	var fh [fixedHeader]byte
	if _, err := r.ReadAt(fh[:], 0); err != nil {
		return nil, fmt.Errorf("reading header: %w", err)
	}
	start, lens, err := parseFixedHeader(fh[:])
	if err != nil {
		return nil, err
	}
	hlen := uint64(fixedHeader + lens[0] + lens[1] + lens[2])
	if hlen > f.indexOff {
		return nil, fmt.Errorf("%w: header of %d bytes past the records' end %d", ErrCorrupt, hlen, f.indexOff)
	}
	// One read for the header's strings and another for the index.
	strs := make([]byte, hlen-fixedHeader)
	if _, err := r.ReadAt(strs, fixedHeader); err != nil {
		return nil, fmt.Errorf("reading header: %w", err)
	}
	idx := growBuf(scratch, int(f.count*indexEntry))
	if _, err := r.ReadAt(idx, int64(f.indexOff)); err != nil {
		return nil, fmt.Errorf("reading index: %w", err)
	}
	crc := crc32.Update(0, castagnoli, fh[:])
	crc = crc32.Update(crc, castagnoli, strs)
	crc = crc32.Update(crc, castagnoli, idx)
	crc = crc32.Update(crc, castagnoli, fb[:footerSize-8])
	if crc != f.crc {
		return nil, fmt.Errorf("%w: header, index or footer checksum mismatch", ErrCorrupt)
	}
	if !(f.start <= f.covered) || math.IsInf(f.start, 0) || math.IsInf(f.covered, 0) {
		return nil, fmt.Errorf("%w: coverage [%v, %v]", ErrCorrupt, f.start, f.covered)
	}
	if math.Float64bits(start) != math.Float64bits(f.start) {
		return nil, fmt.Errorf("%w: header start %v, footer start %v", ErrCorrupt, start, f.start)
	}
	e := &entryInfo{
		header: header{
			start: start,
			group: string(strs[:lens[0]]),
			file:  string(strs[lens[0] : lens[0]+lens[1]]),
			meta:  strs[lens[0]+lens[1]:],
		},
		foot: f,
	}
	if err := e.parseIndex(idx, hlen); err != nil {
		return nil, err
	}
	return e, nil
}

// maxSpan is the size of the largest record, header included.
func (e *entryInfo) maxSpan() int {
	m := uint64(0)
	for i := range e.pts {
		m = max(m, e.off[i+1]-e.off[i])
	}
	return int(m)
}

// parseIndex fills e.pts and e.off from the index bytes and checks that the records
// follow each other from the header's end to the index, in ascending pts.
func (e *entryInfo) parseIndex(idx []byte, hlen uint64) error {
	n := int(e.foot.count)
	e.pts = make([]float64, n)
	e.off = make([]uint64, n+1)
	e.off[n] = e.foot.indexOff
	le := binary.LittleEndian
	for i := range n {
		e.pts[i] = math.Float64frombits(le.Uint64(idx[16*i:]))
		e.off[i] = le.Uint64(idx[16*i+8:])
		switch {
		case i == 0 && e.off[0] != hlen,
			i > 0 && (e.off[i] < e.off[i-1]+recHeader || !(e.pts[i] > e.pts[i-1])),
			e.off[i] > e.foot.indexOff || e.foot.indexOff-e.off[i] < recHeader:
			return fmt.Errorf("%w: index entry %d out of order", ErrCorrupt, i)
		}
		if math.IsNaN(e.pts[i]) || math.IsInf(e.pts[i], 0) {
			return fmt.Errorf("%w: index entry %d has pts %v", ErrCorrupt, i, e.pts[i])
		}
	}
	if n == 0 && e.foot.indexOff != hlen {
		return fmt.Errorf("%w: bytes between header and index with no records", ErrCorrupt)
	}
	return nil
}

// recordHeader is a record's 24-byte header.
type recordHeader struct {
	stored, raw uint32
	pts         float64
	kind        byte
	crc         uint32
}

func putRecordHeader(b []byte, h recordHeader) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], h.stored)
	le.PutUint32(b[4:], h.raw)
	le.PutUint64(b[8:], math.Float64bits(h.pts))
	b[16], b[17], b[18], b[19] = h.kind, 0, 0, 0
	le.PutUint32(b[20:], h.crc)
}

func parseRecordHeader(b []byte) recordHeader {
	le := binary.LittleEndian
	return recordHeader{
		stored: le.Uint32(b[0:]),
		raw:    le.Uint32(b[4:]),
		pts:    math.Float64frombits(le.Uint64(b[8:])),
		kind:   b[16],
		crc:    le.Uint32(b[20:]),
	}
}

// recordCRC is the checksum of a record: its header's first 20 bytes (lengths, pts,
// kind) and its raw payload.
func recordCRC(hdr, raw []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, hdr[:20]), castagnoli, raw)
}

// growBuf returns b resliced to n bytes, reallocated only when its capacity is short.
func growBuf(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n, n+n/8)
	}
	return b[:n]
}
