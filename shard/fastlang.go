package shard

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/lrstream/lrstream/schema"
)

// langReader is a decoded language column of one row group, indexed by
// row-group row.
type langReader interface {
	// frameLen returns the number of rows of frame r.
	frameLen(r int) int
	// sameFrames reports whether frames r1 and r2 hold identical rows.
	sameFrames(r1, r2 int) bool
	// decodeFrame decodes frame r's rows.
	decodeFrame(r int, buf *jsonBuf) ([]schema.Row, error)
	// repeats reports whether frames r+1 .. end-1 all hold frame r's rows,
	// checked in one pass over the span; false means "not known", and the
	// caller compares frame by frame (sameFrames).
	repeats(r, end int) bool
}

// repeats is not known for the pqarrow path: it compares frame by frame.
func (c *langColumn) repeats(r, end int) bool { return false }

func (c *langColumn) sameFrames(r1, r2 int) bool {
	ab, ae := c.list.bounds(r1)
	bb, be := c.list.bounds(r2)
	return c.equalRows(ab, ae, bb, be)
}

// The fast path reads a language column with the low-level parquet column
// readers instead of pqarrow: the repeated persistent strings are never
// materialised per frame as Arrow arrays; frames are compared by their
// levels and values, and only the distinct lists are turned into rows. It
// handles row structs whose fields are strings, float/double timestamps,
// null-typed fields and tool_calls as a list of JSON text (the documented
// and json-ext variants, and inferred files whose tool_calls are
// null-typed); other shapes use the pqarrow path.

// fastField identifies the row field a leaf holds.
type fastField uint8

const (
	fRole fastField = iota
	fContent
	fStyle
	fCamera
	fTimestamp
	fToolCalls
)

// fastLeaf is one leaf column, fully read.
type fastLeaf struct {
	field    fastField
	kind     parquet.Type // ByteArray, Float or Double: which value slice is live
	def, rep []int16
	maxDef   int16
	bytes    []parquet.ByteArray
	// byIdx: the byte-array values are dict[idx[v]] (read by the page
	// path, see pages.go) rather than bytes[v].
	byIdx bool
	dict  []parquet.ByteArray
	idx   []int32
	arena []byte // a copy of the dictionary page, which dict aliases
	// sptr interns the Go strings made from dictionary entries, so
	// that rows repeating a value (every episode's roles, styles, the same
	// content on many frames) share one string instead of allocating one
	// each. Indexed like dict, filled on first use.
	sptr []*string
	f32  []float32
	f64  []float64
	// dList: an element of the outer list exists when def >= dList;
	// dElem: the row struct is non-null when def >= dElem.
	dList, dElem int16
	// tool_calls only: non-null when def >= dTC, an element exists when
	// def >= dTCList.
	dTC, dTCList int16
	// frameEntry[r] / frameVal[r]: first level entry / value of frame r.
	frameEntry, frameVal []int32
	// levelsOf is an earlier leaf of the column with the same levels
	// (and so the same frames and rows), whose index this leaf copied.
	levelsOf *fastLeaf
	// hiRep is the highest repetition level.
	hiRep int16
}

type fastLang struct {
	// tcCol holds tool_calls read by pqarrow (nested struct tool calls);
	// nil when tool_calls is read by the fast path or absent.
	tcCol      *langColumn
	persistent bool
	leaves     []*fastLeaf
	ref        *fastLeaf // a leaf with one entry per row (for frame lengths)
	byField    [6]*fastLeaf
}

// defLevels returns the definition level reached after each node on the
// path from the column root to the leaf.
func defLevels(col *pqschema.Column) []int16 {
	var nodes []pqschema.Node
	for n := col.SchemaNode(); n != nil && n.Parent() != nil; n = n.Parent() {
		nodes = append(nodes, n)
	}
	slices.Reverse(nodes)
	out := make([]int16, len(nodes))
	var d int16
	for i, n := range nodes {
		if n.RepetitionType() != parquet.Repetitions.Required {
			d++
		}
		out[i] = d
	}
	return out
}

