package validate

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/tamper"
	"github.com/lrstream/lrstream/internal/testkit"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/video"
)

func shared(t testing.TB, parts ...string) string { return testkit.Shared(t, parts...) }

func conformance(t testing.TB, name string) string {
	return shared(t, "conformance", "datasets", name)
}

func runDir(t *testing.T, dir string, opts Options) *Report {
	t.Helper()
	src, err := fetch.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), src, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// has reports whether rep has a finding of check and severity whose text
// (location and message) contains every part.
func has(rep *Report, sev Severity, check string, parts ...string) bool {
	for _, f := range rep.Findings {
		if f.Severity != sev || f.Check != check {
			continue
		}
		s := f.String()
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(s, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func dump(rep *Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		b.WriteString("\n  " + f.String())
	}
	return b.String()
}

// TestCleanDatasets: the conformance kit and the real datasets have no
// error. Their findings are warnings for the absent videos/ directory
// (the kit ships without videos) and task_aug coverage facts.
func TestCleanDatasets(t *testing.T) {
	var dirs []string
	for _, root := range []string{shared(t, "conformance", "datasets"), shared(t, "datasets", "real")} {
		ents, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(root, e.Name()))
			}
		}
	}
	if len(dirs) < 6 {
		t.Fatalf("%d datasets found", len(dirs))
	}
	for _, dir := range dirs {
		rep := runDir(t, dir, Options{})
		if !rep.Clean() || rep.FramesRead != rep.Frames || rep.Frames == 0 {
			t.Errorf("%s: %d errors, %d/%d frames read:%s", dir, rep.Errors, rep.FramesRead, rep.Frames, dump(rep))
		}
		for _, f := range rep.Findings {
			if f.Severity == Warning && f.Check != CheckVideo {
				t.Errorf("%s: unexpected warning %s", dir, f)
			}
		}
	}
}

const (
	episodesFile = "meta/episodes/chunk-000/file-000.parquet"
	dataFile0    = "data/chunk-000/file-000.parquet"
	dataFile1    = "data/chunk-000/file-001.parquet"
	infoFile     = "meta/info.json"
)

type want struct {
	sev   Severity
	check string
	parts []string
}

