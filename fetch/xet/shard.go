package xet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
)

// The MDB shard (xet-core xet_core_structures/src/metadata_shard): a
// header (tag, version 2, footer size), the file info section (per file a
// header of 48 bytes: file hash, flags, number of segments, 8 unused
// bytes; its segments (xorb hash, flags, unpacked bytes, chunk range);
// with flagVerification one verification entry per segment (the range
// hash of its chunk hashes, 16 unused bytes); with flagMetadataExt the
// file's SHA-256 and 16 unused bytes) closed by a bookend (a header whose
// hash is all ones), then the xorb info section (per xorb a header: xorb
// hash, flags, number of chunks, unpacked bytes, bytes on disk; per chunk:
// hash, unpacked offset in the xorb, unpacked bytes, flags, 4 unused
// bytes) closed by a bookend. Every entry is 48 bytes, little-endian. A
// shard uploaded to the CAS stops there (footer size 0); stored shards add
// lookup tables and a footer, which ParseShard skips.
const (
	shardVersion     = 2
	entrySize        = 48
	shardHeaderSize  = 48
	flagVerification = uint32(1) << 31
	flagMetadataExt  = uint32(1) << 30
)

// Segment is a run of chunks of one xorb in a file: chunks [Start, End) of
// Xorb, Bytes unpacked bytes, and the verification hash of their hashes.
type Segment struct {
	Xorb       Hash
	Start, End uint32
	Bytes      uint32
	Verify     Hash
	gen        int // the Session's xorb generation, until the xorb is named
}

// FileInfo is a file's reconstruction: its Xet hash and segments, and its
// SHA-256 when known.
type FileInfo struct {
	Hash     Hash
	Segments []Segment
	SHA256   *[32]byte
}

// Size is the file's size.
func (f *FileInfo) Size() uint64 {
	var n uint64
	for _, s := range f.Segments {
		n += uint64(s.Bytes)
	}
	return n
}

// XorbInfo describes an uploaded xorb: its hash, chunks (hash and unpacked
// size, in order) and serialized size.
type XorbInfo struct {
	Hash        Hash
	Chunks      []Chunk
	BytesOnDisk uint32
}

// Shard is the content of an MDB shard.
type Shard struct {
	Files []FileInfo
	Xorbs []XorbInfo
}

// bookend closes a section: an entry whose hash is all ones.
var bookend = func() (h Hash) {
	for i := range h {
		h[i] = 0xff
	}
	return h
}()

// entry is a 48-byte record: a hash and four little-endian u32.
func entry(h Hash, a, b, c, d uint32) []byte {
	e := make([]byte, entrySize)
	copy(e, h[:])
	binary.LittleEndian.PutUint32(e[32:], a)
	binary.LittleEndian.PutUint32(e[36:], b)
	binary.LittleEndian.PutUint32(e[40:], c)
	binary.LittleEndian.PutUint32(e[44:], d)
	return e
}

// Bytes serializes the shard as it is uploaded (no lookup tables, no
// footer), files and xorbs in hash order as xet-core writes them.
func (s *Shard) Bytes() []byte {
	var b bytes.Buffer
	b.Write(shardHeaderTag[:])
	binary.Write(&b, binary.LittleEndian, [2]uint64{shardVersion, 0})
	files := append([]FileInfo(nil), s.Files...)
	sort.SliceStable(files, func(i, j int) bool { return less(files[i].Hash, files[j].Hash) })
	for _, f := range files {
		flags := flagVerification
		if f.SHA256 != nil {
			flags |= flagMetadataExt
		}
		b.Write(entry(f.Hash, flags, uint32(len(f.Segments)), 0, 0))
		for _, g := range f.Segments {
			b.Write(entry(g.Xorb, 0, g.Bytes, g.Start, g.End))
		}
		for _, g := range f.Segments {
			b.Write(entry(g.Verify, 0, 0, 0, 0))
		}
		if f.SHA256 != nil {
			b.Write(entry(*f.SHA256, 0, 0, 0, 0))
		}
	}
	b.Write(entry(bookend, 0, 0, 0, 0))
	xorbs := append([]XorbInfo(nil), s.Xorbs...)
	sort.SliceStable(xorbs, func(i, j int) bool { return less(xorbs[i].Hash, xorbs[j].Hash) })
	for _, x := range xorbs {
		var total uint64
		for _, c := range x.Chunks {
			total += c.Size
		}
		b.Write(entry(x.Hash, 0, uint32(len(x.Chunks)), uint32(total), x.BytesOnDisk))
		var off uint64
		for _, c := range x.Chunks {
			b.Write(entry(c.Hash, uint32(off), uint32(c.Size), 0, 0))
			off += c.Size
		}
	}
	b.Write(entry(bookend, 0, 0, 0, 0))
	return b.Bytes()
}

