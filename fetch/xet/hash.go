// Package xet is a client of the Xet storage protocol, the content-addressed
// store behind Hugging Face Storage Buckets (and Xet-backed Hub repos): the
// content-defined chunker, the chunk, xorb, file and verification hashes,
// the xorb and MDB shard formats, and an uploader that streams files into
// xorbs and registers them with a shard on a CAS server.
//
// The formats follow the Xet protocol specification (huggingface.co/docs/xet)
// and xet-core (github.com/huggingface/xet-core), whose hf_xet package is
// the reference client: the Go hashes are checked against hf_xet.hash_files
// (TestHashOracle). docs/storage.md ("Writing to a Storage Bucket") describes
// the upload.
package xet

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"

	"lukechampine.com/blake3"
)

// Hash is a Xet hash: 32 bytes as BLAKE3 gives them (the byte order of the
// wire formats). Its text form (String) is xet-core's: the four
// little-endian 64-bit words, each printed as 16 hex digits.
type Hash [32]byte

// String is the hash as the Hub and the CAS API print it.
func (h Hash) String() string {
	var b [32]byte
	for w := 0; w < 4; w++ {
		for i := 0; i < 8; i++ {
			b[w*8+i] = h[w*8+7-i]
		}
	}
	return hex.EncodeToString(b[:])
}

// ParseHash parses the text form of a hash (64 hex digits).
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 64 {
		return h, fmt.Errorf("xet hash %q: want 64 hex digits", s)
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return h, fmt.Errorf("xet hash %q: %w", s, err)
	}
	for w := 0; w < 4; w++ {
		for i := 0; i < 8; i++ {
			h[w*8+i] = b[w*8+7-i]
		}
	}
	return h, nil
}

// word3 is the hash's last 64-bit word (xet-core's `hash % n` uses it).
func (h Hash) word3() uint64 { return binary.LittleEndian.Uint64(h[24:]) }

func keyed(key *[32]byte, data []byte) Hash {
	hs := blake3.New(32, key[:])
	hs.Write(data)
	var h Hash
	hs.Sum(h[:0])
	return h
}

// ChunkHash is the hash of one chunk's bytes.
func ChunkHash(data []byte) Hash { return keyed(&dataKey, data) }

// Chunk is a chunk's hash and length, the leaves of xorb and file hashes.
type Chunk struct {
	Hash Hash
	Size uint64
}

// mergeCut is the number of leading nodes merged into one parent: the first
// node from the third on whose hash is 0 mod mergeBranching ends the group,
// else the group is 2*mergeBranching+1 nodes (or what is left).
func mergeCut(nodes []Chunk) int {
	if len(nodes) <= 2 {
		return len(nodes)
	}
	end := min(2*mergeBranching+1, len(nodes))
	for i := 2; i < end; i++ {
		if nodes[i].Hash.word3()%mergeBranching == 0 {
			return i + 1
		}
	}
	return end
}

// mergeNodes is the parent of nodes: the internal-node hash of the lines
// "HASH : SIZE\n" of its children, and their total size.
func mergeNodes(nodes []Chunk) Chunk {
	buf := make([]byte, 0, len(nodes)*88)
	var total uint64
	for _, n := range nodes {
		buf = append(buf, n.Hash.String()...)
		buf = append(buf, " : "...)
		buf = strconv.AppendUint(buf, n.Size, 10)
		buf = append(buf, '\n')
		total += n.Size
	}
	return Chunk{Hash: keyed(&internalNodeKey, buf), Size: total}
}

// aggregate is the root of xet-core's aggregated hash tree over leaves (the
// zero hash for none).
func aggregate(leaves []Chunk) Hash {
	if len(leaves) == 0 {
		return Hash{}
	}
	level := append([]Chunk(nil), leaves...)
	for len(level) > 1 {
		next := level[:0]
		for i := 0; i < len(level); {
			n := mergeCut(level[i:])
			next = append(next, mergeNodes(level[i:i+n]))
			i += n
		}
		level = next
	}
	return level[0].Hash
}

// XorbHash is the hash that names a xorb holding chunks, in order.
func XorbHash(chunks []Chunk) Hash { return aggregate(chunks) }

// FileHash is the Xet hash of a file made of chunks: the tree's root hashed
// again with an all-zero key (xet-core's file_hash with no salt); the zero
// hash for an empty file.
func FileHash(chunks []Chunk) Hash {
	if len(chunks) == 0 {
		return Hash{}
	}
	root := aggregate(chunks)
	var zero [32]byte
	return keyed(&zero, root[:])
}

// RangeHash is a shard verification entry's hash of a run of chunk hashes.
func RangeHash(hashes []Hash) Hash {
	buf := make([]byte, 0, 32*len(hashes))
	for _, h := range hashes {
		buf = append(buf, h[:]...)
	}
	return keyed(&verificationKey, buf)
}
