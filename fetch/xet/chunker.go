package xet

import (
	"errors"
	"io"
)

// Chunker splits a stream into Xet's content-defined chunks: a gear hash
// (h = h<<1 + gearTable[b], reset at every boundary) over the bytes of a
// chunk, skipping its first MinChunkSize-65 bytes (they cannot reach a
// boundary: the hash sees the last 64 bytes), a boundary after the first
// byte where h&chunkMask == 0 once the chunk holds at least MinChunkSize
// bytes, and at MaxChunkSize at the latest. The last chunk is what remains.
// Only the bytes of the chunks not yet returned are buffered.
type Chunker struct {
	r          io.Reader
	buf        []byte
	start, end int
	eof        bool
}

// NewChunker chunks r.
func NewChunker(r io.Reader) *Chunker {
	return &Chunker{r: r, buf: make([]byte, 4*MaxChunkSize)}
}

// Next returns the next chunk, valid until the next call, or io.EOF after
// the last one. An empty stream has no chunks.
func (c *Chunker) Next() ([]byte, error) {
	if err := c.fill(); err != nil {
		return nil, err
	}
	if c.start == c.end {
		return nil, io.EOF
	}
	n := Boundary(c.buf[c.start:c.end])
	chunk := c.buf[c.start : c.start+n]
	c.start += n
	return chunk, nil
}

// fill makes at least MaxChunkSize bytes available, or all that is left.
func (c *Chunker) fill() error {
	for !c.eof && c.end-c.start < MaxChunkSize {
		if c.end == len(c.buf) {
			c.end = copy(c.buf, c.buf[c.start:c.end])
			c.start = 0
		}
		n, err := c.r.Read(c.buf[c.end:])
		c.end += n
		if errors.Is(err, io.EOF) {
			c.eof = true
		} else if err != nil {
			return err
		}
	}
	return nil
}

// Boundary returns the length of the chunk at the start of data, which
// must hold at least MaxChunkSize bytes unless the stream ends with it.
func Boundary(data []byte) int {
	n := min(len(data), MaxChunkSize)
	var h uint64
	for i := max(MinChunkSize-hashWindow-1, 0); i < n; i++ {
		h = h<<1 + gearTable[data[i]]
		if h&chunkMask == 0 && i+1 >= MinChunkSize {
			return i + 1
		}
	}
	return n
}

// HashReader chunks r and returns its chunks (hash and size), its Xet file
// hash and its size, without uploading anything.
func HashReader(r io.Reader) (Hash, []Chunk, int64, error) {
	c := NewChunker(r)
	var chunks []Chunk
	var size int64
	for {
		b, err := c.Next()
		if errors.Is(err, io.EOF) {
			return FileHash(chunks), chunks, size, nil
		}
		if err != nil {
			return Hash{}, nil, size, err
		}
		chunks = append(chunks, Chunk{Hash: ChunkHash(b), Size: uint64(len(b))})
		size += int64(len(b))
	}
}