// planFastLang checks whether column name's leaves fit the fast path and
// returns the leaves it reads itself, and the tool_calls leaves to read
// with pqarrow when tool_calls is not a plain list of JSON text (nested
// structs of the inferred variants), or ok=false.
func planFastLang(md *metadata.FileMetaData, name string, leaves []int) (cols []int, fields []fastField, tcArrow []int, ok bool) {
	persistent := name == schema.ColumnPersistent
	var tcLeaves []int
	tcSimple := true
	for _, c := range leaves {
		col := md.Schema.Column(c)
		path := col.ColumnPath()
		if len(path) >= 5 && path[0] == name && path[3] == "tool_calls" {
			tcLeaves = append(tcLeaves, c)
			if len(path) != 6 || path[4] != "list" || path[5] != "element" || col.PhysicalType() != parquet.Types.ByteArray || col.MaxRepetitionLevel() != 2 {
				tcSimple = false
			}
		}
	}
	if !tcSimple {
		tcArrow = tcLeaves
	}
	for _, c := range leaves {
		col := md.Schema.Column(c)
		path := col.ColumnPath()
		if len(path) < 3 || path[0] != name {
			continue
		}
		if len(path) == 3 || path[1] != "list" || path[2] != "element" {
			return nil, nil, nil, false // list<null> or unexpected layout
		}
		if len(path) >= 5 && path[3] == "tool_calls" && !tcSimple {
			continue // read by pqarrow
		}
		if isNullLogical(col) {
			continue // null-typed field: always null
		}
		var f fastField
		switch {
		case len(path) == 4 && path[3] == "role":
			f = fRole
		case len(path) == 4 && path[3] == "content":
			f = fContent
		case len(path) == 4 && path[3] == "style":
			f = fStyle
		case len(path) == 4 && path[3] == "camera":
			f = fCamera
		case len(path) == 4 && path[3] == "timestamp":
			if !persistent {
				continue
			}
			f = fTimestamp
		case len(path) == 6 && path[3] == "tool_calls" && path[4] == "list" && path[5] == "element":
			f = fToolCalls
		case len(path) >= 4 && (path[3] == "tool_calls" || path[3] == "role" || path[3] == "content" ||
			path[3] == "style" || path[3] == "camera" || path[3] == "timestamp"):
			return nil, nil, nil, false // nested tool_calls structs and the like
		default:
			continue // unknown extra field: ignored, as on the pqarrow path
		}
		switch f {
		case fTimestamp:
			if col.PhysicalType() != parquet.Types.Float && col.PhysicalType() != parquet.Types.Double {
				return nil, nil, nil, false
			}
		default:
			if col.PhysicalType() != parquet.Types.ByteArray {
				return nil, nil, nil, false
			}
		}
		wantRep := int16(1)
		if f == fToolCalls {
			wantRep = 2
		}
		if col.MaxRepetitionLevel() != wantRep {
			return nil, nil, nil, false
		}
		cols = append(cols, c)
		fields = append(fields, f)
	}
	if len(cols) == 0 {
		return nil, nil, nil, false
	}
	hasRowLeaf := false
	for _, f := range fields {
		if f != fToolCalls {
			hasRowLeaf = true
		}
	}
	return cols, fields, tcArrow, hasRowLeaf
}

// readFastLang reads the leaves of a language column from row group rg.
//
// pages, when not nil, is rdr's file opened for the page path (pages.go),
// which then reads the leaves it can.
func readFastLang(rdr *file.Reader, pages *pageView, fileSize int64, rg int, name string, cols []int, fields []fastField, nrows int) (*fastLang, error) {
	md := rdr.MetaData()
	rgr := rdr.RowGroup(rg)
	fl := &fastLang{persistent: name == schema.ColumnPersistent}
	for k, c := range cols {
		col := md.Schema.Column(c)
		lv := defLevels(col)
		ccm, err := md.RowGroup(rg).ColumnChunk(c)
		if err != nil {
			return nil, err
		}
		// Bound allocations by what the file can hold: corrupt metadata
		// must give an error, not an out-of-memory crash.
		n, size := ccm.NumValues(), ccm.TotalCompressedSize()
		if size < 0 || size > fileSize || n < 0 || n > maxChunkValues || n > 4096*size+1024 {
			return nil, fmt.Errorf("%s: implausible column chunk (%d values in %d bytes)", col.Path(), n, size)
		}
		l := leafPool.Get().(*fastLeaf)
		*l = fastLeaf{field: fields[k], maxDef: col.MaxDefinitionLevel(),
			def: resize(l.def, int(n)), rep: resize(l.rep, int(n)),
			bytes: l.bytes, dict: l.dict, idx: l.idx, arena: l.arena, f32: l.f32, f64: l.f64, frameEntry: l.frameEntry, frameVal: l.frameVal}
		fl.leaves = append(fl.leaves, l) // before any error, so release returns it
		if len(lv) < 4 {
			return nil, fmt.Errorf("%s: unexpected nesting", col.Path())
		}
		l.dList, l.dElem = lv[1], lv[2]
		if l.field == fToolCalls {
			if len(lv) < 6 {
				return nil, fmt.Errorf("%s: unexpected nesting", col.Path())
			}
			l.dTC, l.dTCList = lv[3], lv[4]
		}
		var total int64
		if pages != nil {
			total = l.readPages(pages, rg, c, ccm, n, col.MaxRepetitionLevel())
		}
		var ccr file.ColumnChunkReader
		if total != n { // not read by the page path
			if ccr, err = rgr.Column(c); err != nil {
				return nil, err
			}
		}
		nv := 0
		switch r := ccr.(type) {
		case nil: // read by the page path
		case *file.ByteArrayColumnChunkReader:
			l.kind = parquet.Types.ByteArray
			l.bytes = resize(l.bytes, int(n))
			// When every data page is dictionary-encoded the values alias the
			// chunk's dictionary, which outlives the page buffers: read page
			// by page without copying. Otherwise ReadBatch copies the values
			// (plain pages alias a page buffer that the next page reuses).
			read := r.ReadBatch
			if dictOnly(ccm) {
				read = r.ReadBatchInPage
			}
			if total, nv, err = readChunk(read, n, l.bytes, l.def, l.rep); err != nil {
				return nil, err
			}
			l.bytes = l.bytes[:nv]
		case *file.Float32ColumnChunkReader:
			l.kind = parquet.Types.Float
			l.f32 = resize(l.f32, int(n))
			if total, nv, err = readChunk(r.ReadBatch, n, l.f32, l.def, l.rep); err != nil {
				return nil, err
			}
			l.f32 = l.f32[:nv]
		case *file.Float64ColumnChunkReader:
			l.kind = parquet.Types.Double
			l.f64 = resize(l.f64, int(n))
			if total, nv, err = readChunk(r.ReadBatch, n, l.f64, l.def, l.rep); err != nil {
				return nil, err
			}
			l.f64 = l.f64[:nv]
		default:
			return nil, fmt.Errorf("%s: unexpected physical type", col.Path())
		}
		if total != n {
			return nil, fmt.Errorf("%s: read %d of %d levels", col.Path(), total, n)
		}
		if j := fl.sameLevels(l); j != nil {
			err = l.shareIndex(j, nrows)
		} else {
			err = l.indexFrom(fl.ref, nrows)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", col.Path(), err)
		}
		fl.byField[l.field] = l
		if fl.ref == nil && l.field != fToolCalls {
			fl.ref = l
		}
	}
	// Every row leaf must describe the same rows (as it does when it has
	// the levels of an earlier leaf).
	for _, l := range fl.leaves {
		if l.field == fToolCalls || l == fl.ref || l.levelsOf != nil {
			continue
		}
		if !fl.ref.sameRows(l, nrows) {
			return nil, errors.New("language column leaves disagree on the number of rows")
		}
	}
	if tc := fl.byField[fToolCalls]; tc != nil && !fl.ref.sameRows(tc, nrows) {
		return nil, errors.New("tool_calls disagrees with the row fields on the number of rows")
	}
	return fl, nil
}

