package schema

import "fmt"

// StoredColumn is how a data file stores one top-level column: what its
// parquet schema and column chunk metadata say, without reading data. The
// data-file reader (package shard) builds it from a footer; CheckStored
// compares it with the info.json feature.
type StoredColumn struct {
	// Type is the leaf's value type named as info.json names dtypes:
	// "bool", "int8" … "int64", "uint8" … "uint64", "float16", "float32",
	// "float64" (numeric leaves, from the physical type and its INT /
	// FLOAT16 annotation, as pyarrow writes them); "string" (BYTE_ARRAY
	// annotated STRING, or its legacy UTF8); "binary" (another BYTE_ARRAY
	// or FIXED_LEN_BYTE_ARRAY); "image" (a struct with a BYTE_ARRAY
	// "bytes" field, as datasets.Image writes it); "struct" (any other
	// group); or another parquet type's name.
	Type string
	// Lists is the number of list levels above the leaf (0: one value per
	// row).
	Lists int
	// Values and Rows are the leaf's value count (nulls and empty lists
	// included, as parquet counts them) and the rows, summed over the row
	// groups; Values is -1 when unknown (a struct).
	Values, Rows int64
}

// Describe renders the stored type for errors: list<float32>,
// list<list<uint8>>, string, struct<…>.
func (c StoredColumn) Describe() string {
	s := c.Type
	for i := 0; i < c.Lists; i++ {
		s = "list<" + s + ">"
	}
	return s
}

// storedTypes says, for each dtype info.json may declare, which stored
// value types agree with it. A numeric dtype agrees with every stored type
// of its kind (floats, integers, bool): LeRobotDataset loads the data files
// with info.json's features (datasets' Dataset.from_parquet casts each
// column to its declared type) and then makes tensors as torch.tensor
// does, so a float64 column declared float32 reaches training as float32
// and an int32 index as int64 — the dtypes lrstream emits from the stored
// type (collate.EmittedDType). Across kinds (an index declared float32 but
// stored as integers, bools as ints) the values would differ: refused.
var storedTypes = map[string][]string{
	"bool":    {"bool"},
	"float16": floatTypes, "float32": floatTypes, "float64": floatTypes,
	"int8": intTypes, "int16": intTypes, "int32": intTypes, "int64": intTypes,
	"uint8": intTypes, "uint16": intTypes, "uint32": intTypes, "uint64": intTypes,
	DTypeString: {"string"},
	DTypeImage:  {"image"},
}

var (
	floatTypes = []string{"float16", "float32", "float64"}
	intTypes   = []string{"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
)

// CheckStored returns an error when a data file's column disagrees with
// the feature info.json declares for it: a different value type (action
// declared "string", stored as list<float32>), a string or image stored
// as a list, or a numeric feature whose rows do not hold the values its
// shape says (shape [7] over 6-wide lists, [1] over lists). The error
// names the feature and both types; the caller adds the file. Video and
// language features, and dtypes Info.Check refuses, are not checked here.
func CheckStored(f Feature, c StoredColumn) error {
	if f.IsLanguage() || f.DType == DTypeVideo {
		return nil
	}
	ok, known := storedTypes[f.DType]
	if !known {
		return nil
	}
	declared := f.DType
	if f.Shape != nil {
		declared += fmt.Sprintf(" shape %v", f.Shape)
	}
	bad := func(why string) error {
		return fmt.Errorf("feature %q: info.json declares %s, the data file stores %s: %s", f.Name, declared, c.Describe(), why)
	}
	match := false
	for _, t := range ok {
		match = match || c.Type == t
	}
	if !match {
		return bad("the types differ")
	}
	if !f.IsNumeric() {
		if c.Lists > 0 {
			return bad("one value per frame is declared, lists are stored")
		}
		return nil
	}
	want := int64(1)
	for _, d := range f.Shape {
		want *= int64(d) // bounded by Info.Check (MaxFeatureValues)
	}
	if c.Values < 0 || c.Rows <= 0 {
		return nil
	}
	if c.Values != want*c.Rows {
		per := fmt.Sprintf("%.4g", float64(c.Values)/float64(c.Rows))
		if c.Values%c.Rows == 0 {
			per = fmt.Sprint(c.Values / c.Rows)
		}
		return bad(fmt.Sprintf("%s values per frame are stored (%d in %d rows), the shape says %d", per, c.Values, c.Rows, want))
	}
	return nil
}
