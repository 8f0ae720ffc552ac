package shard

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"

	"github.com/lrstream/lrstream/internal/half"
	"github.com/lrstream/lrstream/schema"
)

// A language column (list<struct<role, content, style, timestamp, camera,
// tool_calls>>) read through parquet-go: every leaf keeps its decoded
// levels and, per value, an index into a table of values that aliases
// the pages' buffers (a dictionary page's values enter the table once per
// column chunk, so the indices of an episode's repeated persistent list
// repeat too). Frames are assembled straight from the levels.

// pqValueKind says how a leaf's values are written.
type pqValueKind uint8

const (
	pqNull   pqValueKind = iota // null-typed: always null
	pqString                    // UTF-8 / JSON text
	pqBinary                    // bytes, written as base64
	pqBool
	pqInt
	pqUint
	pqFloat // float32 or float64 by width
	pqFloat16
)

// pqLangLeaf is one leaf column of a language column, for one row group.
type pqLangLeaf struct {
	col            *parquet.Column
	kind           pqValueKind
	maxRep, maxDef int
	rep, def       []byte    // per entry (nil when the max level is 0)
	idx            []int32   // per value, into vals
	vals           [][]byte  // the value table, aliasing page buffers
	rowStart       []int32   // per row, first entry (nrows+1)
	strs           []*string // str's strings, per value table entry
	cache          *stringCache
	// valAt's cursor: the values before entry curE (see valAt)
	curE, curV     int
	entries, nulls int            // level entries, and those without a value
	nidx           int            // values (len(idx) once read)
	ident          bool           // while reading: idx is 0..nidx-1, not yet materialised
	lazy           bool           // idx holds indices not checked against vals (see at)
	pages          []parquet.Page // held while rep, def, idx or vals alias them
	// cursors while a frame is assembled
	cur, vcur int
	// own holds the leaf's buffers (levels and indices of chunks of
	// several pages, row starts), kept for its next row group (langPool)
	own struct {
		rep, def      []byte
		idx, rowStart []int32
	}
}

// reset forgets the leaf's row group, keeping its own buffers.
func (l *pqLangLeaf) reset() {
	clear(l.vals[:cap(l.vals)]) // no references into released pages
	clear(l.strs[:cap(l.strs)])
	own, vals, strs, pages, cache := l.own, l.vals[:0], l.strs[:0], l.pages[:0], l.cache
	*l = pqLangLeaf{col: l.col, kind: l.kind, maxRep: l.maxRep, maxDef: l.maxDef}
	l.own, l.vals, l.strs, l.pages, l.cache = own, vals, strs, pages, cache
}

func (l *pqLangLeaf) repAt(e int) int {
	if l.rep == nil {
		return 0
	}
	return int(l.rep[e])
}

func (l *pqLangLeaf) defAt(e int) int {
	if l.def == nil {
		return l.maxDef
	}
	return int(l.def[e])
}

// pqNode is a node of the column's schema tree with its levels.
type pqNode struct {
	col              *parquet.Column
	name             string
	defLevel, repLvl int
	optional         bool
	leaf             *pqLangLeaf // leaves only
	fields           []*pqNode   // structs
	elem             *pqNode     // lists: the element
	listDef, listRep int         // lists: levels of the repeated node
	first            *pqLangLeaf // first leaf under the node
}

// pqLang is a language column of one row group.
type pqLang struct {
	name                             string
	persistent                       bool
	root                             *pqNode
	leaves                           []*pqLangLeaf
	rowLen                           []int32 // rows (list elements) per frame
	row                              *pqNode // the list's element: the struct of a row (nil: null-typed)
	role, content, style, camera, ts *pqNode
	toolCalls                        *pqNode
	others                           []*pqNode // fields walked and dropped
	scratch                          jsonBuf
	tcText                           bool // tool_calls elements are JSON text
}

func pqLeafKind(pf *parquet.File, c *parquet.Column) (pqValueKind, error) {
	t := c.Type()
	lt := t.LogicalType()
	if lt == nil || lt.Value == nil {
		lt = pqSchemaLogical(pf, c.Index())
	}
	var ltv any
	if lt != nil {
		ltv = lt.Value
	}
	switch v := ltv.(type) {
	case *format.NullType:
		return pqNull, nil
	case *format.StringType, *format.JsonType, *format.EnumType:
		if t.Kind() == parquet.ByteArray {
			return pqString, nil
		}
	case *format.Float16Type:
		if t.Kind() == parquet.FixedLenByteArray && t.Length() == 2 {
			return pqFloat16, nil
		}
	case *format.IntType:
		if v.IsSigned {
			return pqInt, nil
		}
		return pqUint, nil
	}
	if ct := t.ConvertedType(); ct != nil {
		switch *ct {
		case deprecated.UTF8, deprecated.Json, deprecated.Enum:
			return pqString, nil
		case deprecated.Uint8, deprecated.Uint16, deprecated.Uint32, deprecated.Uint64:
			return pqUint, nil
		}
	}
	switch t.Kind() {
	case parquet.Boolean:
		return pqBool, nil
	case parquet.Int32, parquet.Int64:
		return pqInt, nil
	case parquet.Float, parquet.Double:
		return pqFloat, nil
	case parquet.ByteArray:
		return pqBinary, nil
	}
	return 0, fmt.Errorf("leaf %s has unsupported type %s", c.Name(), t)
}