// sameRows reports whether leaf l has as many rows as l0 in every frame.
// When both have one level entry a row (tool_calls holding at most one
// call) and the same entry starts, the frames can only differ in being a
// null or empty list, checked at each frame's first entry.
func (l0 *fastLeaf) sameRows(l *fastLeaf, nrows int) bool {
	if !l0.nestedCalls() && !l.nestedCalls() && slices.Equal(l0.frameEntry, l.frameEntry) {
		for _, s := range l0.frameEntry[:nrows] {
			if (l0.def[s] < l0.dList) != (l.def[s] < l.dList) {
				return false
			}
		}
		return true
	}
	for r := 0; r < nrows; r++ {
		if l0.rowsOf(r) != l.rowsOf(r) {
			return false
		}
	}
	return true
}

// nestedCalls reports whether a row of the leaf may span several level
// entries: a tool_calls leaf with a call list of two or more.
func (l *fastLeaf) nestedCalls() bool { return l.field == fToolCalls && l.hiRep > 1 }

// readPages reads the leaf's n levels and its values with the page path
// (pages.go) when the chunk's layout allows. It returns n on success, and
// 0 when the caller must read the chunk with the column reader.
func (l *fastLeaf) readPages(pages *pageView, rg, c int, ccm *metadata.ColumnChunkMetaData, n int64, maxRep int16) int64 {
	pt := ccm.Type()
	if pt == parquet.Types.ByteArray && !dictOnly(ccm) {
		return 0
	}
	ps, err := pages.open(rg, c, ccm)
	if err != nil {
		return 0
	}
	defer ps.close() // returns its buffers to pageAlloc; nothing refers to them
	lc := pages.levels
	switch pt {
	case parquet.Types.ByteArray:
		if l.readDictPages(ps, n, maxRep, lc) {
			l.kind = pt
			pages.counts.page()
			return n
		}
	case parquet.Types.Float, parquet.Types.Double:
		s := levelScratch.Get().(*numScratch)
		defer levelScratch.Put(s)
		var raw []byte
		w := 4
		if pt == parquet.Types.Float {
			l.f32 = resize(l.f32, int(n))
			raw = arrow.Float32Traits.CastToBytes(l.f32)
		} else {
			l.f64 = resize(l.f64, int(n))
			raw, w = arrow.Float64Traits.CastToBytes(l.f64), 8
		}
		if nv, ok := readNumPages(ps, n, maxRep, l.maxDef, w, l.def, l.rep, raw, s, lc); ok {
			l.kind = pt
			if pt == parquet.Types.Float {
				l.f32 = l.f32[:nv]
			} else {
				l.f64 = l.f64[:nv]
			}
			pages.counts.page()
			return n
		}
	}
	return 0
}

// index computes the per-frame entry and value starts.
func (l *fastLeaf) index(nrows int) error { return l.indexFrom(nil, nrows) }

