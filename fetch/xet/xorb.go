package xet

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/pierrec/lz4/v4"
)

// Compression schemes of a xorb chunk (xet-core CompressionScheme).
const (
	CompressionNone = 0
	CompressionLZ4  = 1 // an LZ4 frame
	CompressionBG4  = 2 // byte grouping of 4, then an LZ4 frame
)

// chunkHeaderSize is a serialized chunk's header: version (0), compressed
// length (3 bytes, little-endian), scheme, uncompressed length (3 bytes).
const chunkHeaderSize = 8

// xorbIdent starts a xorb footer; a chunk header never starts with it.
var xorbIdent = []byte("XETBLOB")

// Xorb collects chunks into one xorb, as they are serialized for upload:
// each chunk an 8-byte header and its bytes, LZ4-compressed when that is
// smaller (as xet-core does), no footer. At most MaxXorbBytes unpacked
// bytes and MaxXorbChunks chunks.
type Xorb struct {
	Data   []byte  // the serialized chunks
	Chunks []Chunk // hash and unpacked size of each chunk
	Bytes  uint64  // unpacked bytes
	lz     bytes.Buffer
	zw     *lz4.Writer
}

// Fits reports whether a chunk of n bytes still fits.
func (x *Xorb) Fits(n int) bool {
	return len(x.Chunks) < MaxXorbChunks && x.Bytes+uint64(n) <= MaxXorbBytes
}

// Add appends a chunk (its hash computed here) and returns its hash.
func (x *Xorb) Add(data []byte) (Hash, error) {
	h := ChunkHash(data)
	scheme, body := CompressionNone, data
	if len(data) > 64 {
		if x.zw == nil {
			x.zw = lz4.NewWriter(&x.lz)
		}
		x.lz.Reset()
		x.zw.Reset(&x.lz)
		if _, err := x.zw.Write(data); err != nil {
			return h, fmt.Errorf("xorb: lz4: %w", err)
		}
		if err := x.zw.Close(); err != nil {
			return h, fmt.Errorf("xorb: lz4: %w", err)
		}
		if x.lz.Len() < len(data) {
			scheme, body = CompressionLZ4, x.lz.Bytes()
		}
	}
	x.Data = appendChunkHeader(x.Data, len(body), scheme, len(data))
	x.Data = append(x.Data, body...)
	x.Chunks = append(x.Chunks, Chunk{Hash: h, Size: uint64(len(data))})
	x.Bytes += uint64(len(data))
	return h, nil
}

// Hash is the xorb's name.
func (x *Xorb) Hash() Hash { return XorbHash(x.Chunks) }

// Reset empties the xorb, keeping its buffers.
func (x *Xorb) Reset() {
	x.Data, x.Chunks, x.Bytes = x.Data[:0], x.Chunks[:0], 0
}

func appendChunkHeader(b []byte, compressed, scheme, uncompressed int) []byte {
	return append(b, 0,
		byte(compressed), byte(compressed>>8), byte(compressed>>16),
		byte(scheme),
		byte(uncompressed), byte(uncompressed>>8), byte(uncompressed>>16))
}

// ParsedChunk is one chunk of a parsed xorb: its hash, its unpacked bytes,
// and where its serialized form lies in the xorb ([Start, End)).
type ParsedChunk struct {
	Hash       Hash
	Data       []byte
	Start, End int
}

// ErrBadXorb marks a xorb that does not parse or whose content does not
// have the hash it is named by.
var ErrBadXorb = errors.New("malformed xorb")

// ParseXorb parses serialized xorb chunks (a footer, if any, ends the
// chunks and is ignored) and decompresses them.
func ParseXorb(data []byte) ([]ParsedChunk, error) {
	var out []ParsedChunk
	var total int
	for off := 0; off < len(data); {
		if bytes.HasPrefix(data[off:], xorbIdent) {
			break // the footer
		}
		if len(data)-off < chunkHeaderSize {
			return nil, fmt.Errorf("%w: chunk %d: truncated header at byte %d", ErrBadXorb, len(out), off)
		}
		h := data[off : off+chunkHeaderSize]
		clen := int(h[1]) | int(h[2])<<8 | int(h[3])<<16
		ulen := int(h[5]) | int(h[6])<<8 | int(h[7])<<16
		if h[0] != 0 || ulen > MaxChunkSize || clen > 2*MaxChunkSize || len(out) >= MaxXorbChunks {
			return nil, fmt.Errorf("%w: chunk %d at byte %d: version %d, %d bytes packed, %d unpacked", ErrBadXorb, len(out), off, h[0], clen, ulen)
		}
		body := data[off+chunkHeaderSize:]
		if len(body) < clen {
			return nil, fmt.Errorf("%w: chunk %d at byte %d: %d bytes, %d left", ErrBadXorb, len(out), off, clen, len(body))
		}
		raw, err := unpack(h[4], body[:clen], ulen)
		if err != nil {
			return nil, fmt.Errorf("%w: chunk %d at byte %d: %w", ErrBadXorb, len(out), off, err)
		}
		total += ulen
		if total > MaxXorbBytes {
			return nil, fmt.Errorf("%w: more than %d unpacked bytes", ErrBadXorb, MaxXorbBytes)
		}
		end := off + chunkHeaderSize + clen
		out = append(out, ParsedChunk{Hash: ChunkHash(raw), Data: raw, Start: off, End: end})
		off = end
	}
	return out, nil
}

// unpack decompresses one chunk body into ulen bytes.
func unpack(scheme byte, body []byte, ulen int) ([]byte, error) {
	var raw []byte
	switch scheme {
	case CompressionNone:
		raw = append([]byte(nil), body...)
	case CompressionLZ4, CompressionBG4:
		var err error
		raw, err = io.ReadAll(io.LimitReader(lz4.NewReader(bytes.NewReader(body)), int64(ulen)+1))
		if err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if scheme == CompressionBG4 && len(raw) == ulen {
			raw = ungroup4(raw)
		}
	default:
		return nil, fmt.Errorf("unknown compression scheme %d", scheme)
	}
	if len(raw) != ulen {
		return nil, fmt.Errorf("unpacks to %d bytes, header says %d", len(raw), ulen)
	}
	return raw, nil
}

// ungroup4 undoes byte grouping: the bytes at i%4 == k were stored as the
// k-th group (groups of len/4 bytes, the first len%4 one byte longer).
func ungroup4(g []byte) []byte {
	n := len(g)
	out := make([]byte, n)
	pos := 0
	for k := 0; k < 4; k++ {
		for i := k; i < n; i += 4 {
			out[i] = g[pos]
			pos++
		}
	}
	return out
}
