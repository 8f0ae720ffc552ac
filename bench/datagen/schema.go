package datagen

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// langShape records which language fields are non-null somewhere in a
// file; the inferred schema types a field that is null in every row as
// Arrow null, and a column without any row as list<null>.
type langShape struct {
	rows, content, style, camera, tools bool
}

func (s *langShape) add(r langRow) {
	s.rows = true
	s.content = s.content || !r.noContent
	s.style = s.style || r.style != ""
	s.camera = s.camera || r.camera != ""
	s.tools = s.tools || r.say != ""
}

// fileShape is the shape of both language columns of one data file.
type fileShape struct{ persistent, events langShape }

func (s *fileShape) addEpisode(el *episodeLang) {
	for _, r := range el.persistent {
		s.persistent.add(r)
	}
	for _, ef := range el.events {
		for _, r := range ef.rows {
			s.events.add(r)
		}
	}
}

func listOf(t arrow.DataType) arrow.DataType {
	return arrow.ListOfField(arrow.Field{Name: "element", Type: t, Nullable: true})
}

// inferredToolCallType is pyarrow's inference of
// [{"type": "function", "function": {"name": "say", "arguments": {"text": ...}}}].
var inferredToolCallType = arrow.StructOf(
	arrow.Field{Name: "type", Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: "function", Type: arrow.StructOf(
		arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "arguments", Type: arrow.StructOf(
			arrow.Field{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
		), Nullable: true},
	), Nullable: true},
)

// sortedStruct returns t with the fields of every nested struct sorted by
// name, as pyarrow 21–23 inferred them.
func sortedStruct(t arrow.DataType) arrow.DataType {
	switch x := t.(type) {
	case *arrow.StructType:
		fs := slices.Clone(x.Fields())
		for i := range fs {
			fs[i].Type = sortedStruct(fs[i].Type)
		}
		slices.SortFunc(fs, func(a, b arrow.Field) int { return strings.Compare(a.Name, b.Name) })
		return arrow.StructOf(fs...)
	case *arrow.ListType:
		f := x.ElemField()
		f.Type = sortedStruct(f.Type)
		return arrow.ListOfField(f)
	}
	return t
}

var jsonExtType = func() arrow.DataType {
	t, err := extensions.NewJSONType(arrow.BinaryTypes.String)
	if err != nil {
		panic(err)
	}
	return t
}()