// indexFrom computes the per-frame entry and value starts, copying the
// entry starts of leaf j (nil: none) when it has l's repetition levels.
func (l *fastLeaf) indexFrom(j *fastLeaf, nrows int) error {
	if len(l.rep) != len(l.def) {
		return errors.New("level counts differ")
	}
	if j != nil && len(j.frameEntry) == nrows+1 && equalLevels(j.rep, l.rep) {
		l.frameEntry = append(resize(l.frameEntry, 0), j.frameEntry...)
		l.hiRep = j.hiRep
	} else if err := l.entryStarts(nrows); err != nil {
		return err
	}
	return l.valueStarts(nrows)
}

// entryStarts computes frameEntry from the repetition levels: frame r
// starts at its r-th level 0.
func (l *fastLeaf) entryStarts(nrows int) error {
	l.frameEntry = resize(l.frameEntry, nrows+1)
	fe, rep := l.frameEntry[:nrows+1], l.rep
	if len(rep) > 0 && rep[0] != 0 {
		return errors.New("data does not start a row")
	}
	r, hi := 0, uint16(0)
	for i, p := range rep {
		hi = max(hi, uint16(p))
		if p == 0 {
			if r < nrows {
				fe[r] = int32(i)
			}
			r++
		}
	}
	switch {
	case hi > 2:
		return errors.New("invalid levels")
	case r > nrows:
		return fmt.Errorf("more than %d rows", nrows)
	case r != nrows:
		return fmt.Errorf("%d rows, want %d", r, nrows)
	}
	fe[nrows] = int32(len(rep))
	l.hiRep = int16(hi)
	return nil
}

// valueStarts computes frameVal from frameEntry and the definition
// levels (a value where the level is maxDef), and checks the number of
// values read. A chunk with one definition level throughout (every field
// present, or every one null: the usual persistent column) needs no count.
func (l *fastLeaf) valueStarts(nrows int) error {
	l.frameVal = resize(l.frameVal, nrows+1)
	def, maxDef := l.def, l.maxDef
	fe, fv := l.frameEntry[:nrows+1], l.frameVal[:nrows+1]
	var v int32
	if len(def) > 0 && equalLevels(def[1:], def[:len(def)-1]) {
		switch u := def[0]; {
		case u > maxDef:
			return errors.New("invalid levels")
		case u == maxDef:
			copy(fv, fe)
			v = int32(len(def))
		default:
			clear(fv)
		}
	} else {
		hi := int16(0)
		for r := range nrows {
			fv[r] = v
			for _, d := range def[fe[r]:fe[r+1]] {
				hi = max(hi, d)
				if d == maxDef {
					v++
				}
			}
		}
		if hi > maxDef {
			return errors.New("invalid levels")
		}
		fv[nrows] = v
	}
	if nv := l.values(); int(v) != nv {
		return fmt.Errorf("%d values for %d defined levels", nv, v)
	}
	return nil
}

// sameLevels returns an earlier leaf of fl with the same nesting and the
// same repetition and definition levels as l, or nil. The fields of a row
// struct usually share their levels (all present, or all null), so most
// leaves of a column copy their index instead of computing it: comparing
// levels is a memequal, indexing them a loop over every entry.
func (fl *fastLang) sameLevels(l *fastLeaf) *fastLeaf {
	for _, j := range fl.leaves {
		if j == l || j.levelsOf != nil || (j.field == fToolCalls) != (l.field == fToolCalls) ||
			j.maxDef != l.maxDef || j.dList != l.dList || j.dElem != l.dElem || j.dTC != l.dTC || j.dTCList != l.dTCList ||
			len(j.frameEntry) == 0 || !equalLevels(j.def, l.def) || !equalLevels(j.rep, l.rep) {
			continue
		}
		return j
	}
	return nil
}

// shareIndex copies the frame index of leaf j, whose levels l has (see
// sameLevels), after the check index makes of the number of values.
func (l *fastLeaf) shareIndex(j *fastLeaf, nrows int) error {
	if len(j.frameEntry) != nrows+1 {
		return fmt.Errorf("%d rows, want %d", len(j.frameEntry)-1, nrows)
	}
	l.frameEntry = append(resize(l.frameEntry, 0), j.frameEntry...)
	l.frameVal = append(resize(l.frameVal, 0), j.frameVal...)
	l.hiRep = j.hiRep
	if v := l.frameVal[nrows]; int(v) != l.values() {
		return fmt.Errorf("%d values for %d defined levels", l.values(), v)
	}
	l.levelsOf = j
	return nil
}

// values returns the number of values read.
func (l *fastLeaf) values() int {
	switch {
	case l.kind == parquet.Types.Float:
		return len(l.f32)
	case l.kind == parquet.Types.Double:
		return len(l.f64)
	case l.byIdx:
		return len(l.idx)
	}
	return len(l.bytes)
}

