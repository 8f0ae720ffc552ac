package xet

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestShardRoundTrip: a shard serializes to the upload form and parses
// back to the same content; damaged shards fail with ErrBadShard.
func TestShardRoundTrip(t *testing.T) {
	h := func(b byte) Hash { return ChunkHash([]byte{b}) }
	sha := [32]byte{1, 2, 3}
	s := &Shard{
		Files: []FileInfo{
			{Hash: h(1), Segments: []Segment{{Xorb: h(10), Start: 0, End: 2, Bytes: 300, Verify: h(20)}}, SHA256: &sha},
			{Hash: h(2), Segments: []Segment{{Xorb: h(10), Start: 2, End: 3, Bytes: 5, Verify: h(21)}, {Xorb: h(11), Start: 0, End: 1, Bytes: 7, Verify: h(22)}}},
		},
		Xorbs: []XorbInfo{
			{Hash: h(10), Chunks: []Chunk{{h(30), 100}, {h(31), 200}, {h(32), 5}}, BytesOnDisk: 329},
			{Hash: h(11), Chunks: []Chunk{{h(33), 7}}, BytesOnDisk: 15},
		},
	}
	data := s.Bytes()
	// header + 2 files (1+1+1+1, 1+2+2) + bookend + 2 xorbs (1+3, 1+1) + bookend
	if want := shardHeaderSize + (4+5+1+4+2+1)*entrySize; len(data) != want {
		t.Fatalf("%d bytes, want %d", len(data), want)
	}
	got, err := ParseShard(data)
	if err != nil {
		t.Fatal(err)
	}
	byHash := func(fs []FileInfo) map[Hash]FileInfo {
		m := map[Hash]FileInfo{}
		for _, f := range fs {
			m[f.Hash] = f
		}
		return m
	}
	if !reflect.DeepEqual(byHash(got.Files), byHash(s.Files)) || len(got.Xorbs) != 2 {
		t.Fatalf("parsed %+v, want %+v", got, s)
	}
	for _, c := range []struct {
		name string
		bad  func([]byte) []byte
	}{
		{"wrong tag", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"wrong version", func(b []byte) []byte { b[32] = 3; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-10] }},
		{"no bookend", func(b []byte) []byte { return b[:shardHeaderSize+entrySize*4] }},
		{"segment count past the end", func(b []byte) []byte { b[shardHeaderSize+36] = 0xff; return b }},
		{"unknown file flag", func(b []byte) []byte { b[shardHeaderSize+32] = 1; return b }},
		{"empty", func([]byte) []byte { return nil }},
	} {
		if _, err := ParseShard(c.bad(bytes.Clone(data))); !errors.Is(err, ErrBadShard) {
			t.Errorf("%s: %v, want ErrBadShard", c.name, err)
		}
	}
}

// TestXorbRoundTrip: chunks added to a xorb (compressible ones LZ4-packed)
// parse back to the same bytes and hashes; damaged xorbs fail.
func TestXorbRoundTrip(t *testing.T) {
	chunks := [][]byte{[]byte("tiny"), bytes.Repeat([]byte("abcd"), 10000), make([]byte, MaxChunkSize)}
	var x Xorb
	for _, c := range chunks {
		if _, err := x.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	if len(x.Data) >= int(x.Bytes) {
		t.Fatalf("nothing was compressed: %d bytes for %d", len(x.Data), x.Bytes)
	}
	got, err := ParseXorb(x.Data)
	if err != nil || len(got) != len(chunks) {
		t.Fatalf("%d chunks, %v", len(got), err)
	}
	for i, c := range got {
		if !bytes.Equal(c.Data, chunks[i]) || c.Hash != x.Chunks[i].Hash {
			t.Fatalf("chunk %d differs", i)
		}
	}
	for _, c := range []struct {
		name string
		bad  func([]byte) []byte
	}{
		{"truncated header", func(b []byte) []byte { return append(b, 0, 1) }},
		{"truncated body", func(b []byte) []byte { return b[:len(b)-1] }},
		{"version", func(b []byte) []byte { b[0] = 1; return b }},
		{"scheme", func(b []byte) []byte { b[4] = 9; return b }},
		{"length", func(b []byte) []byte { b[5]++; return b }},
		{"lz4 damaged", func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }},
	} {
		if _, err := ParseXorb(c.bad(bytes.Clone(x.Data))); !errors.Is(err, ErrBadXorb) {
			t.Errorf("%s: %v, want ErrBadXorb", c.name, err)
		}
	}
	if got := ungroup4([]byte{0, 4, 8, 1, 5, 2, 6, 3, 7}); !bytes.Equal(got, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("ungroup4: %v", got)
	}
}

// FuzzParseShard: any input parses or fails with ErrBadShard; what parses
// serializes back to something that parses to the same files.
func FuzzParseShard(f *testing.F) {
	s := &Shard{Files: []FileInfo{{Hash: ChunkHash([]byte("f")), Segments: []Segment{{Xorb: ChunkHash([]byte("x")), End: 1, Bytes: 1}}}},
		Xorbs: []XorbInfo{{Hash: ChunkHash([]byte("x")), Chunks: []Chunk{{ChunkHash([]byte("c")), 1}}}}}
	f.Add(s.Bytes())
	f.Add((&Shard{}).Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseShard(data)
		if err != nil {
			if !errors.Is(err, ErrBadShard) {
				t.Fatalf("error without ErrBadShard: %v", err)
			}
			return
		}
		again, err := ParseShard(got.Bytes())
		if err != nil || len(again.Files) != len(got.Files) || len(again.Xorbs) != len(got.Xorbs) {
			t.Fatalf("re-serialized shard: %v", err)
		}
	})
}

// FuzzParseXorb: any input parses or fails with ErrBadXorb, never panics
// or unpacks past the limits.
func FuzzParseXorb(f *testing.F) {
	var x Xorb
	x.Add([]byte("hello"))
	x.Add(bytes.Repeat([]byte("z"), 5000))
	f.Add(x.Data)
	f.Add([]byte("XETBLOB"))
	f.Fuzz(func(t *testing.T, data []byte) {
		chunks, err := ParseXorb(data)
		if err != nil {
			if !errors.Is(err, ErrBadXorb) {
				t.Fatalf("error without ErrBadXorb: %v", err)
			}
			return
		}
		for _, c := range chunks {
			if len(c.Data) > MaxChunkSize || c.End > len(data) {
				t.Fatalf("chunk of %d bytes ending at %d", len(c.Data), c.End)
			}
		}
	})
}

// FuzzParseHash: a hash parses from exactly 64 hex digits and prints back
// as the same text (lower case).
func FuzzParseHash(f *testing.F) {
	f.Add("07060504030201000f0e0d0c0b0a090817161514131211101f1e1d1c1b1a1918")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHash(s)
		if err != nil {
			return
		}
		if got := h.String(); !strings.EqualFold(got, s) {
			t.Fatalf("%q -> %q", s, got)
		}
	})
}