// pqTypeName names the type of column c for errors.
func pqTypeName(pf *parquet.File, c *parquet.Column) string {
	if !c.Leaf() {
		return "group"
	}
	if dt, _, err := pqDType(c.Type(), pqSchemaLogical(pf, c.Index())); err == nil {
		return dtypeName(dt)
	}
	return c.Type().String()
}

// pqTree builds the node tree of c.
func pqTree(pf *parquet.File, c *parquet.Column, def, rep int, leaves *[]*pqLangLeaf) (*pqNode, error) {
	n := &pqNode{col: c, name: c.Name(), optional: c.Optional()}
	if c.Optional() || c.Repeated() {
		def++
	}
	if c.Repeated() {
		rep++
	}
	n.defLevel, n.repLvl = def, rep
	if c.Leaf() {
		kind, err := pqLeafKind(pf, c)
		if err != nil {
			return nil, err
		}
		l := &pqLangLeaf{col: c, kind: kind, maxRep: c.MaxRepetitionLevel(), maxDef: c.MaxDefinitionLevel()}
		if l.maxRep != rep || l.maxDef != def {
			return nil, fmt.Errorf("leaf %s: inconsistent levels", c.Name())
		}
		n.leaf, n.first = l, l
		*leaves = append(*leaves, l)
		return n, nil
	}
	kids := c.Columns()
	if len(kids) == 1 && kids[0].Repeated() && !c.Repeated() {
		// a list: group { repeated group list { element } }
		rc := kids[0]
		n.listDef, n.listRep = def+1, rep+1
		if !rc.Leaf() && len(rc.Columns()) == 1 {
			e, err := pqTree(pf, rc.Columns()[0], def+1, rep+1, leaves)
			if err != nil {
				return nil, err
			}
			n.elem = e
		} else {
			// legacy two-level list: the repeated node is the element
			e, err := pqTree(pf, rc, def, rep, leaves)
			if err != nil {
				return nil, err
			}
			e.optional = false
			n.elem = e
		}
		n.first = n.elem.first
		return n, nil
	}
	if c.Repeated() {
		return nil, fmt.Errorf("group %s: repeated group outside a list", c.Name())
	}
	for _, k := range kids {
		f, err := pqTree(pf, k, def, rep, leaves)
		if err != nil {
			return nil, err
		}
		n.fields = append(n.fields, f)
	}
	if len(n.fields) == 0 {
		return nil, fmt.Errorf("group %s has no fields", c.Name())
	}
	n.first = n.fields[0].first
	return n, nil
}

// pqReadLang reads language column name of row group rg. The caller
// hands the result back with g.langs.put once the batch is built.
func pqReadLang(g *pqGroup, name string, nrows int) (_ *pqLang, err error) {
	pf := g.pf
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt column chunk: %v", r)
		}
	}()
	fl := g.langs.get(name) // the file's tree and buffers, from an earlier unit
	if fl == nil {
		fl = &pqLang{name: name, persistent: name == schema.ColumnPersistent}
		root, err := pqTree(pf, pf.Root().Column(name), 0, 0, &fl.leaves)
		if err != nil {
			return nil, err
		}
		fl.root = root
	}
	defer func() {
		if err != nil {
			fl.release() // not kept: a corrupt chunk may have left anything
		}
	}()
	root, c := fl.root, fl.root.col
	if err := fl.readLeaves(g, nrows); err != nil {
		return nil, err
	}
	fl.rowLen = slices.Grow(fl.rowLen[:0], nrows)[:nrows]
	clear(fl.rowLen)
	if root.leaf != nil && root.leaf.kind == pqNull {
		return fl, nil // all null: every frame is empty
	}
	if root.elem == nil || root.listRep != 1 {
		return nil, fmt.Errorf("unexpected type %s, want list<struct<role, content, style, ...>>", pqTypeName(pf, c))
	}
	fl.countMessages(nrows)
	row := root.elem
	if row.leaf != nil && row.leaf.kind == pqNull {
		return fl, nil // list<null>
	}
	if row.fields == nil {
		return nil, fmt.Errorf("unexpected type list<%s>, want list<struct<role, content, style, ...>>", pqTypeName(pf, row.col))
	}
	fl.row = row
	if err := fl.bindFields(); err != nil {
		return nil, err
	}
	return fl, nil
}