// rowsOf returns the number of rows (outer list elements) of frame r.
func (l *fastLeaf) rowsOf(r int) int {
	s, e := l.frameEntry[r], l.frameEntry[r+1]
	if l.def[s] < l.dList {
		return 0
	}
	if !l.nestedCalls() {
		return int(e - s)
	}
	n := 0
	for i := s; i < e; i++ {
		if l.rep[i] <= 1 {
			n++
		}
	}
	return n
}

func (fl *fastLang) frameLen(r int) int { return fl.ref.rowsOf(r) }

// bindToolCalls attaches the pqarrow-read tool_calls column a (a list of
// structs holding only tool_calls) and checks it has the same rows.
func (fl *fastLang) bindToolCalls(name string, a arrow.Array, nrows int) error {
	c, err := newLangColumn(name, a)
	if err != nil {
		return err
	}
	for r := 0; r < nrows; r++ {
		if c.frameLen(r) != fl.frameLen(r) {
			return errors.New("tool_calls disagrees with the row fields on the number of rows")
		}
	}
	if c.tc.list.arr != nil {
		fl.tcCol = c
	}
	return nil
}

func (fl *fastLang) sameFrames(r1, r2 int) bool {
	if c := fl.tcCol; c != nil {
		ab, ae := c.list.bounds(r1)
		bb, be := c.list.bounds(r2)
		if ae-ab != be-bb {
			return false
		}
		for k := 0; k < ae-ab; k++ {
			if !c.tc.equal(ab+k, bb+k) {
				return false
			}
		}
	}
	for _, l := range fl.leaves {
		as, ae := l.frameEntry[r1], l.frameEntry[r1+1]
		bs, be := l.frameEntry[r2], l.frameEntry[r2+1]
		if ae-as != be-bs || !equalLevels(l.def[as:ae], l.def[bs:be]) || !equalLevels(l.rep[as:ae], l.rep[bs:be]) {
			return false
		}
		av, aw := l.frameVal[r1], l.frameVal[r1+1]
		bv := l.frameVal[r2]
		switch l.kind {
		case parquet.Types.ByteArray:
			if l.byIdx {
				// Equal indices are equal values; a dictionary may still
				// hold the same value twice, so unequal ones are compared
				// by value.
				a, b := l.idx[av:aw], l.idx[bv:bv+(aw-av)]
				if bytes.Equal(asBytes(a), asBytes(b)) {
					continue
				}
				for k := range a {
					if a[k] != b[k] && !bytes.Equal(l.dict[a[k]], l.dict[b[k]]) {
						return false
					}
				}
				continue
			}
			for k := int32(0); k < aw-av; k++ {
				if !bytes.Equal(l.bytes[av+k], l.bytes[bv+k]) {
					return false
				}
			}
		case parquet.Types.Float:
			for k := int32(0); k < aw-av; k++ {
				if math.Float32bits(l.f32[av+k]) != math.Float32bits(l.f32[bv+k]) {
					return false
				}
			}
		case parquet.Types.Double:
			for k := int32(0); k < aw-av; k++ {
				if math.Float64bits(l.f64[av+k]) != math.Float64bits(l.f64[bv+k]) {
					return false
				}
			}
		}
	}
	return true
}

// repeats checks a span of frames at once: the levels and values of
// frames r .. end-1 are contiguous, so the frames all equal frame r exactly
// when the span is periodic with frame r's length, one memequal per leaf
// buffer instead of one comparison per frame. A periodic repetition level
// run with a single row start in its first period has its row starts
// exactly at the period boundaries, so the frames are aligned with the
// periods. Dictionary indices are compared as indices: a dictionary
// holding a value twice makes the span look different, and the caller
// then compares frame by frame.
func (fl *fastLang) repeats(r, end int) bool {
	if fl.tcCol != nil || end-r < 2 {
		return false
	}
	n := int64(end - r)
	for _, l := range fl.leaves {
		es, ee := int64(l.frameEntry[r]), int64(l.frameEntry[end])
		p := int64(l.frameEntry[r+1]) - es
		if p <= 0 || ee-es != n*p {
			return false
		}
		if !periodic(asBytes(l.def[es:ee]), 2*p) || !periodic(asBytes(l.rep[es:ee]), 2*p) {
			return false
		}
		vs, ve := int64(l.frameVal[r]), int64(l.frameVal[end])
		q := int64(l.frameVal[r+1]) - vs
		if ve-vs != n*q {
			return false
		}
		var vals []byte
		var w int64
		switch {
		case l.kind == parquet.Types.ByteArray && l.byIdx:
			vals, w = asBytes(l.idx[vs:ve]), 4
		case l.kind == parquet.Types.ByteArray:
			return false
		case l.kind == parquet.Types.Float:
			vals, w = asBytes(l.f32[vs:ve]), 4
		case l.kind == parquet.Types.Double:
			vals, w = asBytes(l.f64[vs:ve]), 8
		}
		if !periodic(vals, w*q) {
			return false
		}
	}
	return true
}

// periodic reports whether s repeats with period p bytes (s is a whole
// number of periods).
func periodic(s []byte, p int64) bool {
	return bytes.Equal(s[p:], s[:int64(len(s))-p])
}

