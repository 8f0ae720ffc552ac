package shard

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// The page path decodes a dictionary-encoded byte-array leaf of a language
// column straight from its pages: the repetition and definition levels into
// the leaf's reusable int16 buffers and the values as dictionary indices
// (int32) into the chunk's dictionary, which is decoded once. arrow-go's
// column reader does the same work through a generic bit reader, one value
// at a time, and materialises a []byte slice header per value (a pointer
// write per value, cleared again on release); on the benchmark dataset the
// levels and values of the persistent list, repeated on every frame, were a
// third of the decode's CPU.
//
// The page path only accepts well-formed input it fully understands (a
// PLAIN dictionary page followed by RLE_DICTIONARY / PLAIN_DICTIONARY data
// pages of format v1 with RLE levels, or v2); on anything else, including
// every kind of corruption it detects, it reports !ok and the caller reads
// the chunk again with arrow-go's column reader, so errors and results on
// unusual or corrupt files are exactly those of that reader. On the input it
// accepts it produces the same levels and values. Numeric leaves (core
// columns, list features, language timestamps) take the same path from
// PLAIN or dictionary pages (readNumPages). The pages come from a
// pageSource (rawpages.go); equal level encodings within a row group are
// decoded once (levelCache).

// readDictPages reads n levels of leaf l (maximum levels maxRep, l.maxDef)
// from the pages of ps into l.def, l.rep, l.dict and l.idx, the levels
// through lc (which may be nil). It reports false when the chunk is not of
// the handled shape or is inconsistent; l's level and value buffers are
// then in an unspecified state.
func (l *fastLeaf) readDictPages(ps pageSource, n int64, maxRep int16, lc *levelCache) bool {
	maxDef := l.maxDef
	if maxRep <= 0 || maxDef <= 0 || int64(len(l.def)) != n || int64(len(l.rep)) != n {
		return false
	}
	repW, defW := bits.Len16(uint16(maxRep)), bits.Len16(uint16(maxDef))
	l.dict = l.dict[:0]
	l.sptr = l.sptr[:0] // a new dictionary: forget the interned strings
	l.idx = resize(l.idx, int(n))
	haveDict := false
	var total, nv int64
	for total < n {
		pg := ps.next()
		if pg == nil {
			break
		}
		if pg.kind == dictPage {
			if haveDict || total > 0 || !l.readDict(pg) {
				return false
			}
			haveDict = true
			continue
		}
		repB, defB, valB, ok := pageRegions(pg, maxRep, maxDef)
		if !ok {
			return false
		}
		if !haveDict {
			return false
		}
		switch pg.encoding {
		case parquet.Encodings.RLEDict, parquet.Encodings.PlainDict:
		default:
			return false
		}
		cnt := int64(pg.numValues)
		if cnt <= 0 || cnt > n-total {
			return false
		}
		def, rep := l.def[total:total+cnt], l.rep[total:total+cnt]
		if !lc.decode(repB, repW, rep, uint64(maxRep), total) || !lc.decode(defB, defW, def, uint64(maxDef), total) {
			return false
		}
		vals := countLevel(def, maxDef)
		if vals > 0 {
			if len(valB) < 1 || len(l.dict) == 0 {
				return false
			}
			if !decodeHybrid(valB[1:], int(valB[0]), l.idx[nv:nv+vals], uint64(len(l.dict)-1)) {
				return false
			}
		}
		total += cnt
		nv += vals
	}
	if ps.failed() || total != n {
		return false
	}
	l.idx = l.idx[:nv]
	l.byIdx = true
	return true
}

// readDict decodes a PLAIN dictionary page of byte arrays into l.dict; the
// entries alias a copy of the page (l.arena), as the page reader's buffers
// go back to pageAlloc when the chunk is read.
func (l *fastLeaf) readDict(p *rawPage) bool {
	switch p.encoding {
	case parquet.Encodings.Plain, parquet.Encodings.PlainDict:
	default:
		return false
	}
	l.arena = append(l.arena[:0], p.data...)
	data := l.arena
	cnt := int(p.numValues)
	if cnt < 0 || cnt > len(data)/4 {
		return false
	}
	for range cnt {
		if len(data) < 4 {
			return false
		}
		k := binary.LittleEndian.Uint32(data)
		if uint64(k) > uint64(len(data)-4) {
			return false
		}
		l.dict = append(l.dict, parquet.ByteArray(data[4:4+k:4+k]))
		data = data[4+k:]
	}
	return true
}

