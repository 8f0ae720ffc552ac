package shard

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/schema"
)

// TestFeatureTypeDisagreement: info.json features whose dtype or shape
// disagree with the data files are refused when the plan reads the
// footers (not per frame), naming the feature, the file and both types.
func TestFeatureTypeDisagreement(t *testing.T) {
	const file = "data/chunk-000/file-000.parquet"
	tests := []struct {
		name, feature, key string
		value              any
		want               []string
	}{
		{"action declared string", "action", "dtype", "string",
			[]string{file, `feature "action"`, "declares string shape [6]", "stores list<float32>"}},
		{"action declared int64", "action", "dtype", "int64",
			[]string{file, `feature "action"`, "declares int64", "stores list<float32>"}},
		{"action shape [7] over 6-wide lists", "action", "shape", []int{7},
			[]string{file, `feature "action"`, "shape [7]", "6 values per frame are stored", "the shape says 7"}},
		{"action shape [2, 2]", "action", "shape", []int{2, 2},
			[]string{file, `feature "action"`, "6 values per frame", "the shape says 4"}},
		{"state shape [1]", "observation.state", "shape", []int{1},
			[]string{file, `feature "observation.state"`, "6 values per frame", "the shape says 1"}},
		{"index declared float32", "index", "dtype", "float32",
			[]string{file, `feature "index"`, "declares float32", "stores int64"}},
		{"state declared image", "observation.state", "dtype", "image",
			[]string{file, `feature "observation.state"`, "declares image", "stores list<float32>"}},
		{"absurd shape", "action", "shape", []int64{1000000000000},
			[]string{"info.json", `"action"`, "more than 1073741824 values per frame"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDataset(t, inferredDir(t))
			p := filepath.Join(dir, "meta", "info.json")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var info map[string]any
			if err := json.Unmarshal(b, &info); err != nil {
				t.Fatal(err)
			}
			info["features"].(map[string]any)[tc.feature].(map[string]any)[tc.key] = tc.value
			if b, err = json.Marshal(info); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			wantErr(t, readAllErr(mustDir(t, dir), Selection{}, Options{}), tc.want...)
		})
	}
}

// TestStoredTypesAsPyarrowWrites: every dtype info.json allows, written
// by pyarrow as LeRobot's writer (datasets) does — scalars, lists,
// fixed-size lists, nested lists, strings, images — is read from the
// footer as that dtype, agrees with its own declaration and disagrees
// with the others'.
func TestStoredTypesAsPyarrowWrites(t *testing.T) {
	py := os.Getenv("LRSTREAM_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, "-c", "import pyarrow, numpy").CombinedOutput(); err != nil {
		if os.Getenv("LRSTREAM_REQUIRE_PYTHON") != "" {
			t.Fatalf("%s cannot import pyarrow: %v\n%s", py, err, out)
		}
		t.Skipf("%s cannot import pyarrow and numpy: %v", py, err)
	}
	p := filepath.Join(t.TempDir(), "all.parquet")
	script := `
import sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq
n = 5
cols = {}
for t in ["bool","int8","int16","int32","int64","uint8","uint16","uint32","uint64","float16","float32","float64"]:
    at = pa.from_numpy_dtype(np.dtype(t))
    cols[t] = pa.array(np.zeros(n, dtype=t), type=at)
    cols["list3_" + t] = pa.array([np.zeros(3, dtype=t)] * n, type=pa.list_(at))
    cols["fixed4_" + t] = pa.array([np.zeros(4, dtype=t)] * n, type=pa.list_(at, 4))
cols["nested2x3"] = pa.array([[[0.0] * 3] * 2] * n, type=pa.list_(pa.list_(pa.float32())))
cols["one"] = pa.array([[0.5]] * n, type=pa.list_(pa.float32()))
cols["string"] = pa.array(["a"] * n)
cols["large_string"] = pa.array(["a"] * n, type=pa.large_string())
cols["image"] = pa.array([{"bytes": b"png", "path": None}] * n, type=pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
pq.write_table(pa.table(cols), sys.argv[1], row_group_size=2)
`
	if out, err := exec.Command(py, "-c", script, p).CombinedOutput(); err != nil {
		t.Fatalf("pyarrow: %v\n%s", err, out)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	ft, err := readFooter(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	dtypes := []string{"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"}
	type col struct {
		name, dtype string
		shape       []int
		desc        string
	}
	var cols []col
	for _, d := range dtypes {
		cols = append(cols, col{d, d, []int{1}, d}, col{"list3_" + d, d, []int{3}, "list<" + d + ">"}, col{"fixed4_" + d, d, []int{4}, "list<" + d + ">"})
	}
	cols = append(cols, col{"nested2x3", "float32", []int{2, 3}, "list<list<float32>>"}, col{"one", "float32", []int{1}, "list<float32>"},
		col{"string", "string", []int{1}, "string"}, col{"large_string", "string", []int{1}, "string"},
		col{"image", "image", []int{48, 64, 3}, "image"})
	for _, c := range cols {
		sc := storedColumn(ft, c.name)
		if sc.Describe() != c.desc {
			t.Errorf("%s: stored as %s, want %s", c.name, sc.Describe(), c.desc)
		}
		if err := schema.CheckStored(schema.Feature{Name: c.name, DType: c.dtype, Shape: c.shape}, sc); err != nil {
			t.Errorf("%s declared %s %v: %v", c.name, c.dtype, c.shape, err)
		}
		for _, other := range append(dtypes, "string", "image") {
			if other == c.dtype || dtypeKind(other) == dtypeKind(c.dtype) {
				continue // same kind: LeRobotDataset casts (schema.CheckStored)
			}
			if err := schema.CheckStored(schema.Feature{Name: c.name, DType: other, Shape: c.shape}, sc); err == nil {
				t.Errorf("%s (%s) declared %s: accepted", c.name, c.desc, other)
			}
		}
		if c.dtype != "string" && c.dtype != "image" {
			wrong := append([]int{}, c.shape...)
			wrong[len(wrong)-1]++
			if err := schema.CheckStored(schema.Feature{Name: c.name, DType: c.dtype, Shape: wrong}, sc); err == nil {
				t.Errorf("%s declared shape %v: accepted", c.name, wrong)
			}
		}
	}
	// Video features live in mp4 files: whatever a data file holds under
	// their name is not theirs to check.
	if err := schema.CheckStored(schema.Feature{Name: "string", DType: "video", Shape: []int{48, 64, 3}}, storedColumn(ft, "string")); err != nil {
		t.Errorf("video: %v", err)
	}
}

// dtypeKind groups info.json's dtypes as CheckStored does: floats,
// integers, or the dtype itself.
func dtypeKind(d string) string {
	switch {
	case strings.HasPrefix(d, "float"):
		return "float"
	case strings.HasPrefix(d, "int"), strings.HasPrefix(d, "uint"):
		return "int"
	}
	return d
}
