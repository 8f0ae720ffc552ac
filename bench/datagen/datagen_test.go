package datagen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// small returns options for a quick multi-file, multi-chunk dataset.
func small(v Variant, d Density) Options {
	return Options{
		Episodes: 14, MinFrames: 40, MaxFrames: 120, FPS: 15,
		Cameras: []string{"front", "wrist"}, Dim: 6, Density: d, Variant: v,
		Tasks: 5, FilesPerChunk: 2, FramesPerFile: 300, Seed: 42,
	}
}

func gen(t testing.TB, o Options) (string, Result) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	res, err := Generate(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return dir, res
}

// readTree returns every file of a directory tree by relative path.
func readTree(t testing.TB, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDeterministic(t *testing.T) {
	for _, v := range []Variant{VariantDocumented, VariantInferred, VariantInferredSorted, VariantJSONExt} {
		t.Run(string(v), func(t *testing.T) {
			o := small(v, DensityFull)
			o.Workers = 1
			a, _ := gen(t, o)
			o.Workers = 4
			b, _ := gen(t, o)
			ta, tb := readTree(t, a), readTree(t, b)
			if len(ta) != len(tb) || len(ta) < 7 {
				t.Fatalf("file sets differ or too small: %d vs %d", len(ta), len(tb))
			}
			for p, x := range ta {
				if !bytes.Equal(x, tb[p]) {
					t.Errorf("%s differs between runs", p)
				}
			}
			o.Seed++
			c, _ := gen(t, o)
			if tc := readTree(t, c); bytes.Equal(tc["data/chunk-000/file-000.parquet"], ta["data/chunk-000/file-000.parquet"]) {
				t.Error("different seeds gave identical data")
			}
		})
	}
}

// TestDemoReproducible regenerates the committed demo dataset with the
// command documented in docs/datagen.md and compares bytes: every file but
// the videos, whose bytes depend on the FFmpeg build; those must be the
// files FFmpeg writes (same names, codec, size and frame count).
func TestDemoReproducible(t *testing.T) {
	o := Options{
		Episodes: 12, MinFrames: 60, MaxFrames: 150, FPS: 10, Cameras: []string{"front", "wrist"}, Dim: 6,
		Density: DensityFull, Variant: VariantDocumented, FramesPerFile: 500, FilesPerChunk: 2, Seed: 7,
		Videos: true, VideoHeight: 32, VideoWidth: 48, VideoGOP: 100,
	}
	requireFFmpeg(t)
	dir, _ := gen(t, o)
	demo := filepath.Join("..", "..", "testdata", "demo")
	got, want := readTree(t, dir), readTree(t, demo)
	if len(got) != len(want) {
		t.Fatalf("demo has %d files, regenerated %d", len(want), len(got))
	}
	videos, size := 0, 0
	for p, b := range want {
		size += len(b)
		if strings.HasSuffix(p, ".mp4") {
			videos++
			if g, w := probeVideo(t, filepath.Join(dir, p)), probeVideo(t, filepath.Join(demo, p)); g != w {
				t.Errorf("testdata/demo/%s: %s, regenerated %s; regenerate it (docs/datagen.md)", p, w, g)
			}
			continue
		}
		if !bytes.Equal(b, got[p]) {
			t.Errorf("testdata/demo/%s is not what the documented command generates; regenerate it (docs/datagen.md)", p)
		}
	}
	if videos != 6 {
		t.Errorf("demo has %d videos, want 6 (2 cameras x 3 data files)", videos)
	}
	if size > 500_000 {
		t.Errorf("demo dataset is %d bytes, budget 500 KB", size)
	}
	o, _ = o.withDefaults()
	checkDataset(t, filepath.Join("..", "..", "testdata", "demo"), o)
}

func TestDatasets(t *testing.T) {
	cases := []struct {
		name string
		o    Options
	}{
		{"documented-full", small(VariantDocumented, DensityFull)},
		{"inferred-full", small(VariantInferred, DensityFull)},
		{"documented-sparse", small(VariantDocumented, DensitySparse)},
		{"inferred-sparse", small(VariantInferred, DensitySparse)},
		{"inferred-sorted-full", small(VariantInferredSorted, DensityFull)},
		{"json-ext-full", small(VariantJSONExt, DensityFull)},
		{"none", small(VariantDocumented, DensityNone)},
		{"no-cameras", func() Options { o := small(VariantInferred, DensityFull); o.Cameras = []string{}; return o }()},
		{"fps30-dim14", func() Options {
			o := small(VariantDocumented, DensityFull)
			o.FPS, o.Dim, o.Cameras = 30, 14, []string{"top", "observation.images.wrist", "left"}
			return o
		}()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, res := gen(t, c.o)
			o, _ := c.o.withDefaults()
			if res.Episodes != o.Episodes || res.DataFiles < 2 {
				t.Fatalf("result %+v", res)
			}
			st := checkDataset(t, dir, o)
			if st.frames != res.Frames {
				t.Errorf("read %d frames, Generate reported %d", st.frames, res.Frames)
			}
			if o.Density == DensityFull {
				for _, style := range []string{"subtask", "plan", "memory", "task_aug", "motion"} {
					if st.persistentStyles[style] == 0 {
						t.Errorf("no persistent %s rows", style)
					}
				}
				for _, style := range []string{"interjection", "say", "vqa"} {
					if len(o.Cameras) == 0 && style == "vqa" {
						continue
					}
					if st.eventStyles[style] == 0 {
						t.Errorf("no %s events", style)
					}
				}
				if st.distinctContent < 100 {
					t.Errorf("only %d distinct strings", st.distinctContent)
				}
			}
		})
	}
}