// pageRegions splits a data page into its repetition level, definition
// level and value regions (a level region is empty when its maximum level
// is 0). ok is false for other pages, v1 pages whose levels are not RLE, and
// inconsistent lengths.
func pageRegions(pg *rawPage, maxRep, maxDef int16) (repB, defB, valB []byte, ok bool) {
	switch pg.kind {
	case dataPageV1:
		data := pg.data
		if maxRep > 0 {
			if pg.repEnc != parquet.Encodings.RLE {
				return nil, nil, nil, false
			}
			if repB, data, ok = lengthPrefixed(data); !ok {
				return nil, nil, nil, false
			}
		}
		if maxDef > 0 {
			if pg.defEnc != parquet.Encodings.RLE {
				return nil, nil, nil, false
			}
			if defB, data, ok = lengthPrefixed(data); !ok {
				return nil, nil, nil, false
			}
		}
		return repB, defB, data, true
	case dataPageV2:
		data := pg.data
		r, d := int64(pg.repLen), int64(pg.defLen)
		if r < 0 || d < 0 || r+d > int64(len(data)) || (maxRep == 0 && r != 0) || (maxDef == 0 && d != 0) {
			return nil, nil, nil, false
		}
		return data[:r], data[r : r+d], data[r+d:], true
	}
	return nil, nil, nil, false
}

// lengthPrefixed splits a v1 page's RLE level region (a 4-byte
// little-endian length, then the encoded levels) off b.
func lengthPrefixed(b []byte) (region, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	k := binary.LittleEndian.Uint32(b)
	if uint64(k) > uint64(len(b)-4) {
		return nil, nil, false
	}
	return b[4 : 4+k], b[4+k:], true
}

// decodeHybrid decodes len(dst) values of the parquet RLE / bit-packing
// hybrid encoding with bit width bw from src. It reports false when src is
// too short, a run is empty, or a value exceeds limit. Padding at the end of
// the last bit-packed run and trailing bytes are ignored, as by arrow-go.
func decodeHybrid[T int16 | int32](src []byte, bw int, dst []T, limit uint64) bool {
	if bw < 0 || bw > 32 {
		return false
	}
	byteW := (bw + 7) / 8
	mask := uint64(1)<<bw - 1
	i := 0
	for i < len(dst) {
		h, k := binary.Uvarint(src)
		if k <= 0 {
			return false
		}
		src = src[k:]
		if h&1 == 0 { // RLE run: count, then the value in byteW bytes
			cnt := h >> 1
			if cnt == 0 || len(src) < byteW {
				return false
			}
			var v uint64
			for b := 0; b < byteW; b++ {
				v |= uint64(src[b]) << (8 * b)
			}
			src = src[byteW:]
			if v > limit {
				return false
			}
			m := len(dst) - i
			if cnt < uint64(m) {
				m = int(cnt)
			}
			fill(dst[i:i+m], T(v))
			i += m
			continue
		}
		// Bit-packed run: groups of 8 values, bw bytes per group.
		groups := h >> 1
		if groups == 0 || (bw > 0 && groups > uint64(len(src)/bw)) {
			return false
		}
		nbytes := int(groups) * bw
		m := len(dst) - i
		if groups < uint64(m+7)/8 { // (groups*8 may overflow when bw is 0)
			m = int(groups) * 8
		}
		data, ahead := src[:nbytes], src // ahead: the run and what follows it
		src = src[nbytes:]
		out := dst[i : i+m]
		p, j := 0, 0
		if bw <= 8 {
			// Whole groups of 8 values: one 8-byte load for the group's bw
			// bytes (bytes past them are masked off, and may be the next
			// run's); the values are checked against limit once for the run.
			check, hi := limit < mask, T(0)
			for ; j+8 <= len(out); j += 8 {
				var g uint64
				if len(ahead)-p >= 8 {
					g = binary.LittleEndian.Uint64(ahead[p:])
				} else {
					for b := 0; b < bw; b++ {
						g |= uint64(data[p+b]) << (8 * b)
					}
				}
				p += bw
				o := out[j : j+8 : j+8]
				o[0], o[1] = T(g&mask), T(g>>bw&mask)
				o[2], o[3] = T(g>>(2*bw)&mask), T(g>>(3*bw)&mask)
				o[4], o[5] = T(g>>(4*bw)&mask), T(g>>(5*bw)&mask)
				o[6], o[7] = T(g>>(6*bw)&mask), T(g>>(7*bw)&mask)
				if check {
					hi = max(hi, o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7])
				}
			}
			if uint64(hi) > limit {
				return false
			}
		}
		var acc uint64
		var have int
		for ; j < len(out); j++ {
			for have < bw {
				acc |= uint64(data[p]) << have
				p++
				have += 8
			}
			v := acc & mask
			acc >>= bw
			have -= bw
			if v > limit {
				return false
			}
			out[j] = T(v)
		}
		i += m
	}
	return true
}

