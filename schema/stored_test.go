package schema

import (
	"strings"
	"testing"
)

func TestCheckStored(t *testing.T) {
	list := func(typ string, lists int, perRow int64) StoredColumn {
		return StoredColumn{Type: typ, Lists: lists, Values: perRow * 10, Rows: 10}
	}
	tests := []struct {
		name string
		f    Feature
		c    StoredColumn
		want string // "" accepted
	}{
		{"float32 list", Feature{Name: "a", DType: "float32", Shape: []int{6}}, list("float32", 1, 6), ""},
		{"scalar shape [1]", Feature{Name: "t", DType: "float32", Shape: []int{1}}, list("float32", 0, 1), ""},
		{"list of one, shape [1]", Feature{Name: "t", DType: "float32", Shape: []int{1}}, list("float32", 1, 1), ""},
		{"nested 2x3", Feature{Name: "a", DType: "uint8", Shape: []int{2, 3}}, list("uint8", 2, 6), ""},
		{"string", Feature{Name: "s", DType: "string", Shape: []int{1}}, list("string", 0, 1), ""},
		{"image", Feature{Name: "i", DType: "image", Shape: []int{4, 4, 3}}, StoredColumn{Type: "image", Values: -1}, ""},
		{"video column ignored", Feature{Name: "v", DType: "video", Shape: []int{4, 4, 3}}, list("struct", 0, 1), ""},
		{"language ignored", Feature{Name: ColumnEvents, DType: "language"}, list("struct", 1, 1), ""},
		{"unknown row count", Feature{Name: "a", DType: "float32", Shape: []int{6}}, StoredColumn{Type: "float32", Lists: 1, Values: -1}, ""},
		{"declared string, stored floats", Feature{Name: "action", DType: "string", Shape: []int{6}}, list("float32", 1, 6),
			`feature "action": info.json declares string shape [6], the data file stores list<float32>: the types differ`},
		// Same kind: LeRobotDataset casts to the declared type, then to torch's (float32, int64).
		{"float64 stored for float32", Feature{Name: "a", DType: "float32", Shape: []int{6}}, list("float64", 1, 6), ""},
		{"float32 stored for float64", Feature{Name: "a", DType: "float64", Shape: []int{6}}, list("float32", 1, 6), ""},
		{"int32 stored for int64", Feature{Name: "step", DType: "int64", Shape: []int{1}}, list("int32", 0, 1), ""},
		{"uint8 stored for int32", Feature{Name: "step", DType: "int32", Shape: []int{1}}, list("uint8", 0, 1), ""},
		// Across kinds: refused.
		{"float32 stored for int64", Feature{Name: "step", DType: "int64", Shape: []int{1}}, list("float32", 0, 1), "stores float32"},
		{"int64 stored for float32", Feature{Name: "a", DType: "float32", Shape: []int{6}}, list("int64", 1, 6), "stores list<int64>"},
		{"bool stored for int64", Feature{Name: "step", DType: "int64", Shape: []int{1}}, list("bool", 0, 1), "stores bool"},
		{"core index stored int32", Feature{Name: "index", DType: "int64", Shape: []int{1}}, list("int32", 0, 1), ""},
		{"core timestamp stored float64", Feature{Name: "timestamp", DType: "float32", Shape: []int{1}}, list("float64", 0, 1), ""},
		{"core timestamp stored int64", Feature{Name: "timestamp", DType: "float32", Shape: []int{1}}, list("int64", 0, 1), "stores int64"},
		{"core index stored float64", Feature{Name: "index", DType: "int64", Shape: []int{1}}, list("float64", 0, 1), "stores float64"},
		{"core index stored as lists", Feature{Name: "index", DType: "int64", Shape: []int{1}}, list("int64", 1, 2), "2 values per frame"},
		{"shape [7] over 6", Feature{Name: "a", DType: "float32", Shape: []int{7}}, list("float32", 1, 6), "6 values per frame are stored (60 in 10 rows), the shape says 7"},
		{"ragged", Feature{Name: "a", DType: "float32", Shape: []int{6}}, StoredColumn{Type: "float32", Lists: 1, Values: 65, Rows: 10}, "6.5 values per frame"},
		{"string list", Feature{Name: "s", DType: "string", Shape: []int{1}}, list("string", 1, 2), "lists are stored"},
		{"image as binary", Feature{Name: "i", DType: "image", Shape: []int{4, 4, 3}}, list("binary", 0, 1), "stores binary"},
		{"bool as uint8", Feature{Name: "b", DType: "bool", Shape: []int{1}}, list("uint8", 0, 1), "stores uint8"},
	}
	for _, tc := range tests {
		err := CheckStored(tc.f, tc.c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
