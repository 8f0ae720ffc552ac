package framecache

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// codecs compresses and decompresses record payloads. Readers decode whatever kind each
// record says, whatever codec the Cache writes with; the zstd coders are made on first use.
type codecs struct {
	encOnce sync.Once
	enc     *zstd.Encoder
	encErr  error
	decOnce sync.Once
	dec     *zstd.Decoder
	decErr  error
}

var kindNames = [...]string{kindRaw: "none", kindS2: "s2", kindZstd: "zstd"}

// codecKind is the record kind of a codec name; auto when the name is "auto" or "" (the
// kind is then s2 until autoKind decides).
func codecKind(name string) (kind byte, auto bool, err error) {
	switch name {
	case "", "auto":
		return kindS2, true, nil
	case "s2":
		return kindS2, false, nil
	case "zstd":
		return kindZstd, false, nil
	case "none":
		return kindRaw, false, nil
	}
	return 0, false, fmt.Errorf("framecache: unknown codec %q (want auto, s2, zstd or none)", name)
}

// autoKind is Codec "auto"'s choice (see Options.RawEstimate); mem 0 means unknown RAM.
func autoKind(estimate, budget, mem int64) byte {
	if estimate > 0 && estimate <= budget/10*9 && (mem == 0 || estimate <= mem/2) {
		return kindRaw
	}
	return kindS2
}

func (c *codecs) zstdEncoder() (*zstd.Encoder, error) {
	c.encOnce.Do(func() {
		c.enc, c.encErr = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderCRC(false), // records carry their own CRC-32C
			zstd.WithZeroFrames(true))
	})
	return c.enc, c.encErr
}

func (c *codecs) zstdDecoder() (*zstd.Decoder, error) {
	c.decOnce.Do(func() {
		c.dec, c.decErr = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderMaxMemory(maxRecord),
			zstd.WithDecodeAllCapLimit(true), // a record never decodes past its raw length
			zstd.IgnoreChecksum(true))
	})
	return c.dec, c.decErr
}

// compress returns a record's header space (recHeader bytes, to fill) followed by its
// stored payload, built in dst, and the kind actually used. For a raw record (kind none,
// or compressing did not make the payload smaller) buf is the header space alone and the
// stored payload is raw itself, written from the caller's slice without a copy.
func (c *codecs) compress(dst, raw []byte, kind byte) (buf, rest []byte, used byte, err error) {
	switch kind {
	case kindS2:
		dst = growBuf(dst, recHeader+s2.MaxEncodedLen(len(raw)))
		enc := s2.Encode(dst[recHeader:], raw)
		if len(enc) < len(raw) {
			return dst[:recHeader+len(enc)], nil, kindS2, nil
		}
	case kindZstd:
		enc, err := c.zstdEncoder()
		if err != nil {
			return dst, nil, 0, fmt.Errorf("zstd encoder: %w", err)
		}
		out := enc.EncodeAll(raw, growBuf(dst, recHeader)[:recHeader])
		if len(out)-recHeader < len(raw) {
			return out, nil, kindZstd, nil
		}
		dst = out
	}
	return growBuf(dst, recHeader), raw, kindRaw, nil
}

// decompress returns the raw payload of a stored one of the given kind and raw length,
// decoded into dst (grown when short) or, for raw records, stored itself.
func (c *codecs) decompress(dst, stored []byte, kind byte, rawLen int) (out, buf []byte, err error) {
	switch kind {
	case kindRaw:
		if len(stored) != rawLen {
			return nil, dst, fmt.Errorf("%w: raw record of %d bytes, header says %d", ErrCorrupt, len(stored), rawLen)
		}
		return stored, dst, nil
	case kindS2:
		n, err := s2.DecodedLen(stored)
		if err != nil || n != rawLen {
			return nil, dst, fmt.Errorf("%w: s2 block of %d bytes, header says %d (%v)", ErrCorrupt, n, rawLen, err)
		}
		dst = growBuf(dst, rawLen)
		out, err := s2.Decode(dst, stored)
		if err != nil {
			return nil, dst, fmt.Errorf("%w: s2: %v", ErrCorrupt, err)
		}
		return out, dst, nil
	case kindZstd:
		dec, err := c.zstdDecoder()
		if err != nil {
			return nil, dst, fmt.Errorf("zstd decoder: %w", err)
		}
		dst = growBuf(dst, rawLen)
		out, err := dec.DecodeAll(stored, dst[:0])
		if err != nil {
			return nil, dst, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
		}
		if len(out) != rawLen {
			return nil, dst, fmt.Errorf("%w: zstd frame of %d bytes, header says %d", ErrCorrupt, len(out), rawLen)
		}
		if cap(out) > cap(dst) {
			dst = out // keep the larger buffer for the next record
		}
		return out, dst, nil
	}
	return nil, dst, fmt.Errorf("%w: unknown record kind %d", ErrCorrupt, kind)
}