// equalLevels reports whether two level runs are equal, comparing them as
// bytes (a vectorised memequal; slices.Equal compares element by element).
func equalLevels(a, b []int16) bool {
	return bytes.Equal(asBytes(a), asBytes(b))
}

// asBytes returns the memory of s as bytes.
func asBytes[T int16 | int32 | float32 | float64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

func (fl *fastLang) decodeFrame(r int, buf *jsonBuf) ([]schema.Row, error) {
	n := fl.frameLen(r)
	if n == 0 {
		return nil, nil
	}
	rows := make([]schema.Row, n)
	if c := fl.tcCol; c != nil {
		b, _ := c.list.bounds(r)
		for k := 0; k < n; k++ {
			if c.tc.list.arr.IsNull(b + k) {
				continue
			}
			tc, err := c.tc.decode(b+k, buf)
			if err != nil {
				return nil, fmt.Errorf("row %d: tool_calls: %w", k, err)
			}
			rows[k].ToolCalls = tc
		}
	}
	for _, l := range fl.leaves {
		e, end := l.frameEntry[r], l.frameEntry[r+1]
		v := l.frameVal[r]
		if l.field == fToolCalls {
			for k := 0; k < n; k++ {
				// entries of row k: the first one, then rep == 2 ones.
				first := e
				e++
				for e < end && l.rep[e] == 2 {
					e++
				}
				tc, nv, err := l.toolCalls(first, e, v, buf)
				if err != nil {
					return nil, fmt.Errorf("row %d: tool_calls: %w", k, err)
				}
				v = nv
				rows[k].ToolCalls = tc
			}
			continue
		}
		for k := 0; k < n; k++ {
			d := l.def[e+int32(k)]
			if d < l.dElem {
				return nil, fmt.Errorf("row %d: null row", k)
			}
			if d != l.maxDef {
				continue // null field
			}
			row := &rows[k]
			switch l.field {
			case fTimestamp:
				if l.kind == parquet.Types.Float {
					row.Timestamp = float64(l.f32[v])
				} else {
					row.Timestamp = float64(float32(l.f64[v]))
				}
				row.HasTimestamp = true
			case fRole:
				row.Role = *l.strPtrAt(v)
			case fContent:
				row.Content = l.strPtrAt(v)
			case fStyle:
				row.Style = l.strPtrAt(v)
			case fCamera:
				row.Camera = l.strPtrAt(v)
			}
			v++
		}
	}
	return rows, nil
}

// str returns byte-array value v.
func (l *fastLeaf) str(v int32) []byte {
	if l.byIdx {
		return l.dict[l.idx[v]]
	}
	return l.bytes[v]
}

// strPtrAt returns byte-array value v as a *string; dictionary values are
// interned per leaf (rows only read them).
func (l *fastLeaf) strPtrAt(v int32) *string {
	if !l.byIdx {
		return strPtr(l.bytes[v])
	}
	i := l.idx[v]
	if len(l.sptr) != len(l.dict) {
		l.sptr = make([]*string, len(l.dict))
	}
	if p := l.sptr[i]; p != nil {
		return p
	}
	p := strPtr(l.dict[i])
	l.sptr[i] = p
	return p
}

func strPtr(b []byte) *string {
	s := string(b)
	return &s
}

// toolCalls writes the tool_calls of one row (level entries [s, e), values
// from v) as a JSON array; it returns the next value index.
func (l *fastLeaf) toolCalls(s, e, v int32, buf *jsonBuf) ([]byte, int32, error) {
	if l.def[s] < l.dElem {
		return nil, v, errors.New("null row")
	}
	if l.def[s] < l.dTC {
		return nil, v, nil
	}
	buf.b = append(buf.b[:0], '[')
	if l.def[s] >= l.dTCList {
		for i := s; i < e; i++ {
			if i > s {
				buf.b = append(buf.b, ',')
			}
			if l.def[i] != l.maxDef {
				buf.b = append(buf.b, "null"...)
				continue
			}
			if err := buf.appendCompactJSON(string(l.str(v))); err != nil {
				return nil, v, err
			}
			v++
		}
	}
	buf.b = append(buf.b, ']')
	return bytes.Clone(buf.b), v, nil
}

// dictOnly reports whether the footer's page encoding stats show that
// every data page of the chunk is dictionary-encoded.
func dictOnly(cc *metadata.ColumnChunkMetaData) bool {
	stats := cc.EncodingStats()
	if len(stats) == 0 {
		return false
	}
	data := 0
	for _, st := range stats {
		switch st.PageType.String() {
		case "DATA_PAGE", "DATA_PAGE_V2":
			data++
			if st.Encoding != parquet.Encodings.RLEDict && st.Encoding != parquet.Encodings.PlainDict {
				return false
			}
		case "DICTIONARY_PAGE":
		default:
			return false
		}
	}
	return data > 0
}

// leafPool recycles the level and value buffers of fastLeaf between units.
var leafPool = sync.Pool{New: func() any { return new(fastLeaf) }}

// resize returns a slice of length n, reusing b's storage when it can.
func resize[T any](b []T, n int) []T {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]T, n, n+n/4)
}

