package shard

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/schema"
)

// footerOf splits a parquet file into its body and decoded footer.
func footerOf(t testing.TB, data []byte) ([]byte, *format.FileMetaData) {
	t.Helper()
	n := len(data)
	flen := int(binary.LittleEndian.Uint32(data[n-8:]))
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[n-8-flen:n-8], &md); err != nil {
		t.Fatal(err)
	}
	return data[:n-8-flen], &md
}

// withFooter returns body followed by the footer md.
func withFooter(t testing.TB, body []byte, md *format.FileMetaData) []byte {
	t.Helper()
	fb, err := thrift.Marshal(new(thrift.CompactProtocol), md)
	if err != nil {
		t.Fatal(err)
	}
	out := append(append([]byte(nil), body...), fb...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(fb)))
	return append(out, "PAR1"...)
}

// leafElem returns the schema element of the named top-level leaf.
func leafElem(md *format.FileMetaData, name string) *format.SchemaElement {
	for i := range md.Schema {
		if md.Schema[i].Name == name && md.Schema[i].Type.Valid {
			return &md.Schema[i]
		}
	}
	return nil
}

// TestReadFooterRejects: footers that parquet-go would misread or crash
// on are errors saying what is wrong, before any column is read.
func TestReadFooterRejects(t *testing.T) {
	seed := smallDataFile(t, inferredDir(t))
	body, _ := footerOf(t, seed)
	edit := func(f func(md *format.FileMetaData)) []byte {
		_, md := footerOf(t, seed)
		f(md)
		return withFooter(t, body, md)
	}
	huge := append([]byte(nil), seed...)
	binary.LittleEndian.PutUint32(huge[len(huge)-8:], 1<<31)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not a parquet file (0 bytes)"},
		{"no magic", append(append([]byte(nil), seed[:len(seed)-4]...), "PAR2"...), `ends with "PAR2"`},
		{"encrypted", append(append([]byte(nil), seed[:len(seed)-4]...), "PARE"...), "encrypted"},
		{"footer longer than the file", huge, "exceeds the"},
		{"negative row count", edit(func(md *format.FileMetaData) { md.RowGroups[0].NumRows = -1 }), "negative"},
		{"chunk past the end", edit(func(md *format.FileMetaData) { md.RowGroups[1].Columns[0].MetaData.TotalCompressedSize = 1 << 40 }), "outside the 18289-byte file"},
		{"negative chunk offset", edit(func(md *format.FileMetaData) {
			md.RowGroups[0].Columns[2].MetaData.DataPageOffset = -5
			md.RowGroups[0].Columns[2].MetaData.DictionaryPageOffset = 0
		}), "outside the"},
		{"dictionary after data", edit(func(md *format.FileMetaData) {
			m := &md.RowGroups[0].Columns[0].MetaData
			m.DictionaryPageOffset = m.DataPageOffset + 1
		}), "dictionary page offset"},
		{"column chunk elsewhere", edit(func(md *format.FileMetaData) { md.RowGroups[0].Columns[1].FilePath = "other.parquet" }), "another file"},
		{"invalid physical type", edit(func(md *format.FileMetaData) { leafElem(md, ColIndex).Type.V = 9 }), "invalid physical type 9"},
		{"string on int64", edit(func(md *format.FileMetaData) {
			leafElem(md, ColIndex).LogicalType = format.LogicalType{Value: &format.StringType{}}
		}), "column index: type STRING on physical type INT64"},
		{"fixed_len_byte_array without length", edit(func(md *format.FileMetaData) {
			e := leafElem(md, ColIndex)
			e.Type.V = format.FixedLenByteArray
			e.TypeLength.Valid = false
		}), "invalid fixed_len_byte_array length"},
		{"missing column chunk", edit(func(md *format.FileMetaData) {
			md.RowGroups[1].Columns = md.RowGroups[1].Columns[:len(md.RowGroups[1].Columns)-1]
		}), "row group 1: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readFooter(bytes.NewReader(c.data), int64(len(c.data)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
	// The unedited footer reads back.
	ft, err := readFooter(bytes.NewReader(seed), int64(len(seed)))
	if err != nil {
		t.Fatal(err)
	}
	if ft.numRowGroups() != 2 || ft.leafIndex(ColIndex) < 0 || ft.leafIndex(schemaPersistent) >= 0 {
		t.Fatalf("%d row groups, index leaf %d", ft.numRowGroups(), ft.leafIndex(ColIndex))
	}
}

const schemaPersistent = "language_persistent"

// TestCheckFooterThrift: lengths that do not fit in the footer, deep
// nesting and trailing bytes are refused before parquet-go decodes the
// footer; real footers pass, with their shape.
func TestCheckFooterThrift(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "unexpected end"},
		{"stop only", []byte{0}, ""},
		{"huge schema list", []byte{0x29, 0xfc, 0xff, 0xff, 0xff, 0x07}, "exceeds"},
		{"huge binary", []byte{0x18, 0xff, 0xff, 0xff, 0xff, 0x07}, "exceeds"},
		{"huge map", []byte{0x1b, 0xff, 0xff, 0x03, 0x88}, "exceeds"},
		{"list of ints as row groups", []byte{0x49, 0x15, 0x02, 0x00}, "want structs"},
		{"deep nesting", append(bytes.Repeat([]byte{0x1c}, 40), bytes.Repeat([]byte{0}, 41)...), "nested more than"},
		{"trailing bytes", []byte{0, 0}, "1 bytes after its end"},
		{"invalid type", []byte{0x1d}, "invalid thrift type 13"},
		{"long varint", append([]byte{0x16}, bytes.Repeat([]byte{0xff}, 11)...), "varint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := checkFooterThrift(c.b)
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	n := 0
	for _, dir := range append(conformanceDatasets(t), filepath.Join(sharedDir(t), "datasets", "real", "SamueleSandrini__record-test")) {
		filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || !strings.HasSuffix(path, ".parquet") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, md := footerOf(t, data)
			flen := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
			shape, err := checkFooterThrift(data[len(data)-8-flen : len(data)-8])
			if err != nil {
				t.Errorf("%s: %v", path, err)
				return nil
			}
			if len(shape.rgColumns) != len(md.RowGroups) {
				t.Errorf("%s: %d row groups, want %d", path, len(shape.rgColumns), len(md.RowGroups))
			}
			if _, err := readFooter(bytes.NewReader(data), int64(len(data))); err != nil {
				t.Errorf("%s: %v", path, err)
			}
			n++
			return nil
		})
	}
	if n < 10 {
		t.Fatalf("only %d parquet files checked", n)
	}
}

