package shard

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lrstream/lrstream/internal/tamper"
	"github.com/lrstream/lrstream/schema"
)

// sortedDir is the conformance dataset whose episodes are one row group
// each: 16 episodes, 1065 frames, episodes 0-5 in file-000 (episode 0 has
// 68 frames, episode 1 47).
func sortedDir(t testing.TB) string {
	dir := filepath.Join(conformanceDir(t), "pub_sorted_three_cams")
	if _, err := os.Stat(dir); err != nil {
		t.Skip(err)
	}
	return dir
}

const (
	episodesFile = "meta/episodes/chunk-000/file-000.parquet"
	dataFile0    = "data/chunk-000/file-000.parquet"
	dataFile1    = "data/chunk-000/file-001.parquet"
)

func editInfo(old, new string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		if err := tamper.Replace(filepath.Join(dir, InfoPath), old, new); err != nil {
			t.Fatal(err)
		}
	}
}

func editParquet(name string, edit tamper.Edit) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		if err := tamper.Parquet(filepath.Join(dir, name), edit); err != nil {
			t.Fatal(err)
		}
	}
}

// integrityCases are the tamperings of issue 17 (items 2-6) and issue 16
// (item 8), each with the words its error must contain. Every frame the
// metadata promises is either streamed or reported.
var integrityCases = []struct {
	name   string
	tamper func(t *testing.T, dir string)
	want   []string
	// tolerable: with --on-inconsistent warn, the problem is reported
	// through Tolerate and reading continues.
	tolerable bool
	// readErr, for a tolerable case, is what the tolerant read still fails
	// on: a frame that disagrees with the index is never streamed.
	readErr string
}{
	{"episode moved to another file", editParquet(episodesFile, tamper.SetInt("data/file_index", 2, 1)),
		[]string{dataFile0, "row group 2", "episode 2", "does not assign to this file", "assigns it to " + dataFile1}, true, ""},
	{"episode moved to a missing file", editParquet(episodesFile, tamper.SetInt("data/file_index", 2, 5)),
		[]string{dataFile0, "episode 2", "assigns it to data/chunk-000/file-005.parquet"}, false, ""},
	{"episode id changed", editParquet(episodesFile, tamper.SetInt("episode_index", 3, 99)),
		[]string{dataFile0, "episode 3", "does not assign to this file"}, true, ""},
	{"episode range shifted", editParquet(episodesFile, tamper.SetInt("dataset_to_index", 15, 1064)),
		[]string{episodesFile, "episode 15", "length 85", "spans 84"}, true, "index 1064 is outside episode 15's range [980, 1064)"},
	{"total_frames", editInfo(`"total_frames": 1065`, `"total_frames": 1066`),
		[]string{InfoPath, "total_frames is 1066", "1065 frames"}, true, ""},
	{"total_episodes", editInfo(`"total_episodes": 16`, `"total_episodes": 17`),
		[]string{InfoPath, "total_episodes is 17", "16 episodes"}, true, ""},
	{"data row of another indexed episode", editParquet(dataFile0, tamper.SetInt(ColEpisodeIndex, 70, 0)),
		[]string{dataFile0, "row group 0", "episode 0", "index 70", "outside episode 0's range [0, 68)"}, false, ""},
	{"data row of an unindexed episode", editParquet(dataFile0, tamper.SetInt(ColEpisodeIndex, 70, 99)),
		[]string{dataFile0, "episode 99", "does not assign to this file"}, true, ""},
	{"data row of an episode of another file", editParquet(dataFile0, tamper.SetInt(ColEpisodeIndex, 70, 7)),
		[]string{dataFile0, "episode 7", "assigns it to " + dataFile1}, true, ""},
	{"language column missing from one file", editParquet(dataFile1, tamper.Drop(schema.ColumnPersistent)),
		[]string{dataFile1, "column language_persistent", "language column declared in meta/info.json is missing"}, false, ""},
	{"numeric feature missing from one file", editParquet(dataFile1, tamper.Drop("action")),
		[]string{dataFile1, "column action", "missing"}, false, ""},
	{"task_index not in tasks", editParquet(dataFile0, tamper.SetInt(ColTaskIndex, 70, 42)),
		[]string{dataFile0, "episode 1", "index 70", "frame_index 2", "task_index 42 is not in meta/tasks.parquet"}, false, ""},
	{"frame_index off", editParquet(dataFile0, tamper.SetInt(ColFrameIndex, 70, 5)),
		[]string{dataFile0, "episode 1", "index 70", "frame_index 5"}, false, ""},
	{"NaN timestamp", editParquet(dataFile0, tamper.SetFloat32(ColTimestamp, 0, float32(math.NaN()))),
		[]string{dataFile0, "row group 0", "episode 0", "index 0", "frame_index 0", "timestamp NaN"}, false, ""},
	{"+inf timestamp", editParquet(dataFile0, tamper.SetFloat32(ColTimestamp, 70, float32(math.Inf(1)))),
		[]string{dataFile0, "episode 1", "frame_index 2", "timestamp +Inf"}, false, ""},
	{"negative timestamp", editParquet(dataFile0, tamper.SetFloat32(ColTimestamp, 70, -0.5)),
		[]string{dataFile0, "episode 1", "frame_index 2", "timestamp -0.5"}, false, ""},
	{"v2.1 label on a v3 layout", editInfo(`"codebase_version": "v3.0"`, `"codebase_version": "v2.1"`),
		[]string{InfoPath, schema.ConvertV21Module, "v3 layout"}, false, ""},
	{"fps 0", editInfo(`"fps": 30`, `"fps": 0`), []string{InfoPath, "fps 0"}, false, ""},
}