// levelCache remembers, for the column chunks of one row group, the
// encoded level runs of the pages decoded so far and their decoded levels.
// The fields of a language row struct usually carry the same levels (every
// field present, or every one null), state and action vectors of one length
// the same repetition levels, written as the same bytes: a page whose
// encoded run equals an earlier one (same bytes, bit width, maximum and
// count, at the same position in its chunk) copies the decoded levels
// instead of decoding them again. Equal encodings decode to equal levels
// whatever the column, so any chunk of the row group may hit any other's.
type levelCache struct {
	runs []cachedRun
	enc  []byte  // the encoded runs, copied (page buffers are reused)
	dec  []int16 // their decoded levels, copied
}

type cachedRun struct {
	start       int64 // the page's first level in its chunk
	bw          int
	max         uint64
	enc, encEnd int // enc[enc:encEnd]
	dec, decEnd int // dec[dec:decEnd]
}

// Bounds on what a cache remembers: runs (and so lookups per page), and
// decoded levels (a huge chunk is not copied).
const (
	maxCachedRuns   = 256
	maxCachedLevels = 1 << 22
)

// minCachedRun is the shortest encoded run the cache remembers: shorter
// ones are a few RLE runs (a page of one definition level is one), which
// decode faster than a lookup and a copy.
const minCachedRun = 16

// decode decodes len(dst) levels as decodeHybrid does, the page's first
// level being level start of its chunk. A nil cache just decodes.
func (c *levelCache) decode(src []byte, bw int, dst []int16, max uint64, start int64) bool {
	if c == nil || len(src) < minCachedRun {
		return decodeHybrid(src, bw, dst, max)
	}
	for _, r := range c.runs {
		if r.start == start && r.decEnd-r.dec == len(dst) && r.bw == bw && r.max == max && bytes.Equal(c.enc[r.enc:r.encEnd], src) {
			copy(dst, c.dec[r.dec:r.decEnd])
			return true
		}
	}
	if !decodeHybrid(src, bw, dst, max) {
		return false
	}
	if len(c.runs) < maxCachedRuns && len(c.dec)+len(dst) <= maxCachedLevels {
		e, d := len(c.enc), len(c.dec)
		c.enc = append(c.enc, src...)
		c.dec = append(c.dec, dst...)
		c.runs = append(c.runs, cachedRun{start: start, bw: bw, max: max, enc: e, encEnd: len(c.enc), dec: d, decEnd: len(c.dec)})
	}
	return true
}

// reset empties the cache, keeping its storage.
func (c *levelCache) reset() {
	c.runs, c.enc, c.dec = c.runs[:0], c.enc[:0], c.dec[:0]
}

// levelCaches recycles level caches between row groups.
var levelCaches = sync.Pool{New: func() any { return new(levelCache) }}

// levelScratch recycles the level and dictionary index buffers of the
// numeric page path (readNumPages' callers), which do not outlive a call.
var levelScratch = sync.Pool{New: func() any { return new(numScratch) }}

type numScratch struct {
	def, rep []int16
	idx      []int32
}

