package shard

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lrstream/lrstream/schema"
)

// stringArray is implemented by arrow's String, LargeString and
// StringView arrays.
type stringArray interface {
	arrow.Array
	Value(int) string
}

// listArray abstracts arrow List and LargeList arrays.
type listArray struct {
	arr    arrow.Array
	offs32 []int32
	offs64 []int64
	values arrow.Array
}

func asList(a arrow.Array) (listArray, bool) {
	switch l := a.(type) {
	case *array.List:
		return listArray{arr: a, offs32: l.Offsets(), values: l.ListValues()}, true
	case *array.LargeList:
		return listArray{arr: a, offs64: l.Offsets(), values: l.ListValues()}, true
	}
	return listArray{}, false
}

// bounds returns the value range of list element i; a null list is empty.
func (l listArray) bounds(i int) (int, int) {
	if l.arr.IsNull(i) {
		return 0, 0
	}
	if l.offs32 != nil {
		return int(l.offs32[i]), int(l.offs32[i+1])
	}
	return int(l.offs64[i]), int(l.offs64[i+1])
}

// langColumn decodes one language column (language_persistent or
// language_events) of one row group.
type langColumn struct {
	name       string
	persistent bool
	list       listArray
	// st is the struct of rows; nil when the element type is null (a file
	// without any row), in which case every list must be empty or null.
	st                           *array.Struct
	role, content, style, camera stringArray // nil: missing or null-typed
	ts32                         *array.Float32
	ts64                         *array.Float64
	tc                           toolCallsColumn
}

// toolCallsColumn decodes the tool_calls field.
type toolCallsColumn struct {
	list listArray
	// exactly one of the following is set when list is set
	text  stringArray // JSON text elements (list<string> or arrow.json)
	elems arrow.Array // struct (or other) elements, written as JSON values
}

func unwrapExt(a arrow.Array) arrow.Array {
	if e, ok := a.(array.ExtensionArray); ok {
		return e.Storage()
	}
	return a
}

// binaryText reads a binary array's values as text (arrow.json storage
// read back from parquet may be binary).
type binaryText struct{ *array.Binary }

func (b binaryText) Value(i int) string { return string(b.Binary.Value(i)) }

type largeBinaryText struct{ *array.LargeBinary }

func (b largeBinaryText) Value(i int) string { return string(b.LargeBinary.Value(i)) }

// isJSONText reports whether a holds JSON text: strings, binary (the
// parquet JSON logical type may read back as binary), or the arrow.json
// extension type over either.
func isJSONText(a arrow.Array) (stringArray, bool) {
	if s, ok := isString(a); ok {
		return s, true
	}
	switch b := unwrapExt(a).(type) {
	case *array.Binary:
		return binaryText{b}, true
	case *array.LargeBinary:
		return largeBinaryText{b}, true
	}
	return nil, false
}

// dictString reads a dictionary<int, string> array (language string leaves
// are read as dictionaries: the indices are decoded, the strings are not
// copied per value).
type dictString struct {
	*array.Dictionary
	dict stringArray
}

func (d dictString) Value(i int) string { return d.dict.Value(d.GetValueIndex(i)) }

func isString(a arrow.Array) (stringArray, bool) {
	if d, ok := a.(*array.Dictionary); ok {
		if s, ok := isString(d.Dictionary()); ok {
			return dictString{Dictionary: d, dict: s}, true
		}
		if s, ok := isJSONText(d.Dictionary()); ok {
			return dictString{Dictionary: d, dict: s}, true
		}
		return nil, false
	}
	switch s := unwrapExt(a).(type) {
	case *array.String:
		return s, true
	case *array.LargeString:
		return s, true
	case *array.StringView:
		return s, true
	}
	return nil, false
}

