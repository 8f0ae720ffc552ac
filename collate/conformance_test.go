package collate

import (
	"github.com/lrstream/lrstream/internal/testkit"

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
	return testkit.Shared(t, "conformance", "render")
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
		if os.Getenv("LRSTREAM_CONFORMANCE_RENDER") != "" {
			t.Fatal(err)
		}
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

func TestCollateJSONPromotes(t *testing.T) {
	var b []any
	dec := json.NewDecoder(strings.NewReader(`[{"a":[1,2]},{"a":[1.5,2]},null]`))
	dec.UseNumber()
	if err := dec.Decode(&b); err != nil {
		t.Fatal(err)
	}
	got, err := CollateJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if g := normalize(t, got); !reflect.DeepEqual(g, map[string]any{"a": []any{[]any{1.0, 2.0}, []any{1.5, 2.0}}}) {
		t.Fatalf("got %v", g)
	}
}

func TestCollateJSONInvariants(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch string
		err   string
	}{
		{"shape", `[{"a":[1,2]},{"a":[1,2,3]}]`, "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1"},
		{"shape 2d", `[{"a":[[1],[2]]},{"a":[[1,2]]}]`, "but got [2, 1] at entry 0 and [1, 2] at entry 1"},
		{"string vs number", `[{"a":"x"},{"a":1}]`, "type"},
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