// readLeaves reads and indexes the column chunks of every leaf of the
// column.
func (fl *pqLang) readLeaves(g *pqGroup, nrows int) error {
	for i, l := range fl.leaves {
		l.cache = g.strs
		if err := l.read(g); err != nil {
			return fmt.Errorf("leaf %s: %w", l.col.Name(), err)
		}
		if err := l.index(nrows, fl.leaves[:i]); err != nil {
			return fmt.Errorf("leaf %s: %w", l.col.Name(), err)
		}
	}
	return nil
}

// countMessages sets rowLen: the number of messages in each row's list
// (0 for a null or empty list).
func (fl *pqLang) countMessages(nrows int) {
	root := fl.root
	l := root.first
	for r := 0; r < nrows; r++ {
		s, e := int(l.rowStart[r]), int(l.rowStart[r+1])
		if l.defAt(s) < root.listDef {
			continue
		}
		if l.maxRep == 1 {
			fl.rowLen[r] = int32(e - s)
			continue
		}
		n := int32(0)
		for k := s; k < e; k++ {
			if l.repAt(k) <= 1 {
				n++
			}
		}
		fl.rowLen[r] = n
	}
}

// bindFields binds the message struct's fields: role, content, style,
// camera, timestamp (language_persistent only) and tool_calls, checking
// their types; null-typed and unknown fields go to others.
func (fl *pqLang) bindFields() error {
	row := fl.row
	for _, f := range row.fields {
		fl.others = append(fl.others, f)
		switch f.name {
		case "role", "content", "style", "camera":
			if f.leaf == nil || (f.leaf.kind != pqString && f.leaf.kind != pqNull && f.leaf.kind != pqBinary) {
				return fmt.Errorf("field %s has type %s, want string", f.name, f.col.Type())
			}
			if f.leaf.kind == pqNull {
				continue
			}
			fl.others = fl.others[:len(fl.others)-1]
			*map[string]**pqNode{"role": &fl.role, "content": &fl.content, "style": &fl.style, "camera": &fl.camera}[f.name] = f
		case "timestamp":
			if f.leaf != nil && f.leaf.kind == pqNull || !fl.persistent {
				continue
			}
			if f.leaf == nil || f.leaf.kind != pqFloat {
				return fmt.Errorf("field timestamp has type %s, want float32 or float64", f.col.Type())
			}
			fl.ts = f
			fl.others = fl.others[:len(fl.others)-1]
		case "tool_calls":
			if f.leaf != nil && f.leaf.kind == pqNull {
				continue
			}
			if f.elem == nil {
				return fmt.Errorf("field tool_calls has type %s, want a list", f.col.Type())
			}
			fl.toolCalls = f
			fl.others = fl.others[:len(fl.others)-1]
			if e := f.elem.leaf; e != nil && (e.kind == pqString || e.kind == pqBinary) {
				fl.tcText = true
			}
		}
	}
	return nil
}

// read decodes the leaf's pages. A chunk of one data page (the usual
// case) is not copied: the leaf's levels and dictionary indices alias the
// page's buffers, and the page is held until release. Rows and values are
// indexed afterwards (index), once per distinct level sequence.
func (l *pqLangLeaf) read(g *pqGroup) error {
	pages := g.pages(l.col.Index())
	defer pages.Close()
	st := leafReadState{total: int(g.numValues(l.col.Index()))}
	l.ident = true
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		l.pages = append(l.pages, p)
		values, err := l.readLevels(p, st.total)
		if err != nil {
			return err
		}
		if l.kind == pqNull {
			if values > 0 {
				return errors.New("values in a null-typed column")
			}
			continue
		}
		if dict := p.Dictionary(); dict != nil {
			err = l.readDictPage(p, dict, values, &st)
		} else {
			err = l.readPlainPage(p, values)
		}
		if err != nil {
			return err
		}
	}
	if l.ident && l.kind != pqNull {
		l.idx = identity(&l.own.idx, l.nidx)
	}
	return nil
}

// leafReadState is what pqLangLeaf.read carries from page to page.
type leafReadState struct {
	total    int // the chunk's values, for appendAlias
	lastDict parquet.Dictionary
	dictBase int32 // index in vals of lastDict's first value
}