// newLangColumn checks the column's type and binds its arrays.
func newLangColumn(name string, a arrow.Array) (*langColumn, error) {
	c := &langColumn{name: name, persistent: name == schema.ColumnPersistent}
	if a.DataType().ID() == arrow.NULL {
		return c, nil // all null: every frame has an empty list
	}
	l, ok := asList(a)
	if !ok {
		return nil, fmt.Errorf("unexpected type %s, want list<struct<role, content, style, ...>>", a.DataType())
	}
	c.list = l
	switch st := l.values.(type) {
	case *array.Null:
		return c, nil
	case *array.Struct:
		c.st = st
	default:
		return nil, fmt.Errorf("unexpected type %s, want list<struct<role, content, style, ...>>", a.DataType())
	}
	stt := c.st.DataType().(*arrow.StructType)
	for i, f := range stt.Fields() {
		child := c.st.Field(i)
		isNull := child.DataType().ID() == arrow.NULL
		var err error
		switch f.Name {
		case "role", "content", "style", "camera":
			if isNull {
				continue
			}
			s, ok := isString(child)
			if !ok {
				err = fmt.Errorf("field %s has type %s, want string", f.Name, f.Type)
				break
			}
			switch f.Name {
			case "role":
				c.role = s
			case "content":
				c.content = s
			case "style":
				c.style = s
			case "camera":
				c.camera = s
			}
		case "timestamp":
			if isNull || !c.persistent {
				continue
			}
			switch t := child.(type) {
			case *array.Float32:
				c.ts32 = t
			case *array.Float64:
				c.ts64 = t
			default:
				err = fmt.Errorf("field timestamp has type %s, want float32 or float64", f.Type)
			}
		case "tool_calls":
			if isNull {
				continue
			}
			tl, ok := asList(child)
			if !ok {
				err = fmt.Errorf("field tool_calls has type %s, want a list", f.Type)
				break
			}
			c.tc.list = tl
			if s, ok := isJSONText(tl.values); ok {
				c.tc.text = s
			} else {
				if err2 := checkJSONable(tl.values.DataType()); err2 != nil {
					err = fmt.Errorf("field tool_calls has type %s: %w", f.Type, err2)
					break
				}
				c.tc.elems = tl.values
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// checkJSONable reports whether values of type t can be written as JSON.
func checkJSONable(t arrow.DataType) error {
	switch t := t.(type) {
	case *arrow.NullType, *arrow.BooleanType,
		*arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type,
		*arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type,
		*arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType,
		*arrow.BinaryType, *arrow.LargeBinaryType:
		return nil
	case *arrow.StructType:
		for _, f := range t.Fields() {
			if err := checkJSONable(f.Type); err != nil {
				return err
			}
		}
		return nil
	case *arrow.ListType:
		return checkJSONable(t.Elem())
	case *arrow.LargeListType:
		return checkJSONable(t.Elem())
	case *arrow.FixedSizeListType:
		return checkJSONable(t.Elem())
	case arrow.ExtensionType:
		return checkJSONable(t.StorageType())
	}
	return fmt.Errorf("unsupported type %s", t)
}

// frameLen returns the number of rows of frame i.
func (c *langColumn) frameLen(i int) int {
	if c.list.arr == nil {
		return 0
	}
	b, e := c.list.bounds(i)
	return e - b
}

// decodeFrame decodes the rows of frame i.
func (c *langColumn) decodeFrame(i int, buf *jsonBuf) ([]schema.Row, error) {
	if c.list.arr == nil {
		return nil, nil
	}
	b, e := c.list.bounds(i)
	if b == e {
		return nil, nil
	}
	if c.st == nil {
		return nil, fmt.Errorf("%d rows of null type", e-b)
	}
	rows := make([]schema.Row, e-b)
	for j := b; j < e; j++ {
		if err := c.decodeRow(j, &rows[j-b], buf); err != nil {
			return nil, fmt.Errorf("row %d: %w", j-b, err)
		}
	}
	return rows, nil
}

func optString(a stringArray, j int) *string {
	if a == nil || a.IsNull(j) {
		return nil
	}
	s := strings.Clone(a.Value(j))
	return &s
}

func (c *langColumn) decodeRow(j int, r *schema.Row, buf *jsonBuf) error {
	if c.st.IsNull(j) {
		return errors.New("null row")
	}
	if c.role != nil && !c.role.IsNull(j) {
		r.Role = strings.Clone(c.role.Value(j))
	}
	r.Content = optString(c.content, j)
	r.Style = optString(c.style, j)
	r.Camera = optString(c.camera, j)
	if c.persistent {
		switch {
		case c.ts32 != nil && !c.ts32.IsNull(j):
			r.Timestamp, r.HasTimestamp = float64(c.ts32.Value(j)), true
		case c.ts64 != nil && !c.ts64.IsNull(j):
			// LeRobot's declared feature is float32: cast, then widen.
			r.Timestamp, r.HasTimestamp = float64(float32(c.ts64.Value(j))), true
		}
	}
	if c.tc.list.arr != nil && !c.tc.list.arr.IsNull(j) {
		tc, err := c.tc.decode(j, buf)
		if err != nil {
			return fmt.Errorf("tool_calls: %w", err)
		}
		r.ToolCalls = tc
	}
	return nil
}

// decode writes row j's tool_calls as a JSON array.
func (t *toolCallsColumn) decode(j int, buf *jsonBuf) (json.RawMessage, error) {
	b, e := t.list.bounds(j)
	buf.b = append(buf.b[:0], '[')
	for k := b; k < e; k++ {
		if k > b {
			buf.b = append(buf.b, ',')
		}
		if t.text != nil {
			if t.text.IsNull(k) {
				buf.b = append(buf.b, "null"...)
				continue
			}
			if err := buf.appendCompactJSON(t.text.Value(k)); err != nil {
				return nil, fmt.Errorf("element %d: %w", k-b, err)
			}
			continue
		}
		if err := buf.appendValue(t.elems, k); err != nil {
			return nil, fmt.Errorf("element %d: %w", k-b, err)
		}
	}
	buf.b = append(buf.b, ']')
	return json.RawMessage(bytes.Clone(buf.b)), nil
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

// appendValue writes element i of a as a JSON value: structs become
// objects with every field in type order, lists arrays, nulls null.
func (w *jsonBuf) appendValue(a arrow.Array, i int) error {
	if a.IsNull(i) {
		w.b = append(w.b, "null"...)
		return nil
	}
	switch a := a.(type) {
	case *array.Null:
		w.b = append(w.b, "null"...)
	case *array.Boolean:
		w.b = strconv.AppendBool(w.b, a.Value(i))
	case *array.Int8:
		w.b = strconv.AppendInt(w.b, int64(a.Value(i)), 10)
	case *array.Int16:
		w.b = strconv.AppendInt(w.b, int64(a.Value(i)), 10)
	case *array.Int32:
		w.b = strconv.AppendInt(w.b, int64(a.Value(i)), 10)
	case *array.Int64:
		w.b = strconv.AppendInt(w.b, a.Value(i), 10)
	case *array.Uint8:
		w.b = strconv.AppendUint(w.b, uint64(a.Value(i)), 10)
	case *array.Uint16:
		w.b = strconv.AppendUint(w.b, uint64(a.Value(i)), 10)
	case *array.Uint32:
		w.b = strconv.AppendUint(w.b, uint64(a.Value(i)), 10)
	case *array.Uint64:
		w.b = strconv.AppendUint(w.b, a.Value(i), 10)
	case *array.Float16:
		w.appendFloat(float64(a.Value(i).Float32()))
	case *array.Float32:
		w.appendFloat(float64(a.Value(i)))
	case *array.Float64:
		w.appendFloat(a.Value(i))
	case *array.String:
		w.appendString(a.Value(i))
	case *array.LargeString:
		w.appendString(a.Value(i))
	case *array.StringView:
		w.appendString(a.Value(i))
	case *array.Binary:
		w.appendString(base64.StdEncoding.EncodeToString(a.Value(i)))
	case *array.LargeBinary:
		w.appendString(base64.StdEncoding.EncodeToString(a.Value(i)))
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		w.b = append(w.b, '{')
		for k, f := range st.Fields() {
			if k > 0 {
				w.b = append(w.b, ',')
			}
			w.appendString(f.Name)
			w.b = append(w.b, ':')
			if err := w.appendValue(a.Field(k), i); err != nil {
				return err
			}
		}
		w.b = append(w.b, '}')
	case *array.List, *array.LargeList:
		l, _ := asList(a)
		b, e := l.bounds(i)
		if err := w.appendRange(l.values, b, e); err != nil {
			return err
		}
	case *array.FixedSizeList:
		n := int(a.DataType().(*arrow.FixedSizeListType).Len())
		off := a.Offset()
		if err := w.appendRange(a.ListValues(), (off+i)*n, (off+i+1)*n); err != nil {
			return err
		}
	case array.ExtensionArray:
		if a.ExtensionType().ExtensionName() == "arrow.json" {
			if s, ok := isJSONText(a); ok {
				return w.appendCompactJSON(s.Value(i))
			}
		}
		return w.appendValue(a.Storage(), i)
	default:
		return fmt.Errorf("unsupported type %s", a.DataType())
	}
	return nil
}

func (w *jsonBuf) appendRange(a arrow.Array, b, e int) error {
	w.b = append(w.b, '[')
	for k := b; k < e; k++ {
		if k > b {
			w.b = append(w.b, ',')
		}
		if err := w.appendValue(a, k); err != nil {
			return err
		}
	}
	w.b = append(w.b, ']')
	return nil
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

// equalRows reports whether rows [ab, ae) and [bb, be) of the column are
// identical (same fields, same values, same nulls). It is the cheap check
// that lets ReadUnit decode an episode's persistent list once: one pass
// over the offsets and one memcmp per string field.
func (c *langColumn) equalRows(ab, ae, bb, be int) bool {
	n := ae - ab
	if n != be-bb {
		return false
	}
	if c.st == nil || n == 0 {
		return true
	}
	if !equalNulls(c.st, ab, bb, n) ||
		!equalStrRange(c.role, ab, bb, n) || !equalStrRange(c.content, ab, bb, n) ||
		!equalStrRange(c.style, ab, bb, n) || !equalStrRange(c.camera, ab, bb, n) {
		return false
	}
	if c.ts32 != nil {
		v := c.ts32.Float32Values()
		for k := 0; k < n; k++ {
			if math.Float32bits(v[ab+k]) != math.Float32bits(v[bb+k]) {
				return false
			}
		}
		if !equalNulls(c.ts32, ab, bb, n) {
			return false
		}
	}
	if c.ts64 != nil {
		v := c.ts64.Float64Values()
		for k := 0; k < n; k++ {
			if math.Float64bits(v[ab+k]) != math.Float64bits(v[bb+k]) {
				return false
			}
		}
		if !equalNulls(c.ts64, ab, bb, n) {
			return false
		}
	}
	if c.tc.list.arr != nil {
		for k := 0; k < n; k++ {
			if !c.tc.equal(ab+k, bb+k) {
				return false
			}
		}
	}
	return true
}

// equalNulls compares the validity of n entries starting at i and j.
func equalNulls(a arrow.Array, i, j, n int) bool {
	if a.NullN() == 0 {
		return true
	}
	for k := 0; k < n; k++ {
		if a.IsNull(i+k) != a.IsNull(j+k) {
			return false
		}
	}
	return true
}

// equalStrRange compares n strings starting at i and j.
func equalStrRange(a stringArray, i, j, n int) bool {
	if a == nil {
		return true
	}
	if !equalNulls(a, i, j, n) {
		return false
	}
	s, ok := a.(*array.String)
	if !ok {
		for k := 0; k < n; k++ {
			if !equalStr(a, i+k, j+k) {
				return false
			}
		}
		return true
	}
	offs := s.ValueOffsets()
	for k := 0; k < n; k++ {
		if offs[i+k+1]-offs[i+k] != offs[j+k+1]-offs[j+k] {
			return false
		}
	}
	buf := s.Data().Buffers()[2]
	if buf == nil {
		return true
	}
	vb := buf.Bytes()
	return bytes.Equal(vb[offs[i]:offs[i+n]], vb[offs[j]:offs[j+n]])
}

func equalStr(a stringArray, i, j int) bool {
	if a == nil {
		return true
	}
	ni, nj := a.IsNull(i), a.IsNull(j)
	if ni || nj {
		return ni == nj
	}
	return a.Value(i) == a.Value(j)
}

func (t *toolCallsColumn) equal(i, j int) bool {
	ni, nj := t.list.arr.IsNull(i), t.list.arr.IsNull(j)
	if ni || nj {
		return ni == nj
	}
	ab, ae := t.list.bounds(i)
	bb, be := t.list.bounds(j)
	if ae-ab != be-bb {
		return false
	}
	if ae == ab {
		return true
	}
	if t.text != nil {
		for k := 0; k < ae-ab; k++ {
			if !equalStr(t.text, ab+k, bb+k) {
				return false
			}
		}
		return true
	}
	return array.SliceEqual(t.elems, int64(ab), int64(ae), t.elems, int64(bb), int64(be))
}
