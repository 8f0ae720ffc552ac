package render

import (
	"github.com/lrstream/lrstream/internal/testkit"

	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// sharedDir returns ../shared relative to the module root.
func sharedDir(t testing.TB) string { return testkit.Shared(t) }

func conformanceDir(t testing.TB) string {
	if d := os.Getenv("LRSTREAM_CONFORMANCE_RENDER"); d != "" {
		return d
	}
	return filepath.Join(sharedDir(t), "conformance", "render")
}

type renderVector struct {
	Name        string          `json:"name"`
	Category    string          `json:"category"`
	Recipe      json.RawMessage `json:"recipe"`
	Persistent  json.RawMessage `json:"persistent"`
	Events      json.RawMessage `json:"events"`
	T           float64         `json:"t"`
	SampleIdx   int64           `json:"sample_idx"`
	Task        json.RawMessage `json:"task"`
	DatasetTask json.RawMessage `json:"dataset_task"`
	Expected    json.RawMessage `json:"expected"`
	Error       *string         `json:"error"`
}

var castTimestamps = os.Getenv("LRSTREAM_CONFORMANCE_CAST") == "1"

// pythonRuntimePhrases are upstream errors raised by the Python runtime
// rather than by LeRobot's own checks; the kit only requires a clear error
// for them.
var pythonRuntimePhrases = []string{
	"unexpected keyword argument",
	"invalid literal for int()",
	"got multiple values for keyword argument",
	"missing 1 required positional argument",
	"not supported between instances of",
}

// runVector renders one vector and returns the JSON output ("null" for
// None) or the error.
func runVector(v *renderVector) ([]byte, error) {
	rec, err := Load(v.Recipe, "<vector>")
	if err != nil {
		return nil, err
	}
	prows, err := RowsFromJSON(v.Persistent, true)
	if err != nil {
		return nil, err
	}
	// The vectors hold rows exactly as render_sample received them (the kit
	// says so, and its t values and some row timestamps are not float32
	// values), so they are compared as given. LRSTREAM_CONFORMANCE_CAST=1
	// applies the dataset loader's float32 cast instead; the public set
	// passes either way.
	if castTimestamps {
		CastTimestamps(prows)
	}
	erows, err := RowsFromJSON(v.Events, false)
	if err != nil {
		return nil, err
	}
	ep, err := rec.Episode(prows)
	if err != nil {
		return nil, err
	}
	s, _, err := ep.Render(Frame{Events: erows, T: v.T, SampleIdx: v.SampleIdx, Task: pyTask(v.Task), DatasetTask: pyTask(v.DatasetTask)})
	if err != nil {
		return nil, err
	}
	if s == nil {
		return []byte("null"), nil
	}
	return json.Marshal(s)
}

// pyTask is a task argument as ${task} renders it: str() of any non-null
// JSON value.
func pyTask(raw json.RawMessage) *string {
	if isNullish(raw) {
		return nil
	}
	v, err := decodeJSONOrdered(raw)
	if err != nil || v == nil {
		return nil
	}
	s := pyStr(v)
	return &s
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// checkVector returns "" when the vector passes, else a description.
func checkVector(v *renderVector) string {
	got, err := runVector(v)
	if v.Error != nil {
		if err == nil {
			return fmt.Sprintf("want error %q, got %s", *v.Error, got)
		}
		if strings.Contains(err.Error(), *v.Error) {
			return ""
		}
		for _, p := range pythonRuntimePhrases {
			if strings.Contains(*v.Error, p) {
				return "" // a clear error is enough
			}
		}
		if v.Category == "quirks" {
			return ""
		}
		return fmt.Sprintf("want error containing %q, got error %v", *v.Error, err)
	}
	if err != nil {
		return fmt.Sprintf("unexpected error: %v", err)
	}
	want := v.Expected
	if len(want) == 0 {
		want = []byte("null")
	}
	if !jsonEqual(got, want) {
		return fmt.Sprintf("output mismatch\n got: %s\nwant: %s", got, want)
	}
	return ""
}

func readVectors(t *testing.T, path string) []renderVector {
	return readJSONL[renderVector](t, path)
}

// readJSONL reads one JSON value per line; nil when the file is absent.
func readJSONL[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			t.Errorf("%s:%d: cannot decode vector: %v", path, line, err)
			continue
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConformanceRender runs every render vector of the conformance kit
// (LRSTREAM_CONFORMANCE_RENDER, default ../shared/conformance/render).
func TestConformanceRender(t *testing.T) {
	dir := conformanceDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		// The kit is the floor of conformance: a missing kit fails, like
		// the pipeline conformance tests, rather than passing silently.
		t.Fatalf("no conformance vectors in %s (set LRSTREAM_CONFORMANCE_RENDER or provide ../shared)", dir)
	}
	type tally struct{ pass, fail int }
	cats := map[string]*tally{}
	total, failed := 0, 0
	shown := 0
	for _, file := range files {
		base := filepath.Base(file)
		if base == "collate.jsonl" || base == "processor.jsonl" {
			continue
		}
		for _, v := range readVectors(t, file) {
			v := v
			c := cats[v.Category]
			if c == nil {
				c = &tally{}
				cats[v.Category] = c
			}
			total++
			if msg := checkVector(&v); msg != "" {
				c.fail++
				failed++
				if shown < 40 {
					shown++
					t.Errorf("%s: %s: %s", base, v.Name, msg)
				}
				continue
			}
			c.pass++
		}
	}
	names := make([]string, 0, len(cats))
	for k := range cats {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		t.Logf("%-24s %5d passed, %d failed", k, cats[k].pass, cats[k].fail)
	}
	t.Logf("%-24s %5d passed, %d failed", "TOTAL", total-failed, failed)
	if failed > 0 {
		t.Errorf("%d of %d render vectors failed", failed, total)
	}
}
