package pipeline

import (
	"github.com/lrstream/lrstream/internal/testkit"

	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
)

// sharedDir returns ../shared relative to the module root.
func sharedDir(t testing.TB) string { return testkit.Shared(t) }

func conformanceDatasets(t testing.TB) string {
	if d := os.Getenv("LRSTREAM_CONFORMANCE_DATASETS"); d != "" {
		return d
	}
	return filepath.Join(sharedDir(t), "conformance", "datasets")
}

// modeConfig maps an expected-file mode to render options: "step" is
// fallback with the canonical task passed explicitly (--no-task-aug).
func modeConfig(t testing.TB, mode string) (render.Mode, bool) {
	switch mode {
	case "drop":
		return render.ModeDrop, false
	case "fallback":
		return render.ModeFallback, false
	case "step":
		return render.ModeFallback, true
	}
	t.Fatalf("unknown mode %q", mode)
	return 0, false
}

// inspectLines runs the pipeline like `lrstream inspect --jsonl` and
// returns one JSON line per frame.
func inspectLines(t testing.TB, dir string, rec *render.Recipe, mode string, workers int) []string {
	t.Helper()
	ctx := context.Background()
	src, err := fetch.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	m, noAug := modeConfig(t, mode)
	cfg := &Config{Source: src, Dataset: ds, Recipe: rec, Mode: m, NoTaskAug: noAug, Workers: workers, Features: []string{}}
	var lines []string
	err = Run(ctx, cfg, func(c *Chunk) error {
		for i := range c.Results {
			b, err := AppendFrameJSON(nil, c, i)
			if err != nil {
				return err
			}
			lines = append(lines, string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			out = append(out, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func jsonValue(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON %q: %v", s, err)
	}
	return v
}

// TestDatasetConformance renders every conformance dataset with every
// recipe in the three modes and compares each frame with the expected
// outcome files.
func TestDatasetConformance(t *testing.T) {
	root := conformanceDatasets(t)
	recipes, _ := filepath.Glob(filepath.Join(sharedDir(t), "recipes", "*.yaml"))
	if len(recipes) == 0 {
		t.Fatal("no recipes found")
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(root, e.Name(), "meta", "info.json")); err == nil {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		t.Fatalf("no datasets under %s", root)
	}
	for _, name := range names {
		dir := filepath.Join(root, name)
		for _, rp := range recipes {
			rec, err := render.LoadFile(rp)
			if err != nil {
				t.Fatal(err)
			}
			base := strings.TrimSuffix(filepath.Base(rp), ".yaml")
			for _, mode := range []string{"drop", "fallback", "step"} {
				exp := filepath.Join(dir, "expected", base+"."+mode+".jsonl")
				if _, err := os.Stat(exp); err != nil {
					continue
				}
				t.Run(name+"/"+base+"."+mode, func(t *testing.T) {
					compareFrames(t, readLines(t, exp), inspectLines(t, dir, rec, mode, 2))
				})
			}
		}
	}
}

// TestRealDatasets reads the real LeRobot datasets completely: without
// language every frame passes through (drop) or renders the task (fallback).
func TestRealDatasets(t *testing.T) {
	root := filepath.Join(sharedDir(t), "datasets", "real")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := render.LoadFile(filepath.Join(sharedDir(t), "recipes", "subtask_mem_vqa_speech.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		for _, mode := range []string{"drop", "fallback", "step"} {
			exp := filepath.Join(dir, "expected", "any_recipe."+mode+".jsonl")
			if _, err := os.Stat(exp); err != nil {
				continue
			}
			t.Run(e.Name()+"/"+mode, func(t *testing.T) {
				compareFrames(t, readLines(t, exp), inspectLines(t, dir, rec, mode, 3))
			})
		}
	}
}

func compareFrames(t *testing.T, want, got []string) {
	t.Helper()
	pass, fail := 0, 0
	n := max(len(want), len(got))
	for i := 0; i < n; i++ {
		switch {
		case i >= len(got):
			fail++
			if fail <= 3 {
				t.Errorf("frame line %d missing: want %s", i, want[i])
			}
		case i >= len(want):
			fail++
			if fail <= 3 {
				t.Errorf("extra frame line %d: %s", i, got[i])
			}
		case reflect.DeepEqual(jsonValue(t, want[i]), jsonValue(t, got[i])):
			pass++
		default:
			fail++
			if fail <= 3 {
				t.Errorf("frame line %d:\n got %s\nwant %s", i, got[i], want[i])
			}
		}
	}
	t.Logf("%d passed, %d failed", pass, fail)
}