// langType returns the Arrow type of a language column.
func langType(v Variant, persistent bool, s langShape) arrow.DataType {
	if v == VariantDocumented || v == VariantJSONExt {
		var call arrow.DataType = arrow.BinaryTypes.String
		if v == VariantJSONExt {
			call = jsonExtType
		}
		fs := []arrow.Field{
			{Name: "role", Type: arrow.BinaryTypes.String},
			{Name: "content", Type: arrow.BinaryTypes.String, Nullable: true},
			{Name: "style", Type: arrow.BinaryTypes.String, Nullable: true},
		}
		if persistent {
			fs = append(fs, arrow.Field{Name: "timestamp", Type: arrow.PrimitiveTypes.Float32})
		}
		fs = append(fs,
			arrow.Field{Name: "camera", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "tool_calls", Type: listOf(call), Nullable: true})
		return listOf(arrow.StructOf(fs...))
	}
	if !s.rows {
		return listOf(arrow.Null)
	}
	str := func(present bool) arrow.DataType {
		if present {
			return arrow.BinaryTypes.String
		}
		return arrow.Null
	}
	fs := []arrow.Field{
		{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "content", Type: str(s.content), Nullable: true},
		{Name: "style", Type: str(s.style), Nullable: true},
	}
	if persistent {
		fs = append(fs, arrow.Field{Name: "timestamp", Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	}
	fs = append(fs, arrow.Field{Name: "camera", Type: str(s.camera), Nullable: true})
	var tools arrow.DataType = arrow.Null
	if s.tools {
		tools = listOf(inferredToolCallType)
	}
	fs = append(fs, arrow.Field{Name: "tool_calls", Type: tools, Nullable: true})
	var t arrow.DataType = arrow.StructOf(fs...)
	if v == VariantInferredSorted {
		t = sortedStruct(t)
	}
	return listOf(t)
}

// dataSchema is the Arrow schema of a data file.
func dataSchema(o *Options, s fileShape) *arrow.Schema {
	vec := arrow.FixedSizeListOfField(int32(o.Dim), arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Float32, Nullable: true})
	fs := []arrow.Field{
		{Name: "action", Type: vec, Nullable: true},
		{Name: "observation.state", Type: vec, Nullable: true},
		{Name: "timestamp", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "frame_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "episode_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "task_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}
	if o.Density != DensityNone {
		fs = append(fs,
			arrow.Field{Name: "language_persistent", Type: langType(o.Variant, true, s.persistent), Nullable: true},
			arrow.Field{Name: "language_events", Type: langType(o.Variant, false, s.events), Nullable: true})
	}
	return arrow.NewSchema(fs, nil)
}

// sayJSON is the documented variant's JSON text of a say tool call, as
// Python's json.dumps writes it.
func sayJSON(text string) string {
	t, _ := json.Marshal(text) // a string always marshals
	return `{"type": "function", "function": {"name": "say", "arguments": {"text": ` + string(t) + `}}}`
}

// langAppender appends language rows to one language column builder.
type langAppender struct {
	list    *array.ListBuilder
	st      *array.StructBuilder // nil for list<null>
	role    strAppender
	content strAppender
	style   strAppender
	camera  strAppender
	ts32    *array.Float32Builder
	ts64    *array.Float64Builder
	// tool_calls
	tlist    *array.ListBuilder // nil when the field is Arrow null
	tnull    *array.NullBuilder
	tjson    *array.StringBuilder // documented
	tcall    *array.StructBuilder // inferred
	ttype    *array.StringBuilder
	tfn      *array.StructBuilder
	tname    *array.StringBuilder
	targs    *array.StructBuilder
	targText *array.StringBuilder
}

// strAppender appends to a utf8 or an Arrow null field.
type strAppender struct {
	s *array.StringBuilder
	n *array.NullBuilder
}

func newStrAppender(b array.Builder) strAppender {
	if s, ok := b.(*array.StringBuilder); ok {
		return strAppender{s: s}
	}
	return strAppender{n: b.(*array.NullBuilder)}
}

func (a strAppender) add(v string, null bool) {
	switch {
	case a.n != nil:
		a.n.AppendNull()
	case null:
		a.s.AppendNull()
	default:
		a.s.Append(v)
	}
}

// structField returns the builder of a struct field by name.
func structField(st *array.StructBuilder, name string) array.Builder {
	i, ok := st.Type().(*arrow.StructType).FieldIdx(name)
	if !ok {
		panic("datagen: no struct field " + name)
	}
	return st.FieldBuilder(i)
}

func newLangAppender(b array.Builder, persistent bool) *langAppender {
	la := &langAppender{list: b.(*array.ListBuilder)}
	st, ok := la.list.ValueBuilder().(*array.StructBuilder)
	if !ok {
		return la // list<null>
	}
	la.st = st
	la.role = newStrAppender(structField(st, "role"))
	la.content = newStrAppender(structField(st, "content"))
	la.style = newStrAppender(structField(st, "style"))
	if persistent {
		switch tb := structField(st, "timestamp").(type) {
		case *array.Float32Builder:
			la.ts32 = tb
		case *array.Float64Builder:
			la.ts64 = tb
		}
	}
	la.camera = newStrAppender(structField(st, "camera"))
	switch tb := structField(st, "tool_calls").(type) {
	case *array.NullBuilder:
		la.tnull = tb
	case *array.ListBuilder:
		la.tlist = tb
		switch vb := tb.ValueBuilder().(type) {
		case *array.StringBuilder:
			la.tjson = vb
		case *array.ExtensionBuilder:
			la.tjson = vb.StorageBuilder().(*array.StringBuilder)
		case *array.StructBuilder:
			la.tcall = vb
			la.ttype = structField(vb, "type").(*array.StringBuilder)
			la.tfn = structField(vb, "function").(*array.StructBuilder)
			la.tname = structField(la.tfn, "name").(*array.StringBuilder)
			la.targs = structField(la.tfn, "arguments").(*array.StructBuilder)
			la.targText = structField(la.targs, "text").(*array.StringBuilder)
		}
	}
	return la
}

// appendList appends one frame's list of rows.
func (la *langAppender) appendList(rows []langRow, fps int) {
	la.list.Append(true)
	if la.st == nil {
		return
	}
	for i := range rows {
		r := &rows[i]
		la.st.Append(true)
		la.role.add(r.role, false)
		la.content.add(r.content, r.noContent)
		la.style.add(r.style, r.style == "")
		if la.ts32 != nil {
			la.ts32.Append(frameTime(r.frame, fps))
		} else if la.ts64 != nil {
			la.ts64.Append(float64(frameTime(r.frame, fps)))
		}
		la.camera.add(r.camera, r.camera == "")
		switch {
		case la.tnull != nil:
			la.tnull.AppendNull()
		case r.say == "":
			la.tlist.AppendNull()
		case la.tjson != nil:
			la.tlist.Append(true)
			la.tjson.Append(sayJSON(r.say))
		default:
			la.tlist.Append(true)
			la.tcall.Append(true)
			la.ttype.Append("function")
			la.tfn.Append(true)
			la.tname.Append("say")
			la.targs.Append(true)
			la.targText.Append(r.say)
		}
	}
}

// appendEmpty appends n empty lists.
func (la *langAppender) appendEmpty(n int) {
	for range n {
		la.list.Append(true)
	}
}

// reserve grows the builders for n frames that all carry rows.
func (la *langAppender) reserve(n int, rows []langRow) {
	la.list.Reserve(n)
	if la.st == nil || len(rows) == 0 {
		return
	}
	la.st.Reserve(n * len(rows))
	var role, content, style, camera int
	for i := range rows {
		role += len(rows[i].role)
		content += len(rows[i].content)
		style += len(rows[i].style)
		camera += len(rows[i].camera)
	}
	for _, x := range []struct {
		a     strAppender
		bytes int
	}{{la.role, role}, {la.content, content}, {la.style, style}, {la.camera, camera}} {
		if x.a.s != nil {
			x.a.s.Reserve(n * len(rows))
			x.a.s.ReserveData(n * x.bytes)
		}
	}
}
