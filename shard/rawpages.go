package shard

import (
	"encoding/binary"
	"io"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// The page path (pages.go) takes its pages from a pageSource. arrow-go's
// page reader (arrowPages) handles every codec, encryption and old-writer
// quirk, but sets each column chunk up at a cost comparable to decoding a
// short chunk: a fresh buffer and a read per chunk, page headers decoded
// by the generic thrift library (allocating statistics and all), several
// objects per page. On the benchmark dataset (one ~700-frame row group
// per episode, 18 column chunks each) that was a sixth of the decode.
// rawPages reads the chunks of plain, unencrypted files itself: the chunk
// bytes into a pooled buffer with one read, page headers with a small
// thrift compact-protocol reader that keeps only the fields the page path
// uses, pages decompressed with arrow-go's codecs into pooled buffers.
// Anything it does not understand ends the chunk with failed(), and the
// page path's caller reads the chunk with arrow-go's column reader, whose
// errors are then the ones reported.

// pageKind is the type of a page.
type pageKind uint8

const (
	dictPage pageKind = iota + 1
	dataPageV1
	dataPageV2
)

// rawPage is one decompressed page. data holds the whole page body (for a
// v2 data page: the levels, then the values); it is only valid until the
// next call to next, except a dictionary page's, which stays valid until
// the source is closed.
type rawPage struct {
	kind           pageKind
	numValues      int32
	encoding       parquet.Encoding
	defEnc, repEnc parquet.Encoding // v1 data pages
	defLen, repLen int32            // v2 data pages: level byte lengths
	data           []byte
}

// pageSource yields the pages of one column chunk.
type pageSource interface {
	// next returns the next page, or nil at the end of the chunk or on an
	// error (failed then reports true).
	next() *rawPage
	failed() bool
	// close releases the source's buffers; no page may be used after.
	close()
}

// pageView is the page path's view of one file.
type pageView struct {
	rdr  *file.Reader // the file opened with pageAlloc, for arrowPages
	f    io.ReaderAt
	size int64
	// raw: rawPages may read the file's chunks (unencrypted, and not
	// written by a parquet-mr with the PARQUET-816 size bug).
	raw    bool
	counts *readCounts // may be nil
	// levels is the row group's level cache (see levelCache); close
	// returns it.
	levels *levelCache
}

// close releases the view's level cache; v must not be used after.
func (v *pageView) close() {
	if v != nil && v.levels != nil {
		v.levels.reset()
		levelCaches.Put(v.levels)
		v.levels = nil
	}
}

// open returns the pages of column c of row group rg, whose metadata is
// cc.
func (v *pageView) open(rg, c int, cc *metadata.ColumnChunkMetaData) (pageSource, error) {
	if v.raw && cc.CryptoMetadata() == nil {
		if s, ok := openRawPages(v.f, v.size, cc); ok {
			return s, nil
		}
	}
	pr, err := v.rdr.RowGroup(rg).GetColumnPageReader(c)
	if err != nil {
		return nil, err
	}
	return &arrowPages{pr: pr}, nil
}

// rawPages reads a column chunk's pages from a copy of its bytes.
type rawPages struct {
	chunk []byte // the chunk's bytes (from pageAlloc)
	rest  []byte // not yet read
	codec compress.Codec
	// Decompression buffers (from pageAlloc): the dictionary page's lives
	// as long as the source, the data pages share one.
	dictBuf, dataBuf []byte
	pg               rawPage
	bad              bool
}

// openRawPages reads the bytes of chunk cc from f (of size size). ok is
// false when the chunk's byte range or codec is not one rawPages reads.
func openRawPages(f io.ReaderAt, size int64, cc *metadata.ColumnChunkMetaData) (*rawPages, bool) {
	start, n := chunkRange(cc)
	if start < 0 || n <= 0 || n > size || start > size-n {
		return nil, false
	}
	var codec compress.Codec
	if cc.Compression() != compress.Codecs.Uncompressed {
		var err error
		if codec, err = compress.GetCodec(cc.Compression()); err != nil {
			return nil, false
		}
	}
	buf := pageAlloc.allocate(int(n), false)
	if k, _ := f.ReadAt(buf, start); k != len(buf) {
		pageAlloc.Free(buf)
		return nil, false
	}
	return &rawPages{chunk: buf, rest: buf, codec: codec}, true
}

func (r *rawPages) failed() bool { return r.bad }

func (r *rawPages) close() {
	for _, b := range [][]byte{r.chunk, r.dictBuf, r.dataBuf} {
		if b != nil {
			pageAlloc.Free(b)
		}
	}
	*r = rawPages{bad: r.bad}
}

// maxPageSize bounds a page's decompressed size, as arrow-go's reader
// does by default.
const maxPageSize = parquet.DefaultMaxUncompressedPageSize

func (r *rawPages) next() *rawPage {
	if r.bad || len(r.rest) == 0 {
		return nil
	}
	h, k, ok := parsePageHeader(r.rest)
	if !ok || h.compressed < 0 || int64(h.compressed) > int64(len(r.rest)-k) || h.uncompressed < 0 || int64(h.uncompressed) > maxPageSize {
		return r.fail()
	}
	body := r.rest[k : k+int(h.compressed)]
	r.rest = r.rest[k+int(h.compressed):]
	pg := &r.pg
	*pg = rawPage{kind: h.kind, numValues: h.numValues, encoding: h.encoding, defEnc: h.defEnc, repEnc: h.repEnc,
		defLen: h.defLen, repLen: h.repLen}
	if h.numValues < 0 {
		return r.fail()
	}
	switch h.kind {
	case dictPage:
		if r.dictBuf != nil {
			return r.fail() // a second dictionary page
		}
		data, ok := r.decompress(body, int(h.uncompressed), &r.dictBuf)
		if !ok {
			return r.fail()
		}
		pg.data = data
	case dataPageV1:
		data, ok := r.decompress(body, int(h.uncompressed), &r.dataBuf)
		if !ok {
			return r.fail()
		}
		pg.data = data
	case dataPageV2:
		if h.defLen < 0 || h.repLen < 0 {
			return r.fail()
		}
		lv := int(h.defLen) + int(h.repLen)
		if lv > len(body) || lv > int(h.uncompressed) {
			return r.fail()
		}
		if !h.isCompressed || r.codec == nil {
			if len(body) != int(h.uncompressed) {
				return r.fail()
			}
			pg.data = body
			break
		}
		r.dataBuf = reserve(r.dataBuf, int(h.uncompressed))
		copy(r.dataBuf, body[:lv])
		vals, err := compress.Decode(r.codec, r.dataBuf[lv:int(h.uncompressed)], body[lv:])
		if err != nil || len(vals) != int(h.uncompressed)-lv {
			return r.fail()
		}
		if len(vals) > 0 && &vals[0] != &r.dataBuf[lv] {
			copy(r.dataBuf[lv:], vals) // the codec did not decode in place
		}
		pg.data = r.dataBuf[:h.uncompressed]
	default:
		return r.fail() // index pages and unknown page types
	}
	return pg
}

func (r *rawPages) fail() *rawPage {
	r.bad = true
	return nil
}

// decompress returns body decompressed to n bytes, into *buf (grown from
// pageAlloc) unless the chunk is uncompressed.
func (r *rawPages) decompress(body []byte, n int, buf *[]byte) ([]byte, bool) {
	if r.codec == nil {
		return body, len(body) == n
	}
	*buf = reserve(*buf, n)
	out, err := compress.Decode(r.codec, (*buf)[:n], body)
	if err != nil || len(out) != n {
		return nil, false
	}
	if n > 0 && &out[0] != &(*buf)[0] {
		copy(*buf, out) // the codec did not decode in place
	}
	return (*buf)[:n], true
}

// reserve returns a pageAlloc buffer of length n, reusing b when it can.
func reserve(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	if b != nil {
		pageAlloc.Free(b)
	}
	return pageAlloc.allocate(n, false)
}

// arrowPages adapts arrow-go's page reader.
type arrowPages struct {
	pr file.PageReader
	pg rawPage
}

func (a *arrowPages) next() *rawPage {
	if !a.pr.Next() {
		return nil
	}
	pg := &a.pg
	switch p := a.pr.Page().(type) {
	case *file.DictionaryPage:
		*pg = rawPage{kind: dictPage, numValues: p.NumValues(), encoding: parquet.Encoding(p.Encoding()), data: p.Data()}
	case *file.DataPageV1:
		*pg = rawPage{kind: dataPageV1, numValues: p.NumValues(), encoding: parquet.Encoding(p.Encoding()),
			defEnc: p.DefinitionLevelEncoding(), repEnc: p.RepetitionLevelEncoding(), data: p.Data()}
	case *file.DataPageV2:
		*pg = rawPage{kind: dataPageV2, numValues: p.NumValues(), encoding: parquet.Encoding(p.Encoding()),
			defLen: p.DefinitionLevelByteLen(), repLen: p.RepetitionLevelByteLen(), data: p.Data()}
	default:
		*pg = rawPage{}
	}
	return pg
}

func (a *arrowPages) failed() bool { return a.pr.Err() != nil }
func (a *arrowPages) close()       { a.pr.Close() }

// pageHeader holds the fields of a parquet PageHeader that the page path
// uses.
type pageHeader struct {
	kind                     pageKind // 0: a page type the page path does not read
	uncompressed, compressed int32
	numValues                int32
	encoding                 parquet.Encoding
	defEnc, repEnc           parquet.Encoding
	defLen, repLen           int32
	isCompressed             bool
}

// parsePageHeader decodes a thrift compact-protocol PageHeader from the
// start of b and returns it with its length in bytes. Unknown fields are
// skipped; ok is false on malformed or truncated input, and when a
// required field is missing.
func parsePageHeader(b []byte) (h pageHeader, n int, ok bool) {
	t := thriftReader{b: b}
	h.isCompressed = true // DataPageHeaderV2.is_compressed defaults to true
	var typ int32 = -1
	var haveSizes uint8
	var sub pageKind // which sub-header was read
	t.structFields(func(id int16, ft byte) bool {
		switch {
		case id == 1 && ft == ctI32:
			typ = t.i32()
		case id == 2 && ft == ctI32:
			h.uncompressed = t.i32()
			haveSizes |= 1
		case id == 3 && ft == ctI32:
			h.compressed = t.i32()
			haveSizes |= 2
		case id == 5 && ft == ctStruct: // DataPageHeader
			sub = dataPageV1
			var enc, defEnc, repEnc int32
			if t.fields(fieldSink{1: {i32: &h.numValues}, 2: {i32: &enc}, 3: {i32: &defEnc}, 4: {i32: &repEnc}})&0b11110 != 0b11110 {
				t.err = true
			}
			h.encoding, h.defEnc, h.repEnc = parquet.Encoding(enc), parquet.Encoding(defEnc), parquet.Encoding(repEnc)
		case id == 7 && ft == ctStruct: // DictionaryPageHeader
			sub = dictPage
			var enc int32
			if t.fields(fieldSink{1: {i32: &h.numValues}, 2: {i32: &enc}})&0b110 != 0b110 {
				t.err = true
			}
			h.encoding = parquet.Encoding(enc)
		case id == 8 && ft == ctStruct: // DataPageHeaderV2
			sub = dataPageV2
			var enc int32
			seen := t.fields(fieldSink{1: {i32: &h.numValues}, 4: {i32: &enc}, 5: {i32: &h.defLen}, 6: {i32: &h.repLen},
				7: {flag: &h.isCompressed}})
			if seen&0b1110010 != 0b1110010 {
				t.err = true
			}
			h.encoding = parquet.Encoding(enc)
		default:
			t.skip(ft, 0)
		}
		return true
	})
	if t.err || haveSizes != 3 {
		return pageHeader{}, 0, false
	}
	// The page type must name the sub-header that was read.
	switch {
	case typ == 0 && sub == dataPageV1, typ == 2 && sub == dictPage, typ == 3 && sub == dataPageV2:
		h.kind = sub
	case typ < 0:
		return pageHeader{}, 0, false
	default:
		h.kind = 0
	}
	return h, t.off, true
}

// Thrift compact-protocol field types.
const (
	ctStop   = 0
	ctTrue   = 1
	ctFalse  = 2
	ctByte   = 3
	ctI16    = 4
	ctI32    = 5
	ctI64    = 6
	ctDouble = 7
	ctBinary = 8
	ctList   = 9
	ctSet    = 10
	ctMap    = 11
	ctStruct = 12
)

// maxThriftDepth bounds the nesting skip follows (page headers nest two
// levels; statistics one more).
const maxThriftDepth = 16

// thriftReader reads thrift compact-protocol values from b; a malformed
// or truncated value sets err, after which every read returns zero.
type thriftReader struct {
	b   []byte
	off int
	err bool
}

func (t *thriftReader) byte1() byte {
	if t.err || t.off >= len(t.b) {
		t.err = true
		return 0
	}
	c := t.b[t.off]
	t.off++
	return c
}

func (t *thriftReader) uvarint() uint64 {
	if t.err {
		return 0
	}
	v, k := binary.Uvarint(t.b[t.off:])
	if k <= 0 {
		t.err = true
		return 0
	}
	t.off += k
	return v
}

func (t *thriftReader) varint() int64 {
	u := t.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (t *thriftReader) i32() int32 {
	v := t.varint()
	if v != int64(int32(v)) {
		t.err = true
		return 0
	}
	return int32(v)
}

// structFields calls f for each field of a struct (id and type), until
// the struct's stop byte; f reads or skips the field's value.
func (t *thriftReader) structFields(f func(id int16, ft byte) bool) {
	var id int16
	for !t.err {
		c := t.byte1()
		if t.err || c == ctStop {
			return
		}
		ft := c & 0x0f
		if d := int16(c >> 4); d != 0 {
			id += d
		} else {
			v := t.varint()
			if v != int64(int16(v)) {
				t.err = true
				return
			}
			id = int16(v)
		}
		if !f(id, ft) {
			return
		}
	}
}

// fieldSink says where a struct's fields go, by field id: an i32 field
// to i32, a bool field to flag; other ids, and fields of other types, are
// skipped.
type fieldSink [8]struct {
	i32  *int32
	flag *bool
}

// fields reads a struct into sink and returns the set of field ids it
// stored (bit id).
func (t *thriftReader) fields(sink fieldSink) (seen uint32) {
	t.structFields(func(id int16, ft byte) bool {
		if id <= 0 || int(id) >= len(sink) {
			t.skip(ft, 0)
			return true
		}
		switch f := sink[id]; {
		case f.i32 != nil && ft == ctI32:
			*f.i32 = t.i32()
		case f.flag != nil && (ft == ctTrue || ft == ctFalse):
			*f.flag = ft == ctTrue
		default:
			t.skip(ft, 0)
			return true
		}
		seen |= 1 << id
		return true
	})
	return seen
}

// skip skips a value of type ft.
func (t *thriftReader) skip(ft byte, depth int) {
	if depth > maxThriftDepth {
		t.err = true
		return
	}
	switch ft {
	case ctTrue, ctFalse: // a struct field's bool is in its type
	case ctByte:
		t.byte1()
	case ctI16, ctI32, ctI64:
		t.uvarint()
	case ctDouble:
		t.bytes(8)
	case ctBinary:
		t.bytes(t.uvarint())
	case ctList, ctSet:
		c := t.byte1()
		n := uint64(c >> 4)
		if n == 15 {
			n = t.uvarint()
		}
		et := c & 0x0f
		for i := uint64(0); i < n && !t.err; i++ {
			if et == ctTrue || et == ctFalse {
				t.byte1() // list elements of type bool are one byte each
				continue
			}
			t.skip(et, depth+1)
		}
	case ctMap:
		n := t.uvarint()
		if n == 0 {
			return
		}
		c := t.byte1()
		kt, vt := c>>4, c&0x0f
		for i := uint64(0); i < n && !t.err; i++ {
			for _, et := range []byte{kt, vt} {
				if et == ctTrue || et == ctFalse {
					t.byte1()
				} else {
					t.skip(et, depth+1)
				}
			}
		}
	case ctStruct:
		t.structFields(func(_ int16, ft byte) bool {
			t.skip(ft, depth+1)
			return !t.err
		})
	default:
		t.err = true
	}
}

// bytes skips n bytes.
func (t *thriftReader) bytes(n uint64) {
	if t.err || n > uint64(len(t.b)-t.off) {
		t.err = true
		return
	}
	t.off += int(n)
}
