package render

import (
	"encoding/binary"
	"math/bits"
)

//go:generate go run ./internal/blake2bgen

// BLAKE2b's initialisation vector (RFC 7693, section 2.6).
const (
	iv0 = 0x6a09e667f3bcc908
	iv1 = 0xbb67ae8584caa73b
	iv2 = 0x3c6ef372fe94f82b
	iv3 = 0xa54ff53a5f1d36f1
	iv4 = 0x510e527fade682d1
	iv5 = 0x9b05688c2b3e6c1f
	iv6 = 0x1f83d9abfb41bd6b
	iv7 = 0x5be0cd19137e2179
)

// blake2bIV holds the initialisation vector for blake2bShort; it is never
// written.
var blake2bIV = [8]uint64{iv0, iv1, iv2, iv3, iv4, iv5, iv6, iv7}

// maxShortDigest is the longest message digestShort hashes.
const maxShortDigest = 32

// digestShort returns the 8-byte unkeyed BLAKE2b digest of msg, read as a
// big-endian integer, for len(msg) <= maxShortDigest: the selection
// digests of prefix + decimal sample index. It equals the digest of
// golang.org/x/crypto/blake2b (tests check every length), in about two
// thirds of its time on such messages (see blake2b_short.go).
func digestShort(msg []byte) uint64 {
	var blk [maxShortDigest]byte
	copy(blk[:], msg)
	h := blake2bShort(binary.LittleEndian.Uint64(blk[0:]), binary.LittleEndian.Uint64(blk[8:]),
		binary.LittleEndian.Uint64(blk[16:]), binary.LittleEndian.Uint64(blk[24:]), uint64(len(msg)))
	return bits.ReverseBytes64(h) // the digest bytes are h's little-endian bytes
}
