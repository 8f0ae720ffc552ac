package collate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// conformanceDir returns the render conformance directory: the
// LRSTREAM_CONFORMANCE_RENDER environment variable, or
// ../shared/conformance/render relative to the module root.
func conformanceDir(t *testing.T) string {
	if d := os.Getenv("LRSTREAM_CONFORMANCE_RENDER"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "conformance", "render")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the package directory")
		}
		dir = parent
	}
}

type collateCase struct {
	Name     string          `json:"name"`
	Batch    []any           `json:"batch"`
	Expected json.RawMessage `json:"expected"`
	Error    *string         `json:"error"`
}

// normalize round-trips v through JSON so numbers compare as float64.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCollateConformance(t *testing.T) {
	path := filepath.Join(conformanceDir(t), "collate.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("conformance vectors unavailable: %v", err)
	}
	passed, failed := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var c collateCase
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("bad vector: %v", err)
		}
		ok := t.Run(c.Name, func(t *testing.T) {
			got, err := CollateJSON(c.Batch)
			if c.Error != nil {
				if err == nil {
					t.Fatalf("want error containing %q, got %v", *c.Error, got)
				}
				if !strings.Contains(err.Error(), *c.Error) {
					t.Fatalf("error %q does not contain %q", err, *c.Error)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			var want any
			if err := json.Unmarshal(c.Expected, &want); err != nil {
				t.Fatal(err)
			}
			var g any
			if got != nil {
				g = normalize(t, got)
			}
			if !reflect.DeepEqual(g, want) {
				t.Fatalf("got  %v\nwant %v", g, want)
			}
		})
		if ok {
			passed++
		} else {
			failed++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("collate.jsonl: %d passed, %d failed\n", passed, failed)
	if passed+failed == 0 {
		t.Fatal("no vectors in collate.jsonl")
	}
}

func TestCollateJSONInvariants(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch string
		err   string
	}{
		{"dtype", `[{"a":[1,2]},{"a":[1.5,2]}]`, "dtype"},
		{"shape", `[{"a":[1,2]},{"a":[1,2,3]}]`, "shape"},
		{"ragged", `[{"a":[[1],2]}]`, "ragged"},
		{"streams presence", `[{"message_streams":["x"]},{"index":1}]`, "1/2 samples carry 'message_streams'"},
		{"nested", `[{"o":{"x":1}},{"o":{"y":1}}]`, "samples carry 'o.x'"},
	} {
		var b []any
		dec := json.NewDecoder(strings.NewReader(tc.batch))
		dec.UseNumber()
		if err := dec.Decode(&b); err != nil {
			t.Fatal(err)
		}
		_, err := CollateJSON(b)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
}