// release returns the leaves' buffers to the pool; fl must not be used
// afterwards (decoded rows hold copies, never references).
func (fl *fastLang) release() {
	for _, l := range fl.leaves {
		// Drop references to page and dictionary buffers. Only [0, len) was
		// written since the last release (reads write values from index 0
		// up; on an error len is still the whole resized length), the rest
		// of the capacity is already zero: clearing it again costs a GC
		// write barrier per element while the GC runs (17% of the stream's
		// CPU on the 300k-frame benchmark dataset).
		clear(l.bytes)
		clear(l.dict)
		l.bytes, l.dict, l.idx, l.f32, l.f64 = l.bytes[:0], l.dict[:0], l.idx[:0], l.f32[:0], l.f64[:0]
		leafPool.Put(l)
	}
	fl.leaves, fl.ref, fl.byField = nil, nil, [6]*fastLeaf{}
}

// isNullLogical reports whether a leaf carries the Null logical type (an
// Arrow null-typed field).
func isNullLogical(col *pqschema.Column) bool {
	switch col.LogicalType().(type) {
	case pqschema.NullLogicalType, *pqschema.NullLogicalType:
		return true
	}
	return false
}

// Allocation bounds against corrupt footers, far above anything a robot
// dataset writes (a 16M-frame row group is 150 hours at 30 fps).
const (
	maxRowGroupRows = 1 << 24
	maxChunkValues  = 1 << 25
)

// flatColumn reports whether leaf c is a top-level, non-repeated column of
// a physical type readFlat handles.
func flatColumn(md *metadata.FileMetaData, c int) bool {
	col := md.Schema.Column(c)
	if col.MaxRepetitionLevel() != 0 || col.MaxDefinitionLevel() > 1 || len(col.ColumnPath()) != 1 {
		return false
	}
	switch col.PhysicalType() {
	case parquet.Types.Int64, parquet.Types.Int32, parquet.Types.Float, parquet.Types.Double:
		return true
	}
	return false
}

