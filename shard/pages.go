package shard

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
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
// accepts it produces the same levels and values.

// pageReads counts leaves read by the page path (tests).
var pageReads atomic.Int64

// readDictPages reads n levels of leaf l (maximum levels maxRep, l.maxDef)
// from the pages of pr into l.def, l.rep, l.dict and l.idx. It reports
// false when the chunk is not of the handled shape or is inconsistent; l's
// level and value buffers are then in an unspecified state.
func (l *fastLeaf) readDictPages(pr file.PageReader, n int64, maxRep int16) bool {
	maxDef := l.maxDef
	if maxRep <= 0 || maxDef <= 0 || int64(len(l.def)) != n || int64(len(l.rep)) != n {
		return false
	}
	repW, defW := bits.Len16(uint16(maxRep)), bits.Len16(uint16(maxDef))
	l.dict = l.dict[:0]
	l.idx = resize(l.idx, int(n))
	haveDict := false
	var total, nv int64
	for total < n && pr.Next() {
		pg := pr.Page()
		var repB, defB, valB []byte
		switch p := pg.(type) {
		case *file.DictionaryPage:
			if haveDict || total > 0 || !l.readDict(p) {
				return false
			}
			haveDict = true
			continue
		case *file.DataPageV1:
			if p.RepetitionLevelEncoding() != parquet.Encodings.RLE || p.DefinitionLevelEncoding() != parquet.Encodings.RLE {
				return false
			}
			var ok bool
			data := p.Data()
			if repB, data, ok = lengthPrefixed(data); !ok {
				return false
			}
			if defB, valB, ok = lengthPrefixed(data); !ok {
				return false
			}
		case *file.DataPageV2:
			data := p.Data()
			r, d := int64(p.RepetitionLevelByteLen()), int64(p.DefinitionLevelByteLen())
			if r < 0 || d < 0 || r+d > int64(len(data)) {
				return false
			}
			repB, defB, valB = data[:r], data[r:r+d], data[r+d:]
		default:
			return false
		}
		if !haveDict {
			return false
		}
		switch e := parquet.Encoding(pg.Encoding()); e {
		case parquet.Encodings.RLEDict, parquet.Encodings.PlainDict:
		default:
			return false
		}
		cnt := int64(pg.NumValues())
		if cnt <= 0 || cnt > n-total {
			return false
		}
		def, rep := l.def[total:total+cnt], l.rep[total:total+cnt]
		if !decodeHybrid(repB, repW, rep, uint64(maxRep)) || !decodeHybrid(defB, defW, def, uint64(maxDef)) {
			return false
		}
		vals := int64(0)
		for _, d := range def {
			if d == maxDef {
				vals++
			}
		}
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
	if pr.Err() != nil || total != n {
		return false
	}
	l.idx = l.idx[:nv]
	l.byIdx = true
	pageReads.Add(1)
	return true
}

// readDict decodes a PLAIN dictionary page of byte arrays into l.dict; the
// entries alias the page's buffer, which the page reader never reuses for
// data pages.
func (l *fastLeaf) readDict(p *file.DictionaryPage) bool {
	switch parquet.Encoding(p.Encoding()) {
	case parquet.Encodings.Plain, parquet.Encodings.PlainDict:
	default:
		return false
	}
	data := p.Data()
	cnt := int(p.NumValues())
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
// too short, a run is empty, or a value exceeds max. Padding at the end of
// the last bit-packed run and trailing bytes are ignored, as by arrow-go.
func decodeHybrid[T int16 | int32](src []byte, bw int, dst []T, max uint64) bool {
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
			if v > max {
				return false
			}
			m := len(dst) - i
			if cnt < uint64(m) {
				m = int(cnt)
			}
			run := dst[i : i+m]
			for j := range run {
				run[j] = T(v)
			}
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
		if groups*8 < uint64(m) {
			m = int(groups) * 8
		}
		data := src[:nbytes]
		src = src[nbytes:]
		out := dst[i : i+m]
		var acc uint64
		var have, p int
		for j := range out {
			for have < bw {
				acc |= uint64(data[p]) << have
				p++
				have += 8
			}
			v := acc & mask
			acc >>= bw
			have -= bw
			if v > max {
				return false
			}
			out[j] = T(v)
		}
		i += m
	}
	return true
}