// less orders hashes as xet-core does (by their four little-endian words).
func less(a, b Hash) bool {
	for w := 0; w < 4; w++ {
		x, y := binary.LittleEndian.Uint64(a[w*8:]), binary.LittleEndian.Uint64(b[w*8:])
		if x != y {
			return x < y
		}
	}
	return false
}

// ErrBadShard marks a shard that does not parse.
var ErrBadShard = errors.New("malformed shard")

// shardReader reads 48-byte entries, counting them for errors.
type shardReader struct {
	data []byte
	off  int
}

func (r *shardReader) next(what string) (Hash, [4]uint32, error) {
	var h Hash
	var v [4]uint32
	if len(r.data)-r.off < entrySize {
		return h, v, fmt.Errorf("%w: %s at byte %d: truncated", ErrBadShard, what, r.off)
	}
	e := r.data[r.off : r.off+entrySize]
	copy(h[:], e)
	for i := range v {
		v[i] = binary.LittleEndian.Uint32(e[32+4*i:])
	}
	r.off += entrySize
	return h, v, nil
}

// left is the number of whole entries left.
func (r *shardReader) left() int { return (len(r.data) - r.off) / entrySize }

// ParseShard parses a shard: the header, the file info and xorb info
// sections; what follows the xorb bookend (lookup tables, footer) is not
// read.
func ParseShard(data []byte) (*Shard, error) {
	if len(data) < shardHeaderSize || !bytes.Equal(data[:32], shardHeaderTag[:]) {
		return nil, fmt.Errorf("%w: not an MDB shard (wrong tag)", ErrBadShard)
	}
	if v := binary.LittleEndian.Uint64(data[32:]); v != shardVersion {
		return nil, fmt.Errorf("%w: header version %d, want %d", ErrBadShard, v, shardVersion)
	}
	r := &shardReader{data: data, off: shardHeaderSize}
	s := &Shard{}
	if err := parseFiles(r, s); err != nil {
		return nil, err
	}
	if err := parseXorbs(r, s); err != nil {
		return nil, err
	}
	return s, nil
}

func parseFiles(r *shardReader, s *Shard) error {
	for {
		h, v, err := r.next(fmt.Sprintf("file %d", len(s.Files)))
		if err != nil {
			return err
		}
		if h == bookend {
			return nil
		}
		flags, n := v[0], int(v[1])
		if flags&^(flagVerification|flagMetadataExt) != 0 {
			return fmt.Errorf("%w: file %s: unknown flags %#x", ErrBadShard, h, flags)
		}
		need := n
		if flags&flagVerification != 0 {
			need += n
		}
		if n > r.left() || need > r.left() {
			return fmt.Errorf("%w: file %s: %d segments, %d entries left", ErrBadShard, h, n, r.left())
		}
		f := FileInfo{Hash: h, Segments: make([]Segment, n)}
		for i := range f.Segments {
			x, e, _ := r.next("segment")
			if e[3] <= e[2] {
				return fmt.Errorf("%w: file %s segment %d: chunk range [%d, %d)", ErrBadShard, h, i, e[2], e[3])
			}
			f.Segments[i] = Segment{Xorb: x, Bytes: e[1], Start: e[2], End: e[3]}
		}
		if flags&flagVerification != 0 {
			for i := range f.Segments {
				f.Segments[i].Verify, _, _ = r.next("verification")
			}
		}
		if flags&flagMetadataExt != 0 {
			sha, _, err := r.next("metadata")
			if err != nil {
				return err
			}
			b := [32]byte(sha)
			f.SHA256 = &b
		}
		s.Files = append(s.Files, f)
	}
}

func parseXorbs(r *shardReader, s *Shard) error {
	for {
		h, v, err := r.next(fmt.Sprintf("xorb %d", len(s.Xorbs)))
		if err != nil {
			return err
		}
		if h == bookend {
			return nil
		}
		n := int(v[1])
		if n > r.left() || n > MaxXorbChunks {
			return fmt.Errorf("%w: xorb %s: %d chunks, %d entries left", ErrBadShard, h, n, r.left())
		}
		x := XorbInfo{Hash: h, Chunks: make([]Chunk, n), BytesOnDisk: v[3]}
		var off uint64
		for i := range x.Chunks {
			c, e, _ := r.next("chunk")
			if uint64(e[0]) != off {
				return fmt.Errorf("%w: xorb %s chunk %d: at %d, want %d", ErrBadShard, h, i, e[0], off)
			}
			x.Chunks[i] = Chunk{Hash: c, Size: uint64(e[1])}
			off += uint64(e[1])
		}
		if off != uint64(v[2]) {
			return fmt.Errorf("%w: xorb %s: chunks hold %d bytes, header says %d", ErrBadShard, h, off, v[2])
		}
		s.Xorbs = append(s.Xorbs, x)
	}
}

// WriteTo writes the shard's upload form.
func (s *Shard) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(s.Bytes())
	return int64(n), err
}