// FuzzReadFooter feeds footers to readFooter: errors are fine; panics,
// crashes and runaway allocations are not. An accepted footer's column
// chunks lie inside the file.
func FuzzReadFooter(f *testing.F) {
	seed := smallDataFile(f, inferredDir(f))
	f.Add(seed)
	tasks, _ := os.ReadFile(filepath.Join(inferredDir(f), TasksPath))
	f.Add(tasks)
	flip := append([]byte(nil), seed...)
	for i := len(flip) - 300; i < len(flip)-8; i += 17 {
		flip[i] ^= 0x40
	}
	f.Add(flip)
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ft, err := readFooter(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if len(ft.shape.rgSpans) != ft.numRowGroups() {
			t.Fatalf("thrift walk found %d row groups, parquet-go %d", len(ft.shape.rgSpans), ft.numRowGroups())
		}
		// The feature/schema agreement check reads any footer's columns
		// without panicking.
		for name := range ft.topLevel() {
			sc := storedColumn(ft, name)
			for _, d := range []string{"float32", "string", "image"} {
				_ = schema.CheckStored(schema.Feature{Name: name, DType: d, Shape: []int{3}}, sc)
			}
		}
		l := ft.shape.rgList
		for rg := 0; rg < ft.numRowGroups(); rg++ {
			for _, r := range ft.ranges(allLeaves(ft), []int{rg}) {
				if r.Off < 0 || r.Len < 0 || r.Off+r.Len > int64(len(data)) {
					t.Fatalf("row group %d: range %+v outside the %d-byte file", rg, r, len(data))
				}
			}
			// The footer of this row group alone (what a unit planned
			// through a Footers reads with) parses to the same row group.
			one, err := parseFooter(unitTail(ft.raw[:l[0]], ft.unitRowGroup(rg), ft.raw[l[1]:]), int64(len(data)))
			if err != nil {
				t.Fatalf("row group %d alone: %v", rg, err)
			}
			if one.numRowGroups() != 1 || len(one.leaves) != len(ft.leaves) {
				t.Fatalf("row group %d alone: %d row groups, %d leaves", rg, one.numRowGroups(), len(one.leaves))
			}
			a, b := *ft.rowGroup(rg), *one.rowGroup(0)
			a.Ordinal, b.Ordinal = 0, 0
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("row group %d alone parses differently", rg)
			}
		}
	})
}