// readLevels checks and appends page p's repetition and definition levels
// and returns its number of (non-null) values.
func (l *pqLangLeaf) readLevels(p parquet.Page, total int) (values int, err error) {
	n := int(p.NumValues())
	reps, defs := p.RepetitionLevels(), p.DefinitionLevels()
	if (l.maxRep > 0 && len(reps) != n) || (l.maxDef > 0 && len(defs) != n) {
		return 0, fmt.Errorf("page of %d values has %d repetition and %d definition levels", n, len(reps), len(defs))
	}
	if l.maxRep > 0 && n > 0 && l.entries == 0 && reps[0] != 0 {
		return 0, errors.New("first value continues a row")
	}
	if l.maxRep > 0 && !levelsWithin(reps, l.maxRep) || l.maxDef > 0 && !levelsWithin(defs, l.maxDef) {
		return 0, errors.New("level out of range")
	}
	values = n
	if l.maxDef > 0 {
		values = bytes.Count(defs, []byte{byte(l.maxDef)}) // vectorised
	}
	l.nulls += n - values
	if l.maxRep > 0 {
		l.rep = appendAlias(l.rep, reps, total, &l.own.rep)
	}
	if l.maxDef > 0 {
		l.def = appendAlias(l.def, defs, total, &l.own.def)
	}
	l.entries += n
	return values, nil
}

// readDictPage appends the dictionary indices of page p (and its
// dictionary's values when it is a new one).
func (l *pqLangLeaf) readDictPage(p parquet.Page, dict parquet.Dictionary, values int, st *leafReadState) error {
	if dict != st.lastDict {
		if err := l.checkLazy(); err != nil {
			return err
		}
		st.lastDict, st.dictBase = dict, int32(len(l.vals))
		l.vals = pqTable(l.vals, dict.Page().Data(), dict.Len())
	}
	data := p.Data()
	idx := data.Int32()
	if len(idx) != values {
		return fmt.Errorf("page has %d dictionary indices for %d values", len(idx), values)
	}
	if l.ident && l.nidx > 0 {
		l.idx = identity(&l.own.idx, l.nidx) // plain pages before: materialise
	}
	l.ident = false
	if st.dictBase == 0 {
		// the value table is this dictionary: the indices are checked
		// where they are used (pqLangLeaf.at), or before the table
		// grows (checkLazy)
		l.idx = appendAlias(l.idx, idx, st.total, &l.own.idx)
		l.lazy = true
	} else {
		nd := int32(dict.Len())
		if k := indexOutOf(idx, nd); k >= 0 {
			return fmt.Errorf("dictionary index %d out of range (%d values)", idx[k], nd)
		}
		for _, i := range idx {
			l.idx = append(l.idx, st.dictBase+i)
		}
	}
	l.nidx += len(idx)
	return nil
}

// readPlainPage appends the values of page p, plain-encoded, to the value
// table.
func (l *pqLangLeaf) readPlainPage(p parquet.Page, values int) error {
	if err := l.checkLazy(); err != nil {
		return err
	}
	base := int32(len(l.vals))
	l.vals = pqTable(l.vals, p.Data(), values)
	if int(int32(len(l.vals))-base) != values {
		return fmt.Errorf("page has %d values, levels say %d", int32(len(l.vals))-base, values)
	}
	if !l.ident {
		for i := int32(0); i < int32(values); i++ {
			l.idx = append(l.idx, base+i)
		}
	}
	l.nidx += values
	return nil
}

// index computes the leaf's row starts, sharing them with an earlier leaf
// of the same repetition levels (the fields of a row struct usually have
// the same).
func (l *pqLangLeaf) index(nrows int, prev []*pqLangLeaf) error {
	for _, o := range prev {
		if o.entries == l.entries && bytes.Equal(o.rep, l.rep) {
			l.rowStart = o.rowStart
			return nil
		}
	}
	if l.rep == nil {
		if l.entries != nrows {
			return fmt.Errorf("%d rows decoded, footer says %d", l.entries, nrows)
		}
		l.rowStart = identity(&l.own.rowStart, nrows+1)
		return nil
	}
	l.rowStart = slices.Grow(l.own.rowStart[:0], nrows+1)
	l.own.rowStart = l.rowStart
	for i, r := range l.rep {
		if r == 0 {
			if len(l.rowStart) == nrows {
				return fmt.Errorf("more rows than the footer's %d", nrows)
			}
			l.rowStart = append(l.rowStart, int32(i))
		}
	}
	if len(l.rowStart) != nrows {
		return fmt.Errorf("%d rows decoded, footer says %d", len(l.rowStart), nrows)
	}
	l.rowStart = append(l.rowStart, int32(l.entries))
	return nil
}