// readFlat reads a flat column chunk (see flatColumn) with the low-level
// reader into an Arrow array, through the page path (readFlatPages) unless
// pages is not nil (see readFastLang). Nulls are an error: no core column
// may have them.
func readFlat(rdr *file.Reader, pages *pageView, rg, c int, nrows int64) (arrow.Array, error) {
	ccm, err := rdr.MetaData().RowGroup(rg).ColumnChunk(c)
	if err != nil {
		return nil, err
	}
	if n := ccm.NumValues(); n != nrows {
		return nil, fmt.Errorf("%d values for %d rows", n, nrows)
	}
	if nrows < 0 || nrows > maxRowGroupRows {
		return nil, fmt.Errorf("implausible row count %d", nrows)
	}
	if pages != nil {
		if a, ok := readFlatPages(pages, rg, c, ccm, nrows); ok {
			return a, nil
		}
	}
	ccr, err := rdr.RowGroup(rg).Column(c)
	if err != nil {
		return nil, err
	}
	def := make([]int16, nrows)
	var (
		total int64
		nv    int
		buf   []byte
		dt    arrow.DataType
	)
	switch r := ccr.(type) {
	case *file.Int64ColumnChunkReader:
		v := make([]int64, nrows)
		total, nv, err = readChunk(r.ReadBatch, nrows, v, def, nil)
		buf, dt = arrow.Int64Traits.CastToBytes(v), arrow.PrimitiveTypes.Int64
	case *file.Int32ColumnChunkReader:
		v := make([]int32, nrows)
		total, nv, err = readChunk(r.ReadBatch, nrows, v, def, nil)
		buf, dt = arrow.Int32Traits.CastToBytes(v), arrow.PrimitiveTypes.Int32
	case *file.Float32ColumnChunkReader:
		v := make([]float32, nrows)
		total, nv, err = readChunk(r.ReadBatch, nrows, v, def, nil)
		buf, dt = arrow.Float32Traits.CastToBytes(v), arrow.PrimitiveTypes.Float32
	case *file.Float64ColumnChunkReader:
		v := make([]float64, nrows)
		total, nv, err = readChunk(r.ReadBatch, nrows, v, def, nil)
		buf, dt = arrow.Float64Traits.CastToBytes(v), arrow.PrimitiveTypes.Float64
	default:
		return nil, errors.New("unexpected physical type")
	}
	if err != nil {
		return nil, err
	}
	if total != nrows {
		return nil, fmt.Errorf("read %d of %d values", total, nrows)
	}
	if int64(nv) != nrows {
		return nil, fmt.Errorf("%d null values", nrows-int64(nv))
	}
	data := array.NewData(dt, int(nrows), []*memory.Buffer{nil, memory.NewBufferBytes(buf)}, nil, 0, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// listColumn reports whether leaf c is the element of a top-level list of
// numbers that readList handles: float, double, or plain signed 32/64-bit
// integers (narrower integers and unsigned ones keep pqarrow, which maps
// them to their exact Arrow types).
func listColumn(md *metadata.FileMetaData, c int) bool {
	col := md.Schema.Column(c)
	path := col.ColumnPath()
	if len(path) != 3 || path[1] != "list" || path[2] != "element" || col.MaxRepetitionLevel() != 1 {
		return false
	}
	switch col.PhysicalType() {
	case parquet.Types.Float, parquet.Types.Double:
		return col.LogicalType() == nil || col.LogicalType().Equals(pqschema.NoLogicalType{})
	case parquet.Types.Int64, parquet.Types.Int32:
		lt := col.LogicalType()
		if lt == nil || lt.Equals(pqschema.NoLogicalType{}) {
			return true
		}
		it, ok := lt.(pqschema.IntLogicalType)
		if !ok {
			return false
		}
		want := int8(32)
		if col.PhysicalType() == parquet.Types.Int64 {
			want = 64
		}
		return it.IsSigned() && it.BitWidth() == want
	}
	return false
}

// readList reads a list column (see listColumn) with the low-level reader
// into an Arrow list array, through the page path (readListPages) unless
// pages is not nil (see readFastLang). ok is false, and the caller uses pqarrow, when
// the column is not plain (a null or empty list, a null element) or
// cannot be read: pqarrow then gives the precise error.
func readList(rdr *file.Reader, pages *pageView, rg, c int, nrows int64) (_ arrow.Array, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	col := rdr.MetaData().Schema.Column(c)
	ccm, err := rdr.MetaData().RowGroup(rg).ColumnChunk(c)
	if err != nil {
		return nil, false
	}
	n := ccm.NumValues()
	if n < 0 || n > maxChunkValues || n > 4096*ccm.TotalCompressedSize()+1024 || nrows < 0 || nrows > maxRowGroupRows {
		return nil, false
	}
	if pages != nil {
		if a, ok := readListPages(pages, rg, c, ccm, nrows, n); ok {
			return a, true
		}
	}
	ccr, err := rdr.RowGroup(rg).Column(c)
	if err != nil {
		return nil, false
	}
	def, rep := make([]int16, n), make([]int16, n)
	var (
		total int64
		nv    int
		buf   []byte
		dt    arrow.DataType
	)
	read := func(f func(int64, []int16, []int16) (int64, int, error)) bool {
		for total < n {
			lvls, vals, err := f(n-total, def[total:], rep[total:])
			if err != nil || lvls == 0 {
				return false
			}
			total, nv = total+lvls, nv+vals
		}
		return true
	}
	switch r := ccr.(type) {
	case *file.Float32ColumnChunkReader:
		v := make([]float32, n)
		ok = read(func(k int64, d, p []int16) (int64, int, error) { return r.ReadBatch(k, v[nv:], d, p) })
		buf, dt = arrow.Float32Traits.CastToBytes(v), arrow.PrimitiveTypes.Float32
	case *file.Float64ColumnChunkReader:
		v := make([]float64, n)
		ok = read(func(k int64, d, p []int16) (int64, int, error) { return r.ReadBatch(k, v[nv:], d, p) })
		buf, dt = arrow.Float64Traits.CastToBytes(v), arrow.PrimitiveTypes.Float64
	case *file.Int64ColumnChunkReader:
		v := make([]int64, n)
		ok = read(func(k int64, d, p []int16) (int64, int, error) { return r.ReadBatch(k, v[nv:], d, p) })
		buf, dt = arrow.Int64Traits.CastToBytes(v), arrow.PrimitiveTypes.Int64
	case *file.Int32ColumnChunkReader:
		v := make([]int32, n)
		ok = read(func(k int64, d, p []int16) (int64, int, error) { return r.ReadBatch(k, v[nv:], d, p) })
		buf, dt = arrow.Int32Traits.CastToBytes(v), arrow.PrimitiveTypes.Int32
	default:
		return nil, false
	}
	if !ok || total != n || int64(nv) != n {
		return nil, false // nulls or empty lists: leave them to pqarrow
	}
	if countLevel(def, col.MaxDefinitionLevel()) != n {
		return nil, false // a null or empty list, or a null element
	}
	return newListArray(dt, buf, rep, nrows)
}

// readChunk reads a column chunk with read (a typed ReadBatch) until n
// levels are read or the chunk ends, filling vals, def and rep (nil for a
// flat column) from their starts. It returns the levels and values read.
func readChunk[T any](read func(int64, []T, []int16, []int16) (int64, int, error), n int64, vals []T, def, rep []int16) (int64, int, error) {
	var total int64
	var nv int
	for total < n {
		var r []int16
		if rep != nil {
			r = rep[total:]
		}
		lvls, got, err := read(n-total, vals[nv:], def[total:], r)
		if err != nil {
			return total, nv, err
		}
		if lvls == 0 {
			break
		}
		total += lvls
		nv += got
	}
	return total, nv, nil
}