func allLeaves(ft *footer) []int {
	out := make([]int, len(ft.leaves))
	for i := range out {
		out[i] = i
	}
	return out
}

// tableFile writes a one-table parquet file in two row groups.
func tableFile(t testing.TB, fields []arrow.Field, cols []arrow.Array) fstest.MapFS {
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(cols[0].Len()))
	data := writeParquet(t, rec, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(2), parquet.WithStats(true)), pqarrow.NewArrowWriterProperties())
	return fstest.MapFS{"t.parquet": {Data: data}}
}

// TestTableColumns reads typed columns of small tables: every integer
// width, floats, strings and lists of strings, over row groups, with the
// errors each kind of wrong column gives.
func TestTableColumns(t *testing.T) {
	mem := memory.DefaultAllocator
	ctx := context.Background()
	build := func(typ arrow.DataType, vals ...any) arrow.Array {
		b := array.NewBuilder(mem, typ)
		for _, v := range vals {
			if v == nil {
				b.AppendNull()
				continue
			}
			if err := b.AppendValueFromString(v.(string)); err != nil {
				t.Fatal(err)
			}
		}
		return b.NewArray()
	}
	list := func(rows ...[]string) arrow.Array {
		b := array.NewListBuilder(mem, arrow.BinaryTypes.String)
		sb := b.ValueBuilder().(*array.StringBuilder)
		for _, r := range rows {
			if r == nil {
				b.AppendNull()
				continue
			}
			b.Append(true)
			for _, s := range r {
				sb.Append(s)
			}
		}
		return b.NewArray()
	}
	ints := []arrow.DataType{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
		arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64}
	var fields []arrow.Field
	var cols []arrow.Array
	add := func(name string, a arrow.Array) {
		fields = append(fields, arrow.Field{Name: name, Type: a.DataType(), Nullable: true})
		cols = append(cols, a)
	}
	for _, typ := range ints {
		add("i_"+typ.String(), build(typ, "0", "1", "7", "100", "5"))
	}
	add("u32_big", build(arrow.PrimitiveTypes.Uint32, "4294967295", "0", "1", "2", "3"))
	add("u64_big", build(arrow.PrimitiveTypes.Uint64, "1", "18446744073709551615", "1", "2", "3"))
	add("i_null", build(arrow.PrimitiveTypes.Int64, "1", nil, "3", nil, "5"))
	add("f32", build(arrow.PrimitiveTypes.Float32, "0.5", "1", "2", "3", "4"))
	add("f64", build(arrow.PrimitiveTypes.Float64, "0.25", "1", "2", "3", "-4"))
	add("s", build(arrow.BinaryTypes.String, "a", "", "c", "d", "é"))
	add("s_null", build(arrow.BinaryTypes.String, "a", nil, "c", "d", "e"))
	add("bin", build(arrow.BinaryTypes.Binary, "YQ==", "Yg==", "Yw==", "ZA==", "ZQ=="))
	add("l", list([]string{"x", "y"}, nil, []string{}, []string{"z"}, []string{"p", "q", "r"}))
	src := fetch.NewFS("t", tableFile(t, fields, cols))
	p, err := openTable(ctx, src, "t.parquet", []string{"s", "l"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.numRowGroups() != 3 {
		t.Fatalf("%d row groups", p.numRowGroups())
	}
	for _, typ := range ints {
		got, err := p.readInts("i_"+typ.String(), p.allRowGroups())
		if err != nil || !reflect.DeepEqual(got, []int64{0, 1, 7, 100, 5}) {
			t.Errorf("%s: %v, %v", typ, got, err)
		}
	}
	if got, err := p.readInts("u32_big", []int{0}); err != nil || !reflect.DeepEqual(got, []int64{4294967295, 0}) {
		t.Errorf("uint32: %v, %v", got, err)
	}
	if got, err := p.readInts("i_int64", []int{2}); err != nil || !reflect.DeepEqual(got, []int64{5}) {
		t.Errorf("one row group: %v, %v", got, err)
	}
	if got, err := p.readFloats("f32"); err != nil || got[0] != 0.5 || len(got) != 5 {
		t.Errorf("float32: %v, %v", got, err)
	}
	if got, err := p.readFloats("f64"); err != nil || got[0] != 0.25 || got[4] != -4 {
		t.Errorf("float64: %v, %v", got, err)
	}
	if got, err := p.readStrings("s"); err != nil || !reflect.DeepEqual(got, []string{"a", "", "c", "d", "é"}) {
		t.Errorf("strings: %q, %v", got, err)
	}
	if got, err := p.readStringLists("l"); err != nil || !reflect.DeepEqual(got, [][]string{{"x", "y"}, nil, nil, {"z"}, {"p", "q", "r"}}) {
		t.Errorf("lists: %q, %v", got, err)
	}
	if got, err := p.readStringLists("s_null"); err != nil || !reflect.DeepEqual(got, [][]string{{"a"}, nil, {"c"}, {"d"}, {"e"}}) {
		t.Errorf("string as lists: %q, %v", got, err)
	}
	for _, c := range []struct {
		name string
		read func() error
		want string
	}{
		{"uint64 overflow", func() error { _, err := p.readInts("u64_big", p.allRowGroups()); return err }, "overflows int64"},
		{"null ints", func() error { _, err := p.readInts("i_null", p.allRowGroups()); return err }, "2 null values"},
		{"float as int", func() error { _, err := p.readInts("f64", p.allRowGroups()); return err }, "want an integer"},
		{"string as int", func() error { _, err := p.readInts("s", p.allRowGroups()); return err }, "want an integer"},
		{"list as int", func() error { _, err := p.readInts("l", p.allRowGroups()); return err }, "want a primitive column"},
		{"missing", func() error { _, err := p.readInts("nope", p.allRowGroups()); return err }, "missing column"},
		{"int as float", func() error { _, err := p.readFloats("i_int64"); return err }, "want a float"},
		{"binary as string", func() error { _, err := p.readStrings("bin"); return err }, "want string"},
		{"null strings", func() error { _, err := p.readStrings("s_null"); return err }, "1 null values"},
		{"int as list", func() error { _, err := p.readStringLists("i_int64"); return err }, "want list<string>"},
	} {
		if err := c.read(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// imageFile writes a data file with an image feature (struct<bytes, path>)
// in row groups of two frames; frame 3's image is null, frame 4's bytes.
func imageFile(t testing.TB) ([]byte, [][]byte) {
	mem := memory.DefaultAllocator
	imgType := arrow.StructOf(arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.Binary, Nullable: true}, arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true})
	sb := array.NewStructBuilder(mem, imgType)
	ib := array.NewInt64Builder(mem)
	var imgs [][]byte
	for i := 0; i < 5; i++ {
		ib.Append(int64(100 + i))
		img := []byte(strings.Repeat(string(rune('a'+i)), i+1))
		switch i {
		case 3:
			sb.AppendNull()
			img = nil
		case 4:
			sb.Append(true)
			sb.FieldBuilder(0).AppendNull()
			sb.FieldBuilder(1).(*array.StringBuilder).Append("x.png")
			img = nil
		default:
			sb.Append(true)
			sb.FieldBuilder(0).(*array.BinaryBuilder).Append(img)
			sb.FieldBuilder(1).(*array.StringBuilder).Append("x.png")
		}
		imgs = append(imgs, img)
	}
	s := arrow.NewSchema([]arrow.Field{{Name: ColIndex, Type: arrow.PrimitiveTypes.Int64}, {Name: "observation.images.top", Type: imgType, Nullable: true}}, nil)
	rec := array.NewRecordBatch(s, []arrow.Array{ib.NewArray(), sb.NewArray()}, 5)
	return writeParquet(t, rec, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(2)), pqarrow.NewArrowWriterProperties()), imgs
}

func TestReadImageBytes(t *testing.T) {
	data, imgs := imageFile(t)
	src := fetch.NewFS("imgs", fstest.MapFS{"d.parquet": {Data: data}})
	ctx := context.Background()
	key := "observation.images.top"
	for rg := 0; rg < 3; rg++ {
		got, err := ReadImageBytes(ctx, src, "d.parquet", rg, []string{key})
		if err != nil {
			t.Fatal(err)
		}
		want := map[int64][]byte{}
		for i := 2 * rg; i < min(2*rg+2, 5); i++ {
			if imgs[i] != nil {
				want[int64(100+i)] = imgs[i]
			}
		}
		if !reflect.DeepEqual(got[key], want) {
			t.Errorf("row group %d: %v, want %v", rg, got[key], want)
		}
	}
	for _, c := range []struct {
		name string
		rg   int
		keys []string
		want []string
	}{
		{"no such row group", 3, []string{key}, []string{"d.parquet row group 3", "no such row group (the file has 3)"}},
		{"no such feature", 0, []string{"observation.images.side"}, []string{"d.parquet row group 0", "column observation.images.side.bytes", "missing column"}},
		{"not an image struct", 0, []string{ColIndex}, []string{"column index.bytes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadImageBytes(ctx, src, "d.parquet", c.rg, c.keys)
			wantErr(t, err, c.want...)
		})
	}
	// Corrupt files: an error naming the file, never a panic.
	for i := 0; i < len(data); i += 7 {
		d := append([]byte(nil), data...)
		d[i] ^= 0xff
		src := fetch.NewFS("imgs", fstest.MapFS{"d.parquet": {Data: d}})
		if _, err := ReadImageBytes(ctx, src, "d.parquet", 1, []string{key}); err != nil {
			var se *Error
			if !errors.As(err, &se) || se.File != "d.parquet" {
				t.Fatalf("flip at %d: %v is not a *shard.Error naming the file", i, err)
			}
		}
	}
}

// TestMetadataCorruptionSweep flips bytes across meta/tasks.parquet and
// the episodes index and opens the dataset: errors name the file; never a
// panic. Accepted corruptions keep the index consistent (OpenDataset
// checks it).
func TestMetadataCorruptionSweep(t *testing.T) {
	base := metaFS(t)
	ctx := context.Background()
	stride := 59
	if testing.Short() {
		stride = 197
	}
	n := 0
	for _, name := range []string{TasksPath, "meta/episodes/chunk-000/file-000.parquet"} {
		seed := base[name].Data
		for i := 0; i < len(seed); i += stride {
			d := append([]byte(nil), seed...)
			d[i] ^= 0x5a
			fsys := withFile(base, name, d)
			_, err := OpenDatasetWith(ctx, fetch.NewFS("sweep", fsys), OpenOptions{Tolerate: func(error) {}})
			var se *Error
			if err != nil && (!errors.As(err, &se) || se.File != name && !strings.HasPrefix(se.File, EpisodesDir)) {
				t.Fatalf("%s flip at %d: %v does not name the file", name, i, err)
			}
			n++
		}
	}
	t.Logf("%d corrupted metadata files opened without a panic", n)
}

// TestCheckCodec: the codecs parquet-go decodes correctly are accepted;
// LZ4_RAW (decoded wrongly by parquet-go v0.32 when a page compresses less
// than 3×), Hadoop LZ4 and LZO are refused with what to do instead.
func TestCheckCodec(t *testing.T) {
	for _, tc := range []struct {
		codec format.CompressionCodec
		want  string // "" = accepted
	}{
		{format.Uncompressed, ""}, {format.Snappy, ""}, {format.Gzip, ""}, {format.Brotli, ""}, {format.Zstd, ""},
		{format.Lz4Raw, "LZ4_RAW compression is not read"},
		{format.Lz4, "compression LZ4 is not supported"},
		{format.LZO, "compression LZO is not supported"},
	} {
		err := checkCodec(tc.codec)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.codec, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "snappy")):
			t.Errorf("%s: %v, want %q and a codec to use", tc.codec, err, tc.want)
		}
	}
}