func TestIntegrity(t *testing.T) {
	base := sortedDir(t)
	for _, c := range integrityCases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDataset(t, base)
			c.tamper(t, dir)
			wantErr(t, readAllErr(mustDir(t, dir), Selection{}, Options{Features: []string{}}), c.want...)
			if !c.tolerable {
				return
			}
			// Opted in: reported through Tolerate, reading continues.
			var mu sync.Mutex
			var warned []error
			ctx := context.Background()
			src := mustDir(t, dir)
			ds, err := OpenDatasetWith(ctx, src, OpenOptions{Tolerate: func(err error) {
				mu.Lock()
				warned = append(warned, err)
				mu.Unlock()
			}})
			if err != nil {
				t.Fatalf("tolerant open: %v", err)
			}
			units, err := Plan(ctx, src, ds, Selection{})
			if err != nil {
				t.Fatalf("tolerant plan: %v", err)
			}
			if len(warned) == 0 {
				t.Fatal("nothing reported")
			}
			if err := errors.Join(warned...); !strings.Contains(err.Error(), c.want[1]) {
				t.Errorf("reported %v, want it to mention %q", err, c.want[1])
			}
			// Reading goes on: the frames the warning names are not streamed.
			frames := 0
			for _, u := range units {
				b, err := ReadUnit(ctx, src, ds, u, Options{Features: []string{}})
				if err != nil && c.readErr != "" {
					wantErr(t, err, c.readErr)
					return
				}
				if err != nil {
					t.Fatalf("tolerant read: %v", err)
				}
				frames += b.Len()
			}
			if frames == 0 {
				t.Error("nothing read")
			}
			t.Logf("%d frames read; reported: %v", frames, warned)
		})
	}
}

func TestIntegrityCleanDatasets(t *testing.T) {
	for _, dir := range append(conformanceDatasets(t), realDatasets(t)...) {
		ctx := context.Background()
		src := mustDir(t, dir)
		ds, err := OpenDataset(ctx, src)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		units, err := Plan(ctx, src, ds, Selection{})
		if err != nil || len(units) == 0 {
			t.Fatalf("%s: Plan: %d units, %v", dir, len(units), err)
		}
	}
}

func TestMissingEpisodes(t *testing.T) {
	ds := &schema.Dataset{}
	for _, i := range []int64{0, 1, 2, 5, 6, 9, 10, 11} {
		ds.Episodes = append(ds.Episodes, schema.Episode{Index: i})
	}
	for _, c := range []struct{ sel, want string }{
		{"", ""}, {"3,50", "3,50"}, {"0-2", ""}, {"0-11", "3-4,7-8"}, {"10-20", "12-20"},
		{"4-5", "4"}, {"0-9223372036854775807", "3-4,7-8,12-9223372036854775807"},
	} {
		sel, err := ParseSelection(c.sel, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := MissingEpisodes(ds, sel).String(); got != c.want {
			t.Errorf("MissingEpisodes(%q) = %q, want %q", c.sel, got, c.want)
		}
	}
}

// TestV21Dataset: a v2.1 layout is told to convert, without the v3-layout
// note.
func TestV21Dataset(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "meta"), 0o755)
	os.WriteFile(filepath.Join(dir, "meta/info.json"), []byte(`{"codebase_version": "v2.1", "fps": 30, "chunks_size": 1000,
		"data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet", "features": {}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "meta/episodes.jsonl"), []byte(`{"episode_index": 0, "length": 10}`+"\n"), 0o644)
	_, err := OpenDataset(context.Background(), mustDir(t, dir))
	wantErr(t, err, "meta/info.json", `codebase_version "v2.1"`, "python -m "+schema.ConvertV21Module)
	if strings.Contains(err.Error(), "v3 layout") {
		t.Errorf("v3-layout note on a v2.1 layout: %v", err)
	}
}

// TestMissingDataFile: selecting only the episode whose data file does not
// exist names the file and the episode.
func TestMissingDataFile(t *testing.T) {
	dir := copyDataset(t, sortedDir(t))
	editParquet(episodesFile, tamper.SetInt("data/file_index", 2, 5))(t, dir)
	sel, _ := ParseSelection("2", "")
	wantErr(t, readAllErr(mustDir(t, dir), sel, Options{}), "data/chunk-000/file-005.parquet", "episode 2", "assigns episodes 2 to this file")
}

// BenchmarkCheckFrames measures the per-frame metadata checks ReadUnit
// applies (checkFrames) on every unit of a conformance dataset, to set
// against BenchmarkReadUnit's decode cost per frame.
func BenchmarkCheckFrames(b *testing.B) {
	src := mustDir(b, filepath.Join(conformanceDir(b), "pub_inferred_front_wrist"))
	ctx := context.Background()
	ds, err := OpenDataset(ctx, src)
	if err != nil {
		b.Skip(err)
	}
	units, err := Plan(ctx, src, ds, Selection{})
	if err != nil {
		b.Fatal(err)
	}
	batches := make([]*Batch, len(units))
	for i, u := range units {
		if batches[i], err = ReadUnit(ctx, src, ds, u, Options{Features: []string{}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	frames := 0
	cpu0, m0 := cpuTime(), mallocs()
	for b.Loop() {
		for i := range units {
			if err := checkFrames(src, ds, &units[i], batches[i]); err != nil {
				b.Fatal(err)
			}
			frames += batches[i].Len()
		}
	}
	reportFrames(b, frames, cpuTime()-cpu0, mallocs()-m0)
}