// numBuf allocates n values of physical type pt and returns them as raw
// little-endian bytes, with their width and Arrow type; ok is false for
// other types.
func numBuf(pt parquet.Type, n int) (raw []byte, w int, dt arrow.DataType, ok bool) {
	switch pt {
	case parquet.Types.Int64:
		return arrow.Int64Traits.CastToBytes(make([]int64, n)), 8, arrow.PrimitiveTypes.Int64, true
	case parquet.Types.Int32:
		return arrow.Int32Traits.CastToBytes(make([]int32, n)), 4, arrow.PrimitiveTypes.Int32, true
	case parquet.Types.Float:
		return arrow.Float32Traits.CastToBytes(make([]float32, n)), 4, arrow.PrimitiveTypes.Float32, true
	case parquet.Types.Double:
		return arrow.Float64Traits.CastToBytes(make([]float64, n)), 8, arrow.PrimitiveTypes.Float64, true
	}
	return nil, 0, nil, false
}

// readNumPages reads the n levels and the values of a fixed-width numeric
// leaf (w bytes a value, maximum levels maxRep and maxDef) from the pages
// of pr: the levels, through lc (which may be nil), into def and rep (each
// of length n, or nil when its maximum level is 0), the values as raw
// little-endian bytes into vals
// (length n*w). Data pages may be PLAIN or dictionary-encoded (after a
// PLAIN dictionary page). It returns the number of values; ok is false, and
// the caller reads the chunk with arrow-go's column reader, on any other
// layout or inconsistency.
func readNumPages(ps pageSource, n int64, maxRep, maxDef int16, w int, def, rep []int16, vals []byte, s *numScratch, lc *levelCache) (nv int64, ok bool) {
	if maxRep < 0 || maxDef < 0 || (maxRep > 0) != (rep != nil) || (maxDef > 0) != (def != nil) ||
		(rep != nil && int64(len(rep)) != n) || (def != nil && int64(len(def)) != n) || int64(len(vals)) != n*int64(w) {
		return 0, false
	}
	repW, defW := bits.Len16(uint16(maxRep)), bits.Len16(uint16(maxDef))
	var dict []byte // nil: no dictionary page
	var total int64
	for total < n {
		pg := ps.next()
		if pg == nil {
			break
		}
		if pg.kind == dictPage {
			switch pg.encoding {
			case parquet.Encodings.Plain, parquet.Encodings.PlainDict:
			default:
				return 0, false
			}
			data, cnt := pg.data, int64(pg.numValues)
			if dict != nil || total > 0 || cnt < 0 || cnt > int64(len(data)/w) {
				return 0, false
			}
			dict = data[:cnt*int64(w)]
			continue
		}
		repB, defB, valB, ok := pageRegions(pg, maxRep, maxDef)
		if !ok {
			return 0, false
		}
		cnt := int64(pg.numValues)
		if cnt <= 0 || cnt > n-total {
			return 0, false
		}
		k := cnt // values in the page
		if rep != nil && !lc.decode(repB, repW, rep[total:total+cnt], uint64(maxRep), total) {
			return 0, false
		}
		if def != nil {
			d := def[total : total+cnt]
			if !lc.decode(defB, defW, d, uint64(maxDef), total) {
				return 0, false
			}
			k = countLevel(d, maxDef)
		}
		out := vals[nv*int64(w) : (nv+k)*int64(w)]
		switch pg.encoding {
		case parquet.Encodings.Plain:
			if int64(len(valB)) < k*int64(w) {
				return 0, false
			}
			copy(out, valB)
		case parquet.Encodings.RLEDict, parquet.Encodings.PlainDict:
			if k == 0 {
				break
			}
			nd := len(dict) / w
			if len(valB) < 1 || nd == 0 {
				return 0, false
			}
			s.idx = resize(s.idx, int(k))
			if !decodeHybrid(valB[1:], int(valB[0]), s.idx, uint64(nd-1)) {
				return 0, false
			}
			if w == 8 {
				for j, x := range s.idx {
					binary.LittleEndian.PutUint64(out[8*j:], binary.LittleEndian.Uint64(dict[8*int(x):]))
				}
			} else {
				for j, x := range s.idx {
					binary.LittleEndian.PutUint32(out[4*j:], binary.LittleEndian.Uint32(dict[4*int(x):]))
				}
			}
		default:
			return 0, false
		}
		total += cnt
		nv += k
	}
	if ps.failed() || total != n {
		return 0, false
	}
	return nv, true
}