// TestInferredEmptyFiles checks list<null> for files without language rows.
func TestInferredEmptyFiles(t *testing.T) {
	o := Options{Episodes: 40, MinFrames: 20, MaxFrames: 30, FPS: 30, Cameras: []string{"front"}, Dim: 2,
		Density: DensitySparse, Variant: VariantInferred, FramesPerFile: 25, Seed: 3}
	dir, _ := gen(t, o)
	o, _ = o.withDefaults()
	checkDataset(t, dir, o)
	var nullEvents, nullPersistent int
	paths, _ := filepath.Glob(filepath.Join(dir, "data", "*", "*.parquet"))
	for _, p := range paths {
		sc := readSchema(t, p)
		if isNullList(sc, "language_events") {
			nullEvents++
		}
		if isNullList(sc, "language_persistent") {
			nullPersistent++
		}
	}
	if nullEvents == 0 || nullPersistent == 0 {
		t.Errorf("expected files with list<null> columns, got events %d persistent %d of %d", nullEvents, nullPersistent, len(paths))
	}
}

func isNullList(sc *arrow.Schema, name string) bool {
	f, ok := sc.FieldsByName(name)
	if !ok || len(f) == 0 {
		return false
	}
	l, ok := f[0].Type.(*arrow.ListType)
	return ok && l.Elem().ID() == arrow.NULL
}