// checkLazy checks the indices not checked yet against the value table,
// before it grows.
func (l *pqLangLeaf) checkLazy() error {
	if !l.lazy {
		return nil
	}
	l.lazy = false
	if k := indexOutOf(l.idx, int32(len(l.vals))); k >= 0 {
		return fmt.Errorf("dictionary index %d out of range (%d values)", l.idx[k], len(l.vals))
	}
	return nil
}

// at returns value k of the table; an index out of range (a corrupt
// page) panics with an error, which decodeFrame returns.
func (l *pqLangLeaf) at(k int32) []byte {
	if uint32(k) >= uint32(len(l.vals)) {
		panic(fmt.Errorf("leaf %s: dictionary index %d out of range (%d values)", l.col.Name(), k, len(l.vals)))
	}
	return l.vals[k]
}

// valAt returns the index in idx of row r's first value: the row's first
// entry when no entry is null, else counted from the previous call's row
// (rows are visited in order, mostly).
func (l *pqLangLeaf) valAt(r int) int {
	e := int(l.rowStart[r])
	if l.nulls == 0 {
		return e
	}
	if e >= l.curE {
		l.curV += bytes.Count(l.def[l.curE:e], []byte{byte(l.maxDef)})
	} else {
		l.curV -= bytes.Count(l.def[e:l.curE], []byte{byte(l.maxDef)})
	}
	l.curE = e
	return l.curV
}

// release returns the leaf's pages to parquet-go's buffer pool.
func (l *pqLangLeaf) release() {
	for _, p := range l.pages {
		parquet.Release(p)
	}
	l.pages = nil
}

// appendAlias appends s to dst: the first non-empty slice is aliased
// (capped, so a later append copies it out). The copy goes to *own, the
// leaf's buffer kept across row groups, allocated when too small for
// total elements (the chunk's value count in the footer, bounded), so
// later pages append in place.
func appendAlias[T any](dst, s []T, total int, own *[]T) []T {
	if len(dst) == 0 {
		return s[:len(s):len(s)]
	}
	if len(dst)+len(s) <= cap(dst) {
		return append(dst, s...)
	}
	n := len(dst) + len(s)
	if total > n && total <= pqMaxValues {
		n = total
	}
	buf := (*own)[:0]
	if cap(buf) < n {
		// dst may be *own itself, too small: a new buffer
		buf = make([]T, 0, max(n, 2*cap(buf)))
	}
	buf = append(append(buf, dst...), s...)
	*own = buf
	return buf
}

// levelsWithin reports whether every level is at most max. Levels are
// decoded at the bit width of max, so only a max that is not 2^k-1 can
// be exceeded. Eight levels at a time: a byte b <= 127 exceeds max iff
// b + (127-max) has its high bit set (no carry into the next byte), and
// a byte >= 128 has it set already.
func levelsWithin(s []byte, max int) bool {
	if max&(max+1) == 0 {
		return true
	}
	if max > 127 {
		for _, v := range s {
			if int(v) > max {
				return false
			}
		}
		return true
	}
	k := uint64(127-max) * 0x0101010101010101
	var acc uint64
	for len(s) >= 8 {
		w := binary.LittleEndian.Uint64(s)
		acc |= w | (w + k)
		s = s[8:]
	}
	for _, v := range s {
		acc |= uint64(v) | (uint64(v) + uint64(127-max))
	}
	return acc&0x8080808080808080 == 0
}

// indexOutOf returns the position of the first index outside [0, n), or -1.
func indexOutOf(idx []int32, n int32) int {
	var m uint32 // the largest index, as unsigned (negatives are large)
	for _, i := range idx {
		m = max(m, uint32(i))
	}
	if m < uint32(n) {
		return -1
	}
	for k, i := range idx {
		if uint32(i) >= uint32(n) {
			return k
		}
	}
	return -1
}

// identity returns 0..n-1, in *own (grown when too small).
func identity(own *[]int32, n int) []int32 {
	s := slices.Grow((*own)[:0], n)[:n]
	for i := range s {
		s[i] = int32(i)
	}
	*own = s
	return s
}

// pqTable appends the n values of v to the table, aliasing v's buffers.
func pqTable(tab [][]byte, v encoding.Values, n int) [][]byte {
	if v.Kind() == encoding.ByteArray {
		data, offs := v.ByteArray()
		tab = slices.Grow(tab, max(min(n, len(offs)-1), 0))
		for i := 0; i < n && i+1 < len(offs); i++ {
			tab = append(tab, data[offs[i]:offs[i+1]:offs[i+1]])
		}
		return tab
	}
	raw, w, err := pqRaw(v, n)
	if err != nil {
		return tab
	}
	tab = slices.Grow(tab, n)
	for i := 0; i < n; i++ {
		tab = append(tab, raw[i*w:(i+1)*w:(i+1)*w])
	}
	return tab
}