// readFlatPages is readFlat's page path (readNumPages); ok is false when
// the chunk has nulls or is not of a handled layout, and readFlat then
// reads it with the column reader.
func readFlatPages(pages *pageView, rg, c int, cc *metadata.ColumnChunkMetaData, nrows int64) (arrow.Array, bool) {
	col := pages.rdr.MetaData().Schema.Column(c)
	raw, w, dt, ok := numBuf(col.PhysicalType(), int(nrows))
	if !ok {
		return nil, false
	}
	ps, err := pages.open(rg, c, cc)
	if err != nil {
		return nil, false
	}
	defer ps.close() // returns its buffers to pageAlloc; values are copied out
	s := levelScratch.Get().(*numScratch)
	defer levelScratch.Put(s)
	var def []int16
	if col.MaxDefinitionLevel() > 0 {
		s.def = resize(s.def, int(nrows))
		def = s.def
	}
	nv, ok := readNumPages(ps, nrows, 0, col.MaxDefinitionLevel(), w, def, nil, raw, s, pages.levels)
	if !ok || nv != nrows {
		return nil, false
	}
	pages.counts.page()
	data := array.NewData(dt, int(nrows), []*memory.Buffer{nil, memory.NewBufferBytes(raw)}, nil, 0, 0)
	defer data.Release()
	return array.MakeFromData(data), true
}

// readListPages is readList's page path (readNumPages) for a chunk of n
// levels; ok is false when the chunk is not plain (see readList) or not of
// a handled layout, and readList then uses the column reader.
func readListPages(pages *pageView, rg, c int, cc *metadata.ColumnChunkMetaData, nrows, n int64) (arrow.Array, bool) {
	col := pages.rdr.MetaData().Schema.Column(c)
	maxDef := col.MaxDefinitionLevel()
	raw, w, dt, ok := numBuf(col.PhysicalType(), int(n))
	if !ok || col.MaxRepetitionLevel() != 1 || maxDef <= 0 {
		return nil, false
	}
	ps, err := pages.open(rg, c, cc)
	if err != nil {
		return nil, false
	}
	defer ps.close() // returns its buffers to pageAlloc; values are copied out
	s := levelScratch.Get().(*numScratch)
	defer levelScratch.Put(s)
	s.def, s.rep = resize(s.def, int(n)), resize(s.rep, int(n))
	nv, ok := readNumPages(ps, n, 1, maxDef, w, s.def, s.rep, raw, s, pages.levels)
	if !ok || nv != n {
		return nil, false
	}
	pages.counts.page()
	return newListArray(dt, raw, s.rep, nrows)
}

// newListArray returns the list array of nrows lists over the values
// vals (of type dt) whose repetition levels are rep (a list starts at each
// level 0); ok is false when rep does not start exactly nrows lists.
func newListArray(dt arrow.DataType, vals []byte, rep []int16, nrows int64) (_ arrow.Array, ok bool) {
	offs := make([]int32, 0, nrows+1)
	if p := fixedListLen(rep, nrows); p > 0 {
		for k := int64(0); k < nrows; k++ {
			offs = append(offs, int32(k*p))
		}
	} else {
		for i, r := range rep {
			if r == 0 {
				if int64(len(offs)) == nrows {
					return nil, false
				}
				offs = append(offs, int32(i))
			}
		}
		if int64(len(offs)) != nrows {
			return nil, false
		}
	}
	offs = append(offs, int32(len(rep)))
	values := array.NewData(dt, len(rep), []*memory.Buffer{nil, memory.NewBufferBytes(vals)}, nil, 0, 0)
	defer values.Release()
	list := array.NewData(arrow.ListOf(dt), int(nrows),
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs))},
		[]arrow.ArrayData{values}, 0, 0)
	defer list.Release()
	return array.MakeFromData(list), true
}

