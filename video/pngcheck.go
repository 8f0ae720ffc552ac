package video

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// pngSignature starts every PNG file.
const pngSignature = "\x89PNG\r\n\x1a\n"

// CheckPNG checks a PNG file's chunk structure without decoding its
// pixels: the signature, IHDR first, every chunk whole with a correct
// CRC-32, at least one IDAT, and IEND (bytes after IEND are ignored, as
// decoders do). It is the cheap check lrstream validate runs on every
// PNG of an image feature: a truncated file, or one with flipped bytes,
// fails it as it fails Go's and PIL's decoders (both verify the CRCs).
// It reads only the chunk headers and runs the CRC over the data
// (gigabytes per second). Data it does not recognise is not an error
// unless the structure is broken.
func CheckPNG(b []byte) error {
	if !bytes.HasPrefix(b, []byte(pngSignature)) {
		return errors.New("not a PNG file (no PNG signature)")
	}
	off := len(pngSignature)
	idat := false
	for n := 0; ; n++ {
		if len(b)-off < 12 {
			return fmt.Errorf("PNG truncated at byte %d (in the chunk header after %d chunks; no IEND)", len(b), n)
		}
		size := binary.BigEndian.Uint32(b[off:])
		typ := string(b[off+4 : off+8])
		if size > 1<<31-1 || int64(size) > int64(len(b)-off-12) {
			return fmt.Errorf("PNG truncated: chunk %q at byte %d declares %d bytes, %d remain", typ, off, size, max(0, len(b)-off-12))
		}
		data := b[off+8 : off+8+int(size)]
		crc := binary.BigEndian.Uint32(b[off+8+int(size):])
		h := crc32.NewIEEE()
		h.Write(b[off+4 : off+8])
		h.Write(data)
		if h.Sum32() != crc {
			return fmt.Errorf("PNG chunk %q at byte %d: CRC mismatch (damaged bytes)", typ, off)
		}
		switch {
		case n == 0 && typ != "IHDR":
			return fmt.Errorf("PNG's first chunk is %q, want IHDR", typ)
		case typ == "IDAT":
			idat = true
		case typ == "IEND":
			if !idat {
				return errors.New("PNG has no IDAT chunk (no pixel data)")
			}
			return nil
		}
		off += 12 + int(size)
	}
}