// release returns the column's pages to parquet-go's buffer pool; the
// rows decoded from it stay valid (they copy what they keep).
func (fl *pqLang) release() {
	for _, l := range fl.leaves {
		l.release()
	}
}

// reset releases the column's pages and forgets its row group, keeping
// the tree and the leaves' own buffers for the file's next unit.
func (fl *pqLang) reset() {
	fl.release()
	for _, l := range fl.leaves {
		l.reset()
	}
	clear(fl.others)
	fl.others = fl.others[:0]
	fl.row, fl.role, fl.content, fl.style, fl.camera, fl.ts, fl.toolCalls = nil, nil, nil, nil, nil, nil, nil
	fl.tcText = false
}

// langPool keeps a file's language columns (their node trees and
// buffers) between the units that read it: a unit takes one (get) and
// hands it back when its batch is built (put).
type langPool struct {
	mu   sync.Mutex
	free []*pqLang
}

// langPoolKept bounds the columns a file keeps: about two language
// columns per worker.
const langPoolKept = 8

// get returns a kept column name of the file, or nil.
func (p *langPool) get(name string) *pqLang {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, fl := range p.free {
		if fl.name == name {
			p.free = slices.Delete(p.free, i, i+1)
			return fl
		}
	}
	return nil
}

// langPoolBytes bounds the buffers of a kept column: a column that read a
// large row group is left to the garbage collector instead (its buffers
// would stay as long as the file's units).
const langPoolBytes = 4 << 20

// bytes returns the size of the buffers fl keeps between row groups.
func (fl *pqLang) bytes() int {
	n := 4 * cap(fl.rowLen)
	for _, l := range fl.leaves {
		n += cap(l.own.rep) + cap(l.own.def) + 4*cap(l.own.idx) + 4*cap(l.own.rowStart) + 24*cap(l.vals) + 8*cap(l.strs)
	}
	return n
}

// put releases fl's pages and keeps it for a later unit of the file.
func (p *langPool) put(fl *pqLang) {
	fl.reset()
	if p == nil || fl.bytes() > langPoolBytes {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) < langPoolKept {
		p.free = append(p.free, fl)
	}
}

// frameLen returns the number of rows of frame r.
func (fl *pqLang) frameLen(r int) int { return int(fl.rowLen[r]) }

// sameFrames reports whether frames r1 and r2 hold identical rows.
func (fl *pqLang) sameFrames(r1, r2 int) bool {
	for _, l := range fl.leaves {
		a0, a1 := int(l.rowStart[r1]), int(l.rowStart[r1+1])
		b0, b1 := int(l.rowStart[r2]), int(l.rowStart[r2+1])
		if a1-a0 != b1-b0 {
			return false
		}
		if l.rep != nil && !bytes.Equal(l.rep[a0:a1], l.rep[b0:b1]) || l.def != nil && !bytes.Equal(l.def[a0:a1], l.def[b0:b1]) {
			return false
		}
		a, b := l.valAt(r1), l.valAt(r1+1)
		c, d := l.valAt(r2), l.valAt(r2+1)
		va, vb := l.idx[a:b], l.idx[c:d]
		if len(va) != len(vb) {
			return false
		}
		if bytes.Equal(int32Bytes(va), int32Bytes(vb)) {
			continue
		}
		for k := range va {
			if uint32(va[k]) >= uint32(len(l.vals)) || uint32(vb[k]) >= uint32(len(l.vals)) || !bytes.Equal(l.vals[va[k]], l.vals[vb[k]]) {
				return false
			}
		}
	}
	return true
}

// repeats reports whether frames r+1..end-1 all hold frame r's rows: the
// levels and value indices of rows r..end-1 are periodic with the length
// of row r (one comparison per buffer). false means "not proven".
func (fl *pqLang) repeats(r, end int) bool {
	if end-r < 2 {
		return true
	}
	for _, l := range fl.leaves {
		s, p, e := int(l.rowStart[r]), int(l.rowStart[r+1]), int(l.rowStart[end])
		if (e-s)%max(p-s, 1) != 0 || (e-s)/max(p-s, 1) != end-r {
			return false
		}
		if l.rep != nil && !periodic(l.rep[s:e], int64(p-s)) || l.def != nil && !periodic(l.def[s:e], int64(p-s)) {
			return false
		}
		vs, vp, ve := l.valAt(r), l.valAt(r+1), l.valAt(end)
		if (ve-vs)%max(vp-vs, 1) != 0 || (vp == vs && ve != vs) {
			return false
		}
		if !periodic(int32Bytes(l.idx[vs:ve]), int64(4*(vp-vs))) {
			return false
		}
		// periodic levels starting with one row of length p-s, ending at
		// rowStart[end]: the rows start at the period's boundaries
	}
	return true
}