// fixedListLen returns p when the repetition levels rep are nrows lists of
// p values each (state and action vectors are), found with one memequal:
// the first list's levels repeat with period p. Otherwise it returns 0.
func fixedListLen(rep []int16, nrows int64) int64 {
	if nrows <= 0 || len(rep) == 0 || rep[0] != 0 {
		return 0
	}
	p := int64(1)
	for p < int64(len(rep)) && rep[p] != 0 {
		p++
	}
	if int64(len(rep)) != nrows*p || !periodic(asBytes(rep), 2*p) {
		return 0
	}
	return p
}

// countLevel returns the number of levels in s equal to v: the values of a
// page. A page's definition levels are usually all one level (a single RLE
// run), recognised with a memequal instead of a loop.
func countLevel(s []int16, v int16) int64 {
	if len(s) > 0 && equalLevels(s[1:], s[:len(s)-1]) {
		if s[0] == v {
			return int64(len(s))
		}
		return 0
	}
	n := int64(0)
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// fill sets every element of s to v; long runs (definition levels are
// often one run per page) are filled by doubling copies.
func fill[T int16 | int32](s []T, v T) {
	if len(s) < 32 {
		for j := range s {
			s[j] = v
		}
		return
	}
	if v == 0 {
		clear(s)
		return
	}
	s[0] = v
	for k := 1; k < len(s); k *= 2 {
		copy(s[k:], s[:k])
	}
}

// pageView returns the page path's view of the file: its bytes, and the
// file opened with pageAlloc as the allocator (for arrowPages); nil when
// the file cannot be opened so. raw enables rawPages.
func (p *parquetFile) pageView(raw bool, counts *readCounts) *pageView {
	md := p.rdr.MetaData()
	r, err := file.NewParquetReader(io.NewSectionReader(p.f, 0, p.f.Size()),
		file.WithReadProps(parquet.NewReaderProperties(pageAlloc)), file.WithMetadata(md))
	if err != nil {
		return nil
	}
	// arrow-go pads the chunks of files from parquet-mr writers with the
	// PARQUET-816 bug; rawPages leaves those to it.
	raw = raw && !md.WriterVersion().LessThan(metadata.Parquet816FixedVersion)
	return &pageView{rdr: r, f: p.f, size: p.f.Size(), raw: raw, counts: counts, levels: levelCaches.Get().(*levelCache)}
}

// pageAlloc recycles the buffers of the page path's page readers (the
// decompression, data page and dictionary page buffers, some 20 KB per
// column chunk and most of the decode's garbage before it was used). It
// is only safe because those readers are confined to the page path, which
// closes each one when done with its column chunk and keeps no reference to
// its buffers: values are copied out, dictionary pages copied (l.arena).
// Buffers come out zeroed, as from the Go allocator.
var pageAlloc = new(poolAllocator)

// poolAllocator is a memory.Allocator recycling power-of-two sized buffers
// from 64 bytes to 4 MB through sync.Pools; others are plain allocations.
type poolAllocator struct {
	classes [23]sync.Pool // class c holds *[]byte of capacity 1<<c
}

const minAllocClass = 6

func (a *poolAllocator) Allocate(size int) []byte { return a.allocate(size, true) }

// allocate returns a buffer of length size, zeroed if zero (a recycled
// buffer otherwise holds a previous user's bytes).
func (a *poolAllocator) allocate(size int, zero bool) []byte {
	c := max(bits.Len(uint(max(size, 1)-1)), minAllocClass)
	if c >= len(a.classes) {
		return make([]byte, size)
	}
	if p, ok := a.classes[c].Get().(*[]byte); ok {
		b := (*p)[:size]
		if zero {
			clear(b)
		}
		return b
	}
	return make([]byte, size, 1<<c)
}

func (a *poolAllocator) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		// As the Go allocator, whose spare capacity is zero; ours may
		// hold a previous user's bytes.
		if size > len(b) {
			clear(b[len(b):size])
		}
		return b[:size]
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

func (a *poolAllocator) Free(b []byte) {
	c := bits.Len(uint(cap(b))) - 1
	if c < minAllocClass || c >= len(a.classes) || cap(b) != 1<<c {
		return // not one of ours: left to the GC
	}
	b = b[:0]
	a.classes[c].Put(&b)
}
