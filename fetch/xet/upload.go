package xet

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// maxShardBytes is the size at which a session uploads the shard it has
// collected so far (at a file boundary) and starts another.
const maxShardBytes = 32 << 20

// Session uploads files to a CAS: their chunks are packed into xorbs (one
// xorb may hold the end of one file and the start of the next, as in
// xet-core), each xorb is uploaded when full, and Commit uploads the last
// xorb and the shard that records the files. Only the open xorb (at most
// MaxXorbBytes unpacked) is held in memory, never a whole file. A file is
// in the CAS once Commit returns; registering it under a name is the
// caller's (the bucket batch API).
type Session struct {
	// XorbLimit caps a xorb's unpacked bytes below MaxXorbBytes (0: no
	// lower cap): smaller uploads, less memory.
	XorbLimit int

	cas    *CAS
	xorb   Xorb
	hashes []Hash       // the hashes of the xorbs uploaded, by generation
	shard  Shard        // files and xorbs not yet in an uploaded shard
	open   *openSegment // the current file's segment in the open xorb
}

// File is an uploaded file: its Xet hash and size.
type File struct {
	Hash Hash
	Size int64
}

type openSegment struct {
	start  uint32
	hashes []Hash
	bytes  uint32
}

// NewSession starts an upload session on cas.
func NewSession(cas *CAS) *Session { return &Session{cas: cas} }

// Upload chunks r into the session's xorbs (uploading full ones) and
// records the file for the next shard. name is for errors. The shard does
// not carry the file's SHA-256 (its optional metadata extension), as
// huggingface_hub's bucket uploads do not (SKIP_SHA256): the shards are
// the ones hf_xet writes for the same files.
func (s *Session) Upload(ctx context.Context, name string, r io.Reader) (File, error) {
	ch := NewChunker(r)
	fi := FileInfo{}
	var chunks []Chunk
	for {
		b, err := ch.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return File{}, fmt.Errorf("%s: reading: %w", name, err)
		}
		if !s.xorb.Fits(len(b)) || (s.XorbLimit > 0 && int(s.xorb.Bytes)+len(b) > s.XorbLimit) {
			s.closeSegment(&fi)
			if err := s.flushXorb(ctx); err != nil {
				return File{}, fmt.Errorf("%s: %w", name, err)
			}
		}
		if s.open == nil {
			s.open = &openSegment{start: uint32(len(s.xorb.Chunks))}
		}
		h, err := s.xorb.Add(b)
		if err != nil {
			return File{}, fmt.Errorf("%s: %w", name, err)
		}
		s.open.hashes = append(s.open.hashes, h)
		s.open.bytes += uint32(len(b))
		chunks = append(chunks, Chunk{Hash: h, Size: uint64(len(b))})
	}
	s.closeSegment(&fi)
	f := File{Hash: FileHash(chunks), Size: 0}
	for _, c := range chunks {
		f.Size += int64(c.Size)
	}
	fi.Hash = f.Hash
	if len(chunks) > 0 {
		s.shard.Files = append(s.shard.Files, fi)
	}
	if len(s.shard.Files) > 0 && s.shardSize() > maxShardBytes {
		if err := s.Commit(ctx); err != nil {
			return File{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return f, nil
}

// closeSegment ends the current file's segment in the open xorb (its xorb
// hash is filled in by Commit, from the xorb's generation).
func (s *Session) closeSegment(fi *FileInfo) {
	if s.open == nil {
		return
	}
	o := s.open
	s.open = nil
	fi.Segments = append(fi.Segments, Segment{Start: o.start, End: o.start + uint32(len(o.hashes)), Bytes: o.bytes,
		Verify: RangeHash(o.hashes), gen: len(s.hashes)})
}

// flushXorb uploads the open xorb and names it in the segments that use it.
func (s *Session) flushXorb(ctx context.Context) error {
	if len(s.xorb.Chunks) == 0 {
		return nil
	}
	h := s.xorb.Hash()
	if _, err := s.cas.UploadXorb(ctx, h, s.xorb.Data); err != nil {
		return err
	}
	// Bytes on disk 0, as hf_xet records its xorbs (XorbChunkSequenceHeader::new).
	s.shard.Xorbs = append(s.shard.Xorbs, XorbInfo{Hash: h, Chunks: append([]Chunk(nil), s.xorb.Chunks...)})
	s.hashes = append(s.hashes, h)
	s.xorb.Reset()
	return nil
}

// shardSize estimates the serialized shard.
func (s *Session) shardSize() int {
	n := 0
	for _, f := range s.shard.Files {
		n += 2 + 2*len(f.Segments)
	}
	for _, x := range s.shard.Xorbs {
		n += 1 + len(x.Chunks)
	}
	return n * entrySize
}

// Commit uploads the open xorb and the shard of the files uploaded since
// the last Commit. Every file Upload returned is in the CAS afterwards.
func (s *Session) Commit(ctx context.Context) error {
	if err := s.flushXorb(ctx); err != nil {
		return err
	}
	if len(s.shard.Files) == 0 && len(s.shard.Xorbs) == 0 {
		return nil
	}
	for i := range s.shard.Files {
		for j := range s.shard.Files[i].Segments {
			g := &s.shard.Files[i].Segments[j]
			g.Xorb = s.hashes[g.gen]
		}
	}
	if err := s.cas.UploadShard(ctx, s.shard.Bytes()); err != nil {
		return err
	}
	s.shard = Shard{}
	return nil
}