func int32Bytes(s []int32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))
}

// decodeFrame assembles the rows of frame r, in memory taken from the
// front of *slab when it has room (else allocated).
func (fl *pqLang) decodeFrame(r int, buf *jsonBuf, slab *[]schema.Row) (rows []schema.Row, err error) {
	n := fl.frameLen(r)
	if n == 0 {
		return nil, nil
	}
	if fl.row == nil {
		return nil, fmt.Errorf("%d rows of null type", n)
	}
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok {
				rows, err = nil, fmt.Errorf("corrupt page: %w", e)
				return
			}
			rows, err = nil, fmt.Errorf("corrupt levels: %v", p)
		}
	}()
	for _, l := range fl.leaves {
		l.cur, l.vcur = int(l.rowStart[r]), l.valAt(r)
	}
	if slab != nil && len(*slab) >= n {
		rows, *slab = (*slab)[:n:n], (*slab)[n:]
	} else {
		rows = make([]schema.Row, n)
	}
	for j := range rows {
		if j > 0 {
			if l := fl.row.first; l.cur >= int(l.rowStart[r+1]) || l.repAt(l.cur) != 1 {
				return nil, errors.New("corrupt levels: fewer rows than counted")
			}
		}
		if err := fl.decodeRow(&rows[j], buf); err != nil {
			return nil, fmt.Errorf("row %d: %w", j, err)
		}
	}
	for _, l := range fl.leaves {
		if l.cur != int(l.rowStart[r+1]) {
			return nil, fmt.Errorf("corrupt levels: leaves disagree on the frame's rows (%s at %d, row ends at %d)", l.col.Path(), l.cur, l.rowStart[r+1])
		}
	}
	return rows, nil
}

// skip consumes one entry of every leaf under n (a null or empty n).
func (n *pqNode) skip() {
	if n.leaf != nil {
		if n.leaf.defAt(n.leaf.cur) == n.leaf.maxDef {
			n.leaf.vcur++
		}
		n.leaf.cur++
		return
	}
	if n.elem != nil {
		n.elem.skip()
		return
	}
	for _, f := range n.fields {
		f.skip()
	}
}