func readSchema(t testing.TB, path string) *arrow.Schema {
	t.Helper()
	r, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestOutputDirectory(t *testing.T) {
	o := small(VariantDocumented, DensitySparse)
	o.Episodes = 2
	dir := filepath.Join(t.TempDir(), "ds")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(context.Background(), dir, o); err != nil {
		t.Fatalf("empty existing dir: %v", err)
	}
	if _, err := Generate(context.Background(), dir, o); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("non-empty dir without Force: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stale"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o.Force = true
	if _, err := Generate(context.Background(), dir, o); err != nil {
		t.Fatalf("Force: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "stale")); !os.IsNotExist(err) {
		t.Error("Force kept the old content")
	}
	ents, _ := os.ReadDir(filepath.Dir(dir))
	if len(ents) != 1 {
		t.Errorf("leftover temporary directories: %v", ents)
	}
	// A cancelled run leaves nothing behind.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	other := filepath.Join(filepath.Dir(dir), "other")
	if _, err := Generate(ctx, other, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 1 {
		t.Errorf("cancelled run left %v", ents)
	}
	for _, bad := range []Options{{Density: "dense"}, {Variant: "v2"}, {MinFrames: 10, MaxFrames: 5}, {Cameras: []string{"a", "a"}}} {
		if _, err := Generate(context.Background(), filepath.Join(t.TempDir(), "x"), bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// row is one decoded language row.
type row struct {
	role, content, style, camera string
	hasContent, hasStyle         bool
	hasCamera, hasTS             bool
	ts                           float64
	tools                        []string // JSON text per call
}

type datasetStats struct {
	frames           int64
	persistentStyles map[string]int
	eventStyles      map[string]int
	distinctContent  int
}

type info struct {
	CodebaseVersion string                     `json:"codebase_version"`
	TotalEpisodes   int                        `json:"total_episodes"`
	TotalFrames     int64                      `json:"total_frames"`
	TotalTasks      int                        `json:"total_tasks"`
	ChunksSize      int                        `json:"chunks_size"`
	FPS             int                        `json:"fps"`
	DataPath        string                     `json:"data_path"`
	Features        map[string]json.RawMessage `json:"features"`
	Tools           []json.RawMessage          `json:"tools"`
}

func readTable(t testing.TB, path string) (arrow.Table, *pqarrow.FileReader) {
	t.Helper()
	r, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tbl.Release)
	return tbl, fr
}

func col(t testing.TB, tbl arrow.Table, name string) arrow.Array {
	t.Helper()
	idx := tbl.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("column %s: %v", name, idx)
	}
	chunks := tbl.Column(idx[0]).Data().Chunks()
	if len(chunks) == 1 {
		return chunks[0]
	}
	a, err := array.Concatenate(chunks, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func int64s(t testing.TB, a arrow.Array) []int64 {
	t.Helper()
	return a.(*array.Int64).Int64Values()
}

// checkDataset verifies the writer invariants of a generated dataset by
// reading it back with pqarrow.
func checkDataset(t *testing.T, dir string, o Options) datasetStats {
	t.Helper()
	st := datasetStats{persistentStyles: map[string]int{}, eventStyles: map[string]int{}}
	b, err := os.ReadFile(filepath.Join(dir, "meta", "info.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in info
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	if in.CodebaseVersion != "v3.0" || in.FPS != o.FPS || in.TotalEpisodes != o.Episodes || in.ChunksSize != o.FilesPerChunk {
		t.Errorf("info.json: %+v", in)
	}
	annotated := o.Density != DensityNone
	for _, f := range []string{"index", "timestamp", "episode_index", "frame_index", "task_index", "observation.state", "action"} {
		if in.Features[f] == nil {
			t.Errorf("info.json lacks feature %s", f)
		}
	}
	for _, c := range o.Cameras {
		if !strings.Contains(string(in.Features[c]), `"video"`) {
			t.Errorf("camera %s not a video feature: %s", c, in.Features[c])
		}
	}
	if (in.Features["language_persistent"] != nil) != annotated || (in.Features["language_events"] != nil) != annotated || (len(in.Tools) > 0) != annotated {
		t.Errorf("language features / tools vs density %s", o.Density)
	}

	tasksTbl, _ := readTable(t, filepath.Join(dir, "meta", "tasks.parquet"))
	if md := readSchema(t, filepath.Join(dir, "meta", "tasks.parquet")).Metadata(); md.FindKey("pandas") < 0 {
		t.Error("tasks.parquet has no pandas metadata")
	}
	taskIdx := int64s(t, col(t, tasksTbl, "task_index"))
	taskStr := col(t, tasksTbl, "__index_level_0__").(*array.String)
	if len(taskIdx) != in.TotalTasks {
		t.Errorf("%d tasks, info says %d", len(taskIdx), in.TotalTasks)
	}
	tasks := map[int64]string{}
	for i, ti := range taskIdx {
		if ti != int64(i) {
			t.Errorf("task_index %d at row %d", ti, i)
		}
		tasks[ti] = taskStr.Value(i)
	}

	epTbl, _ := readTable(t, filepath.Join(dir, "meta", "episodes", "chunk-000", "file-000.parquet"))
	epIdx := int64s(t, col(t, epTbl, "episode_index"))
	lengths := int64s(t, col(t, epTbl, "length"))
	chunkIdx := int64s(t, col(t, epTbl, "data/chunk_index"))
	fileIdx := int64s(t, col(t, epTbl, "data/file_index"))
	fromIdx := int64s(t, col(t, epTbl, "dataset_from_index"))
	toIdx := int64s(t, col(t, epTbl, "dataset_to_index"))
	epTasks := col(t, epTbl, "tasks").(*array.List)
	if len(epIdx) != o.Episodes {
		t.Fatalf("episodes parquet has %d rows, want %d", len(epIdx), o.Episodes)
	}
	var next int64
	for i := range epIdx {
		if epIdx[i] != int64(i) || fromIdx[i] != next || toIdx[i] != next+lengths[i] ||
			lengths[i] < int64(o.MinFrames) || lengths[i] > int64(o.MaxFrames) {
			t.Errorf("episode row %d: idx %d len %d from %d to %d", i, epIdx[i], lengths[i], fromIdx[i], toIdx[i])
		}
		next = toIdx[i]
		if s, e := epTasks.ValueOffsets(i); e-s != 1 {
			t.Errorf("episode %d has %d tasks", i, e-s)
		}
	}
	if next != in.TotalFrames {
		t.Errorf("episodes cover %d frames, info says %d", next, in.TotalFrames)
	}

	// Data files, in (chunk, file) order, must hold the episodes in order,
	// one row group each.
	type fileKey struct{ c, f int64 }
	var files []fileKey
	for i := range epIdx {
		k := fileKey{chunkIdx[i], fileIdx[i]}
		if len(files) == 0 || files[len(files)-1] != k {
			files = append(files, k)
		}
	}
	seenStrings := map[string]bool{}
	ep := 0
	var index int64
	for _, fk := range files {
		rel := fmt.Sprintf("data/chunk-%03d/file-%03d.parquet", fk.c, fk.f)
		tbl, fr := readTable(t, filepath.Join(dir, rel))
		n := int(tbl.NumRows())
		first := ep
		for ep < o.Episodes && chunkIdx[ep] == fk.c && fileIdx[ep] == fk.f {
			ep++
		}
		md := fr.ParquetReader().MetaData()
		if md.NumRowGroups() != ep-first {
			t.Errorf("%s: %d row groups for %d episodes", rel, md.NumRowGroups(), ep-first)
			continue
		}
		for g := range md.NumRowGroups() {
			if md.RowGroup(g).NumRows() != lengths[first+g] {
				t.Errorf("%s: row group %d has %d rows, episode %d has %d", rel, g, md.RowGroup(g).NumRows(), first+g, lengths[first+g])
			}
		}
		idx := int64s(t, col(t, tbl, "index"))
		epc := int64s(t, col(t, tbl, "episode_index"))
		fi := int64s(t, col(t, tbl, "frame_index"))
		ti := int64s(t, col(t, tbl, "task_index"))
		ts := col(t, tbl, "timestamp").(*array.Float32).Float32Values()
		state := col(t, tbl, "observation.state").(*array.FixedSizeList)
		if state.DataType().(*arrow.FixedSizeListType).Len() != int32(o.Dim) {
			t.Errorf("%s: state type %s", rel, state.DataType())
		}
		if _, ok := col(t, tbl, "action").(*array.FixedSizeList); !ok {
			t.Errorf("%s: action is not a fixed_size_list", rel)
		}
		var pers, evs *array.List
		if annotated {
			pers = col(t, tbl, "language_persistent").(*array.List)
			evs = col(t, tbl, "language_events").(*array.List)
			checkLangTypes(t, rel, o.Variant, pers.DataType(), true)
			checkLangTypes(t, rel, o.Variant, evs.DataType(), false)
		} else if len(tbl.Schema().FieldIndices("language_persistent")) > 0 {
			t.Errorf("%s: language columns with density none", rel)
		}
		row0 := 0
		for e := first; e < ep; e++ {
			L := int(lengths[e])
			task := tasks[ti[row0]]
			if s, _ := epTasks.ValueOffsets(e); epTasks.ListValues().(*array.String).Value(int(s)) != task {
				t.Errorf("episode %d: tasks column disagrees with task_index", e)
			}
			frameTS := map[float64]bool{}
			for f := range L {
				r := row0 + f
				if idx[r] != index || epc[r] != int64(e) || fi[r] != int64(f) || ts[r] != frameTime(f, o.FPS) || ti[r] != ti[row0] {
					t.Fatalf("%s row %d: index %d episode %d frame %d ts %v", rel, r, idx[r], epc[r], fi[r], ts[r])
				}
				frameTS[float64(ts[r])] = true
				index++
			}
			if !annotated {
				row0 += L
				st.frames += int64(L)
				continue
			}
			// Persistent slice identical on every frame of the episode.
			s0, e0 := pers.ValueOffsets(row0)
			for f := 1; f < L; f++ {
				s, e := pers.ValueOffsets(row0 + f)
				if !array.SliceEqual(pers.ListValues(), s0, e0, pers.ListValues(), s, e) {
					t.Fatalf("%s: episode %d frame %d: persistent slice differs from frame 0", rel, e, f)
				}
			}
			prows := decodeRows(t, pers, row0)
			planAt, subtaskAt := map[float64]bool{}, map[float64]bool{}
			for _, r := range prows {
				if r.style == "subtask" {
					if subtaskAt[r.ts] {
						t.Errorf("%s: episode %d: two subtasks at %v", rel, e, r.ts)
					}
					subtaskAt[r.ts] = true
				}
			}
			if len(prows) > 0 && !subtaskAt[0] {
				t.Errorf("%s: episode %d: no subtask at t=0 (subtasks must cover the episode)", rel, e)
			}
			for _, r := range prows {
				st.persistentStyles[r.style]++
				seenStrings[r.content] = true
				checkCamera(t, rel, r)
				if !r.hasTS || !frameTS[r.ts] {
					t.Errorf("%s: episode %d: persistent %s row at %v, not a frame timestamp", rel, e, r.style, r.ts)
				}
				if r.role == "" || !r.hasContent || !r.hasStyle {
					t.Errorf("%s: episode %d: persistent row %+v", rel, e, r)
				}
				if r.style == "plan" {
					planAt[r.ts] = true
				}
				if r.style == "memory" && !subtaskAt[r.ts] {
					t.Errorf("%s: episode %d: memory at %v is not on a subtask boundary", rel, e, r.ts)
				}
			}
			for f := range L {
				rows := decodeRows(t, evs, row0+f)
				var interjections, says int
				for _, r := range rows {
					if r.hasTS {
						t.Errorf("%s: event row with a timestamp", rel)
					}
					checkCamera(t, rel, r)
					seenStrings[r.content] = true
					switch {
					case r.style == "interjection":
						interjections++
						st.eventStyles["interjection"]++
						if !planAt[float64(ts[row0+f])] {
							t.Errorf("%s: episode %d frame %d: interjection without a plan refresh at %v", rel, e, f, ts[row0+f])
						}
					case !r.hasStyle:
						says++
						st.eventStyles["say"]++
						if r.role != "assistant" || r.hasContent || len(r.tools) != 1 || !strings.Contains(r.tools[0], `"name": "say"`) {
							t.Errorf("%s: bad speech atom %+v", rel, r)
						}
					default:
						st.eventStyles[r.style]++
					}
				}
				if interjections != says {
					t.Errorf("%s: episode %d frame %d: %d interjections, %d say atoms", rel, e, f, interjections, says)
				}
			}
			row0 += L
			st.frames += int64(L)
		}
		if row0 != n {
			t.Errorf("%s: %d rows, episodes cover %d", rel, n, row0)
		}
	}
	if ep != o.Episodes || index != in.TotalFrames {
		t.Errorf("read %d episodes / %d frames, want %d / %d", ep, index, o.Episodes, in.TotalFrames)
	}
	st.distinctContent = len(seenStrings)
	return st
}

// checkCamera enforces the camera invariant: camera set iff style is vqa
// or trace, and then it names a camera feature.
func checkCamera(t *testing.T, rel string, r row) {
	t.Helper()
	view := r.style == "vqa" || r.style == "trace"
	if view != r.hasCamera || (view && !strings.HasPrefix(r.camera, "observation.images.")) {
		t.Errorf("%s: camera invariant violated: %+v", rel, r)
	}
}

func checkLangTypes(t *testing.T, rel string, v Variant, dt arrow.DataType, persistent bool) {
	t.Helper()
	elem := dt.(*arrow.ListType).Elem()
	if elem.ID() == arrow.NULL {
		if v == VariantDocumented {
			t.Errorf("%s: list<null> in the documented variant", rel)
		}
		return
	}
	st := elem.(*arrow.StructType)
	var names []string
	for _, f := range st.Fields() {
		names = append(names, f.Name)
	}
	want := []string{"role", "content", "style", "camera", "tool_calls"}
	if persistent {
		want = []string{"role", "content", "style", "timestamp", "camera", "tool_calls"}
	}
	inferred := v == VariantInferred || v == VariantInferredSorted
	if v == VariantInferredSorted {
		slices.Sort(want)
	}
	if !slices.Equal(names, want) {
		t.Errorf("%s: struct fields %v, want %v", rel, names, want)
	}
	if persistent {
		f, _ := st.FieldByName("timestamp")
		wantTS := arrow.DataType(arrow.PrimitiveTypes.Float32)
		if inferred {
			wantTS = arrow.PrimitiveTypes.Float64
		}
		if !arrow.TypeEqual(f.Type, wantTS) || f.Nullable != inferred {
			t.Errorf("%s: timestamp %s nullable %v", rel, f.Type, f.Nullable)
		}
	}
	role, _ := st.FieldByName("role")
	if role.Nullable != inferred {
		t.Errorf("%s: role nullable %v", rel, role.Nullable)
	}
	tc, _ := st.FieldByName("tool_calls")
	switch {
	case v == VariantDocumented:
		if !arrow.TypeEqual(tc.Type, listOf(arrow.BinaryTypes.String)) {
			t.Errorf("%s: documented tool_calls %s", rel, tc.Type)
		}
	case v == VariantJSONExt:
		// pqarrow reads the Parquet JSON logical type of a nested
		// extension column back as binary.
		elem := tc.Type.(*arrow.ListType).Elem()
		if e, ok := elem.(arrow.ExtensionType); (!ok || e.ExtensionName() != "arrow.json") && elem.ID() != arrow.BINARY {
			t.Errorf("%s: json-ext tool_calls %s", rel, tc.Type)
		}
	case v == VariantInferredSorted:
		if tc.Type.ID() != arrow.NULL && !arrow.TypeEqual(tc.Type.(*arrow.ListType).Elem(), sortedStruct(inferredToolCallType)) {
			t.Errorf("%s: inferred-sorted tool_calls %s", rel, tc.Type)
		}
	case tc.Type.ID() != arrow.NULL && !arrow.TypeEqual(tc.Type.(*arrow.ListType).Elem(), inferredToolCallType):
		t.Errorf("%s: inferred tool_calls %s", rel, tc.Type)
	}
}

// decodeRows decodes the language rows of list entry i.
func decodeRows(t *testing.T, l *array.List, i int) []row {
	t.Helper()
	s, e := l.ValueOffsets(i)
	st, ok := l.ListValues().(*array.Struct)
	if !ok {
		if e != s {
			t.Fatalf("non-empty list<null>")
		}
		return nil
	}
	typ := st.DataType().(*arrow.StructType)
	str := func(name string, j int) (string, bool) {
		k, ok := typ.FieldIdx(name)
		if !ok {
			return "", false
		}
		a, ok := st.Field(k).(*array.String)
		if !ok || a.IsNull(j) {
			return "", false
		}
		return a.Value(j), true
	}
	var out []row
	for j := int(s); j < int(e); j++ {
		var r row
		r.role, _ = str("role", j)
		r.content, r.hasContent = str("content", j)
		r.style, r.hasStyle = str("style", j)
		r.camera, r.hasCamera = str("camera", j)
		if k, ok := typ.FieldIdx("timestamp"); ok {
			switch a := st.Field(k).(type) {
			case *array.Float32:
				r.ts, r.hasTS = float64(a.Value(j)), a.IsValid(j)
			case *array.Float64:
				r.ts, r.hasTS = a.Value(j), a.IsValid(j)
			}
		}
		k, _ := typ.FieldIdx("tool_calls")
		if tl, ok := st.Field(k).(*array.List); ok && tl.IsValid(j) {
			ts, te := tl.ValueOffsets(j)
			for c := ts; c < te; c++ {
				switch v := tl.ListValues().(type) {
				case *array.String:
					r.tools = append(r.tools, v.Value(int(c)))
				case *array.Binary:
					r.tools = append(r.tools, v.ValueString(int(c)))
				case array.ExtensionArray:
					r.tools = append(r.tools, v.Storage().(*array.String).Value(int(c)))
				case *array.Struct:
					b, err := json.Marshal(v.GetOneForMarshal(int(c)))
					if err != nil {
						t.Fatal(err)
					}
					// Normalise to json.dumps spacing.
					var x any
					_ = json.Unmarshal(b, &x)
					r.tools = append(r.tools, pyJSON(x))
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// pyJSON renders a JSON value with Python json.dumps separators.
func pyJSON(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			kb, _ := json.Marshal(k)
			parts = append(parts, string(kb)+": "+pyJSON(x[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func TestEnsure(t *testing.T) {
	o := small(VariantDocumented, DensitySparse)
	o.Episodes = 3
	dir := filepath.Join(t.TempDir(), "ds")
	first, err := Ensure(context.Background(), dir, o)
	if err != nil || first.Elapsed == 0 {
		t.Fatalf("first Ensure: %+v %v", first, err)
	}
	again, err := Ensure(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	first.Elapsed = 0
	if again != first {
		t.Errorf("reused dataset: %+v, generated %+v", again, first)
	}
	o.Seed++
	third, err := Ensure(context.Background(), dir, o)
	if err != nil || third.Elapsed == 0 {
		t.Fatalf("Ensure with another seed did not regenerate: %+v %v", third, err)
	}
	rec, err := os.ReadFile(filepath.Join(dir, "meta", "datagen.json"))
	if err != nil || !strings.Contains(string(rec), fmt.Sprintf(`"seed": %d`, o.Seed)) {
		t.Errorf("meta/datagen.json: %s %v", rec, err)
	}
}

// requireFFmpeg skips a test without ffmpeg/ffprobe, except in CI (or with
// LRSTREAM_REQUIRE_FFMPEG), where their absence fails it.
func requireFFmpeg(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"ffmpeg", "ffprobe"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" || os.Getenv("LRSTREAM_REQUIRE_FFMPEG") != "" {
				t.Fatalf("CI: %s not found: %v", tool, err)
			}
			t.Skipf("%s not found: %v", tool, err)
		}
	}
}

// probeVideo is a video file's codec, size and decoded frame count.
func probeVideo(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
		"stream=codec_name,width,height,pix_fmt,nb_read_frames", "-of", "csv=p=0", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ffprobe %s: %v: %s", path, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestVideoGOP: --video-gop sets the videos' keyframe interval (LeRobot's
// 2 by default) and is recorded in meta/datagen.json; bad values fail.
func TestVideoGOP(t *testing.T) {
	requireFFmpeg(t)
	for _, tc := range []struct {
		gop, keyframes int
		record         string
	}{
		{0, 10, `"videos": "h264 32x16"`}, // default 2: 20 frames, 10 keyframes
		{5, 4, `"videos": "h264 32x16 gop 5"`},
		{100, 1, `"videos": "h264 32x16 gop 100"`},
	} {
		t.Run(fmt.Sprint(tc.gop), func(t *testing.T) {
			o := Options{Episodes: 1, MinFrames: 20, MaxFrames: 20, Cameras: []string{"front"}, Density: DensitySparse,
				Dim: 2, Tasks: 1, Videos: true, VideoWidth: 32, VideoHeight: 16, VideoGOP: tc.gop, Workers: 1}
			dir, _ := gen(t, o)
			out, err := exec.Command("ffprobe", "-v", "error", "-skip_frame", "nokey", "-count_frames", "-select_streams",
				"v:0", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0",
				filepath.Join(dir, "videos", "observation.images.front", "chunk-000", "file-000.mp4")).CombinedOutput()
			if err != nil {
				t.Fatalf("ffprobe: %v: %s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != fmt.Sprint(tc.keyframes) {
				t.Errorf("keyframes %s, want %d", got, tc.keyframes)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "meta", "datagen.json")); !bytes.Contains(b, []byte(tc.record)) {
				t.Errorf("datagen.json lacks %s:\n%s", tc.record, b)
			}
		})
	}
	for _, gop := range []int{-1, 1001} {
		o := Options{Episodes: 1, Videos: true, VideoGOP: gop}
		if _, err := o.withDefaults(); err == nil || !strings.Contains(err.Error(), "video GOP") {
			t.Errorf("gop %d: %v, want a video GOP error", gop, err)
		}
	}
}