func TestTampered(t *testing.T) {
	info := func(old, new string) func(string) error {
		return func(dir string) error { return tamper.Replace(filepath.Join(dir, infoFile), old, new) }
	}
	pq := func(name string, e tamper.Edit) func(string) error {
		return func(dir string) error { return tamper.Parquet(filepath.Join(dir, name), e) }
	}
	all := func(fs ...func(string) error) func(string) error {
		return func(dir string) error {
			for _, f := range fs {
				if err := f(dir); err != nil {
					return err
				}
			}
			return nil
		}
	}
	cases := []struct {
		name   string
		tamper func(dir string) error
		want   []want
	}{
		{"episode moved to another file", pq(episodesFile, tamper.SetInt("data/file_index", 2, 1)), []want{
			{Error, CheckDataFile, []string{dataFile0, "episode 2", "does not assign to this file"}},
			{Error, CheckDataFile, []string{dataFile1, "episode 2", "no row group holds"}},
			{Error, CheckDataFile, []string{"991 frames read", "promises 1065"}},
		}},
		{"episode id changed", pq(episodesFile, tamper.SetInt("episode_index", 3, 99)), []want{
			{Error, CheckDataFile, []string{dataFile0, "episode 3", "does not assign"}},
			{Error, CheckDataFile, []string{dataFile0, "episode 99", "no row group holds"}},
			{Warning, CheckIndex, []string{"not contiguous", "3,16-98 missing"}},
		}},
		{"info totals", info(`"total_frames": 1065`, `"total_frames": 1066`), []want{
			{Error, CheckIndex, []string{infoFile, "total_frames is 1066"}},
		}},
		{"every info.json problem", all(info(`"fps": 30`, `"fps": -30`), info(`"chunks_size": 1000`, `"chunks_size": 0`),
			info(`"dtype": "float32"`, `"dtype": "float33"`)), []want{
			{Error, CheckInfo, []string{"fps -30"}},
			{Error, CheckInfo, []string{"chunks_size 0"}},
			{Error, CheckInfo, []string{`unknown dtype "float33"`}},
		}},
		{"missing info key", info(`"total_tasks": 2,`, ``), []want{
			{Error, CheckInfo, []string{`required key "total_tasks" is missing`}},
		}},
		{"v2.1", info(`"codebase_version": "v3.0"`, `"codebase_version": "v2.1"`), []want{
			{Error, CheckInfo, []string{schema.ConvertV21Module}},
		}},
		{"language column missing from one file", pq(dataFile1, tamper.Drop(schema.ColumnPersistent)), []want{
			{Error, CheckDataFile, []string{dataFile1, "column language_persistent", "missing"}},
		}},
		{"data row of another episode", pq(dataFile0, tamper.SetInt("episode_index", 70, 0)), []want{
			{Error, CheckFrame, []string{dataFile0, "episode 0", "index 70", "outside episode 0's range"}},
		}},
		{"task_index missing", pq(dataFile0, tamper.SetInt("task_index", 70, 7)), []want{
			{Error, CheckFrame, []string{dataFile0, "episode 1", "index 70", "task_index 7 is not in meta/tasks.parquet"}},
		}},
		{"NaN timestamp", pq(dataFile0, tamper.SetFloat32("timestamp", 0, float32(math.NaN()))), []want{
			{Error, CheckFrame, []string{dataFile0, "episode 0", "index 0", "timestamp NaN"}},
		}},
		{"timestamp gap", pq(dataFile0, tamper.SetFloat32("timestamp", 5, 0.5)), []want{
			{Warning, CheckTiming, []string{dataFile0, "episode 0", "index 5", "1/fps"}},
		}},
		{"timestamp backwards", pq(dataFile0, tamper.SetFloat32("timestamp", 5, 0.01)), []want{
			{Warning, CheckTiming, []string{dataFile0, "episode 0", "index 5", "does not increase"}},
		}},
		{"placeholder task", pq("meta/tasks.parquet", tamper.SetString("__index_level_0__", 1, "test")), []want{
			{Warning, CheckTasks, []string{"task_index 1", `placeholder task string "test"`}},
		}},
		{"unindexed data file", func(dir string) error {
			data, err := os.ReadFile(filepath.Join(dir, dataFile0))
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "data/chunk-000/file-009.parquet"), data, 0o644)
		}, []want{
			{Warning, CheckDataFile, []string{"data/chunk-000/file-009.parquet", "never read"}},
		}},
		{"tool not in catalog", info(`"name": "say"`, `"name": "wave"`), []want{
			{Error, CheckLanguage, []string{`names "say", which is not in the tool catalog`}},
		}},
		{"camera not a feature", info(`"observation.images.top": {`, `"observation.images.topcam": {`), []want{
			{Error, CheckLanguage, []string{"language_events", `camera "observation.images.top" is not a video or image feature`}},
		}},
		{"rows in the wrong column", pq(dataFile0, func(f []arrow.Field, c []arrow.Array) ([]arrow.Field, []arrow.Array, error) {
			f, c, err := tamper.Rename(schema.ColumnPersistent, "tmp")(f, c)
			if err == nil {
				f, c, err = tamper.Rename(schema.ColumnEvents, schema.ColumnPersistent)(f, c)
			}
			if err == nil {
				f, c, err = tamper.Rename("tmp", schema.ColumnEvents)(f, c)
			}
			return f, c, err
		}), []want{
			{Error, CheckLanguage, []string{dataFile0, "language_events", "is persistent but the row is in language_events"}},
			{Error, CheckLanguage, []string{dataFile0, "language_persistent", "is event-only but the row is in language_persistent"}},
		}},
	}
	base := conformance(t, "pub_sorted_three_cams")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tamper.CopyDataset(base, dir); err != nil {
				t.Fatal(err)
			}
			if err := c.tamper(dir); err != nil {
				t.Fatal(err)
			}
			rep := runDir(t, dir, Options{})
			for _, w := range c.want {
				if !has(rep, w.sev, w.check, w.parts...) {
					t.Errorf("no %s %s finding with %q:%s", w.sev, w.check, w.parts, dump(rep))
				}
			}
			if w := c.want[0]; w.sev == Error && rep.Clean() {
				t.Error("report clean")
			}
			if _, err := json.Marshal(rep); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestVideos(t *testing.T) {
	dir := t.TempDir()
	if err := tamper.CopyDataset(conformance(t, "pub_jsonext_front_wrist"), dir); err != nil {
		t.Fatal(err)
	}
	rep := runDir(t, dir, Options{VideoNote: "no ffmpeg in this test"})
	if !has(rep, Warning, CheckVideo, "no video files") || !strings.Contains(strings.Join(rep.NotChecked, "\n"), "video files: none present") || !rep.Clean() {
		t.Fatalf("no videos:%s %q", dump(rep), rep.NotChecked)
	}
	// One camera's file present but not a video, the other's absent.
	front := filepath.Join(dir, "videos/observation.images.front/chunk-000/file-000.mp4")
	os.MkdirAll(filepath.Dir(front), 0o755)
	os.WriteFile(front, []byte("not a video"), 0o644)
	rep = runDir(t, dir, Options{VideoNote: "no ffmpeg in this test"})
	if !has(rep, Warning, CheckVideo, "videos/observation.images.wrist/chunk-000/file-000.mp4", "no video files: none of the camera's") {
		t.Errorf("absent camera not reported:%s", dump(rep))
	}
	if !strings.Contains(strings.Join(rep.NotChecked, "\n"), "no ffmpeg in this test") {
		t.Errorf("not_checked %q", rep.NotChecked)
	}
	ff, err := video.NewFFmpeg()
	if err != nil {
		t.Skip(err) // the corruption sweep requires it under CI
	}
	rep = runDir(t, dir, Options{Video: ff})
	if !has(rep, Error, CheckVideo, "videos/observation.images.front/chunk-000/file-000.mp4", "cannot read the video") {
		t.Errorf("a file that is not a video not reported:%s", dump(rep))
	}
}