func (fl *pqLang) decodeRow(r *schema.Row, buf *jsonBuf) error {
	row := fl.row
	if row.optional && row.first.defAt(row.first.cur) < row.defLevel {
		return errors.New("null row")
	}
	if fl.role != nil {
		if s := fl.role.str(); s != nil {
			r.Role = *s
		}
	}
	r.Content = fl.content.str()
	r.Style = fl.style.str()
	r.Camera = fl.camera.str()
	if fl.ts != nil {
		if v := fl.ts.value(); v != nil {
			if len(v) == 4 {
				r.Timestamp = float64(math.Float32frombits(binary.LittleEndian.Uint32(v)))
			} else {
				r.Timestamp = float64(float32(math.Float64frombits(binary.LittleEndian.Uint64(v))))
			}
			r.HasTimestamp = true
		}
	}
	if tc := fl.toolCalls; tc != nil {
		if l := tc.first; tc.optional && l.defAt(l.cur) < tc.defLevel {
			tc.skip()
		} else {
			buf.b = buf.b[:0]
			if err := buf.appendNode(tc, fl.tcText); err != nil {
				return fmt.Errorf("tool_calls: %w", err)
			}
			r.ToolCalls = json.RawMessage(bytes.Clone(buf.b))
		}
	}
	for _, f := range fl.others {
		fl.scratch.b = fl.scratch.b[:0]
		if err := fl.scratch.appendNode(f, false); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// value consumes the next entry of leaf node n and returns its value, nil
// when null.
func (n *pqNode) value() []byte {
	l := n.leaf
	def := l.defAt(l.cur)
	l.cur++
	if def < l.maxDef {
		return nil
	}
	v := l.at(l.idx[l.vcur])
	l.vcur++
	return v
}

// str consumes the next entry of leaf node n and returns its value as a
// string, nil when null. The strings of a small value table (a dictionary)
// are made once per row group and shared by the rows that hold them.
func (n *pqNode) str() *string {
	if n == nil {
		return nil
	}
	l := n.leaf
	def := l.defAt(l.cur)
	l.cur++
	if def < l.maxDef {
		return nil
	}
	k := l.idx[l.vcur]
	l.vcur++
	v := l.at(k)
	if len(l.vals) > pqStringCache {
		s := string(v)
		return &s
	}
	if len(l.strs) != len(l.vals) {
		l.strs = slices.Grow(l.strs[:0], len(l.vals))[:len(l.vals)]
		clear(l.strs)
	}
	if p := l.strs[k]; p != nil {
		return p
	}
	p := l.cache.get(v)
	l.strs[k] = p
	return p
}

// pqStringCache bounds the value tables whose strings str shares.
const pqStringCache = 4096

// appendNode writes the next value of n as JSON; text says list elements
// of n are JSON text to compact.
func (w *jsonBuf) appendNode(n *pqNode, text bool) error {
	l := n.first
	def := l.defAt(l.cur)
	if n.optional && def < n.defLevel {
		n.skip()
		w.b = append(w.b, "null"...)
		return nil
	}
	switch {
	case n.elem != nil:
		if def < n.listDef {
			n.skip()
			w.b = append(w.b, "[]"...)
			return nil
		}
		w.b = append(w.b, '[')
		for k := 0; ; k++ {
			if k > 0 {
				w.b = append(w.b, ',')
			}
			if text {
				v := n.elem.value()
				if v == nil {
					w.b = append(w.b, "null"...)
				} else if err := w.appendCompactJSON(string(v)); err != nil {
					return fmt.Errorf("element %d: %w", k, err)
				}
			} else if err := w.appendNode(n.elem, false); err != nil {
				return fmt.Errorf("element %d: %w", k, err)
			}
			if l.cur >= len(l.rep) || l.repAt(l.cur) != n.listRep {
				break
			}
		}
		w.b = append(w.b, ']')
	case n.fields != nil:
		w.b = append(w.b, '{')
		for k, f := range n.fields {
			if k > 0 {
				w.b = append(w.b, ',')
			}
			w.appendString(f.name)
			w.b = append(w.b, ':')
			if err := w.appendNode(f, false); err != nil {
				return err
			}
		}
		w.b = append(w.b, '}')
	default:
		v := n.value()
		if v == nil {
			w.b = append(w.b, "null"...)
			return nil
		}
		w.appendLeaf(n.leaf, v)
	}
	return nil
}

func (w *jsonBuf) appendLeaf(l *pqLangLeaf, v []byte) {
	switch l.kind {
	case pqString:
		w.appendString(string(v))
	case pqBinary:
		w.appendString(base64.StdEncoding.EncodeToString(v))
	case pqBool:
		w.b = strconv.AppendBool(w.b, v[0] != 0)
	case pqInt, pqUint:
		var x uint64
		if len(v) == 4 {
			x = uint64(binary.LittleEndian.Uint32(v))
			if l.kind == pqInt {
				x = uint64(int64(int32(x)))
			}
		} else {
			x = binary.LittleEndian.Uint64(v)
		}
		if l.kind == pqInt {
			w.b = strconv.AppendInt(w.b, int64(x), 10)
		} else {
			w.b = strconv.AppendUint(w.b, x, 10)
		}
	case pqFloat:
		if len(v) == 4 {
			w.appendFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(v))))
		} else {
			w.appendFloat(math.Float64frombits(binary.LittleEndian.Uint64(v)))
		}
	case pqFloat16:
		w.appendFloat(float64(half.ToFloat32(binary.LittleEndian.Uint16(v))))
	default:
		w.b = append(w.b, "null"...)
	}
}

// jsonBuf is a reusable JSON output buffer.
type jsonBuf struct {
	b   []byte
	tmp bytes.Buffer
}

func (w *jsonBuf) appendCompactJSON(s string) error {
	w.tmp.Reset()
	if err := json.Compact(&w.tmp, []byte(s)); err != nil {
		return fmt.Errorf("invalid JSON text %q: %w", truncate(s, 80), err)
	}
	w.b = append(w.b, w.tmp.Bytes()...)
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (w *jsonBuf) appendFloat(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = strconv.AppendFloat(w.b, f, 'g', -1, 64)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string (invalid UTF-8 becomes U+FFFD).
func (w *jsonBuf) appendString(s string) {
	w.b = append(w.b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			w.b = append(w.b, s[start:i]...)
			switch c {
			case '"', '\\':
				w.b = append(w.b, '\\', c)
			case '\n':
				w.b = append(w.b, '\\', 'n')
			case '\r':
				w.b = append(w.b, '\\', 'r')
			case '\t':
				w.b = append(w.b, '\\', 't')
			default:
				w.b = append(w.b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			w.b = append(w.b, s[start:i]...)
			w.b = append(w.b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	w.b = append(w.b, s[start:]...)
	w.b = append(w.b, '"')
}

// periodic reports whether s repeats with period p (p > 0).
func periodic(s []byte, p int64) bool {
	return bytes.Equal(s[p:], s[:int64(len(s))-p])
}