func TestRecipe(t *testing.T) {
	load := func(name string) *render.Recipe {
		r, err := render.LoadFile(shared(t, "recipes", name))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// No language columns: the recipe's bindings never resolve, drop
	// cannot batch the passthrough frames with task-only renders or it
	// renders nothing; fallback renders every frame.
	real := shared(t, "datasets", "real", "SamueleSandrini__record-test")
	rep := runDir(t, real, Options{Recipe: load("subtask_mem_vqa_speech.yaml"), Mode: render.ModeFallback})
	if !has(rep, Warning, CheckRecipe, "reads language_persistent, which this dataset does not declare") {
		t.Errorf("undeclared column not reported:%s", dump(rep))
	}
	if !has(rep, Info, CheckRecipe, "1492 frames") {
		t.Errorf("no outcome summary:%s", dump(rep))
	}
	// The kit with --mode drop: frames without language pass through and
	// cannot share batches with rendered ones.
	rep = runDir(t, conformance(t, "pub_jsonext_front_wrist"), Options{Recipe: load("subtask.yaml"), Mode: render.ModeDrop})
	if !has(rep, Error, CheckRecipe, "--mode drop cannot batch") {
		t.Errorf("drop batching not reported:%s", dump(rep))
	}
	rep = runDir(t, conformance(t, "pub_jsonext_front_wrist"), Options{Recipe: load("subtask.yaml"), Mode: render.ModeFallback})
	if has(rep, Error, CheckRecipe, "--mode drop") {
		t.Errorf("fallback reported as unbatchable:%s", dump(rep))
	}
}
