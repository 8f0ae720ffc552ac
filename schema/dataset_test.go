package schema

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestParseInfo(t *testing.T) {
	in, err := ParseInfo([]byte(`{
		"codebase_version": "v3.0", "robot_type": "so101", "fps": 30,
		"total_episodes": 2, "total_frames": 10, "total_tasks": 1, "chunks_size": 1000,
		"data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
		"video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
		"features": {
			"timestamp": {"dtype": "float32", "shape": [1]}, "frame_index": {"dtype": "int64", "shape": [1]},
			"episode_index": {"dtype": "int64", "shape": [1]}, "index": {"dtype": "int64", "shape": [1]},
			"task_index": {"dtype": "int64", "shape": [1]},
			"z.last": {"dtype": "float32", "shape": [6], "names": ["a","b","c","d","e","f"]},
			"observation.images.front": {"dtype": "video", "shape": [480, 640, 3], "names": ["height", "width", "channels"]},
			"a.first": {"dtype": "int64", "shape": [1], "names": null},
			"language_persistent": {"dtype": "language", "shape": [1], "names": null},
			"motors": {"dtype": "float32", "shape": [2], "names": {"motors": ["x", "y"]}}
		},
		"tools": [{"type": "function", "function": {"name": "say"}}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range in.Features {
		names = append(names, f.Name)
	}
	if got := strings.Join(names[5:], " "); got != "z.last observation.images.front a.first language_persistent motors" {
		t.Fatalf("feature order %q", got)
	}
	if in.FPS != 30 || in.CodebaseVersion != "v3.0" || in.TotalFrames != 10 || in.ChunksSize != 1000 {
		t.Fatalf("info %+v", in)
	}
	if string(in.Tools) != `[{"type": "function", "function": {"name": "say"}}]` {
		t.Fatalf("tools %s", in.Tools)
	}
	f, ok := in.Feature("z.last")
	if !ok || !f.IsNumeric() || f.IsVisual() || f.Shape[0] != 6 || !strings.HasPrefix(string(f.Names), `["a"`) {
		t.Fatalf("feature %+v", f)
	}
	if f, _ := in.Feature("observation.images.front"); !f.IsVisual() || f.IsNumeric() {
		t.Fatalf("video feature %+v", f)
	}
	if !in.HasLanguage(ColumnPersistent) || in.HasLanguage(ColumnEvents) {
		t.Fatal("HasLanguage")
	}
	p, err := in.DataFile(1, 23)
	if err != nil || p != "data/chunk-001/file-023.parquet" {
		t.Fatalf("DataFile = %q, %v", p, err)
	}

	for _, bad := range []string{`{`, `{"fps": 1}`, `{"features": {}}`, `{"fps": 1, "features": []}`, `{"fps": 1, "features": {"a": {}, "a": {}}}`} {
		if _, err := ParseInfo([]byte(bad)); err == nil {
			t.Errorf("ParseInfo(%s): no error", bad)
		}
	}
}

func TestFormatPath(t *testing.T) {
	v := map[string]int64{"chunk_index": 7, "file_index": 1234}
	for tmpl, want := range map[string]string{
		"data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet": "data/chunk-007/file-1234.parquet",
		"{chunk_index}/{file_index:6d}":                              "7/  1234",
		"{{literal}}-{chunk_index:d}":                                "{literal}-7",
	} {
		got, err := FormatPath(tmpl, v)
		if err != nil || got != want {
			t.Errorf("FormatPath(%q) = %q, %v; want %q", tmpl, got, err, want)
		}
	}
	for _, bad := range []string{"{nope}", "{chunk_index", "x}", "{chunk_index:x}"} {
		if _, err := FormatPath(bad, v); err == nil {
			t.Errorf("FormatPath(%q): no error", bad)
		}
	}
}

func TestDatasetLookups(t *testing.T) {
	d := &Dataset{
		Tasks:    []Task{{0, "a"}, {1, "b"}, {5, "f"}},
		Episodes: []Episode{{Index: 0}, {Index: 1}, {Index: 3, Length: 9}},
	}
	for i, want := range map[int64]string{0: "a", 1: "b", 5: "f"} {
		if got, ok := d.TaskText(i); !ok || got != want {
			t.Errorf("TaskText(%d) = %q, %v", i, got, ok)
		}
	}
	if _, ok := d.TaskText(2); ok {
		t.Error("TaskText(2) found")
	}
	if e, ok := d.Episode(3); !ok || e.Length != 9 {
		t.Errorf("Episode(3) = %+v, %v", e, ok)
	}
	if _, ok := d.Episode(2); ok {
		t.Error("Episode(2) found")
	}
}

// validInfo is a minimal info.json that ParseInfo accepts; the table of
// TestParseInfoMeaning edits one field at a time.
const validInfo = `{"codebase_version": "v3.0", "fps": 30, "chunks_size": 1000,
	"total_episodes": 2, "total_frames": 10, "total_tasks": 1,
	"data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
	"video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
	"features": {
		"timestamp": {"dtype": "float32", "shape": [1]}, "frame_index": {"dtype": "int64", "shape": [1]},
		"episode_index": {"dtype": "int64", "shape": [1]}, "index": {"dtype": "int64", "shape": [1]},
		"task_index": {"dtype": "int64", "shape": [1]},
		"action": {"dtype": "float32", "shape": [6]},
		"observation.images.top": {"dtype": "video", "shape": [480, 640, 3]},
		"language_persistent": {"dtype": "language", "shape": [1]}
	}}`

func TestParseInfoMeaning(t *testing.T) {
	if _, err := ParseInfo([]byte(validInfo)); err != nil {
		t.Fatalf("valid info: %v", err)
	}
	for _, c := range []struct{ old, new, want string }{
		{`"fps": 30`, `"fps": 0`, "fps 0"},
		{`"fps": 30`, `"fps": -30`, "fps -30"},
		{`"fps": 30`, `"fps": 1e999`, "fps"},
		{`"fps": 30`, `"fps": 1e308`, "fps 1e+308: want a frame rate above 0 and at most 10000"},
		{`"fps": 30`, `"fps": 10000.5`, "fps 10000.5"},
		{`"fps": 30`, `"fps": 5e-324`, ""}, // accepted: positive (conversions are checked, SecondsToFrames)
		{`"shape": [6]`, `"shape": [1000000000000]`, `"action": shape [1000000000000]: more than`},
		{`"shape": [6]`, `"shape": [100000, 100000, 100000]`, `"action": shape [100000 100000 100000]: more than`},
		{`"chunks_size": 1000`, `"chunks_size": 0`, "chunks_size 0"},
		{`"total_frames": 10`, `"total_frames": -1`, "total_frames -1 is negative"},
		{`"total_frames": 10`, `"total_frames": 1`, "total_frames 1 < total_episodes 2"},
		{`"total_episodes": 2`, `"total_episodes": -2`, "total_episodes -2"},
		{`"shape": [6]`, `"shape": [0]`, `"action": shape [0]`},
		{`"shape": [6]`, `"shape": [6, -1]`, `"action": shape [6 -1]`},
		{`"action": {"dtype": "float32"`, `"action": {"dtype": "float33"`, `unknown dtype "float33"`},
		{`{chunk_index:03d}/file-{file_index:03d}.parquet`, `{episode_chunk:03d}/file-{file_index:03d}.parquet`, `data_path`},
		{`data/chunk-{chunk_index:03d}`, `../chunk-{chunk_index:03d}`, "not a relative path inside the dataset"},
		{`data/chunk-{chunk_index:03d}`, `/data/chunk-{chunk_index:03d}`, "not a relative path"},
		{`file-{file_index:03d}.parquet`, `file-{file_index:03d}.csv`, "not name a .parquet file"},
		{`videos/{video_key}/chunk-{chunk_index:03d}`, `videos/{camera}/chunk-{chunk_index:03d}`, `video_path`},
		{`"codebase_version": "v3.0"`, `"codebase_version": "v2.1"`, ConvertV21Module},
		{`"codebase_version": "v3.0"`, `"codebase_version": ""`, "no codebase_version"},
		{`"index": {"dtype": "int64", "shape": [1]},`, ``, `"index" (a core frame column) is not declared`},
	} {
		s := strings.Replace(validInfo, c.old, c.new, 1)
		if s == validInfo {
			t.Fatalf("case %q not applied", c.old)
		}
		_, err := ParseInfo([]byte(s))
		if c.want == "" {
			if err != nil {
				t.Errorf("%s → %s: %v, want it accepted", c.old, c.new, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: error %v, want %q", c.old, c.new, err, c.want)
		}
	}
}

func TestFeatureNames(t *testing.T) {
	in := &Info{Features: []Feature{
		{Name: "observation.images.top", DType: DTypeVideo},
		{Name: "observation.state", DType: "float32"},
		{Name: "observation.images.wrist", DType: DTypeImage},
		{Name: "observation.images.side", DType: DTypeVideo},
	}}
	for _, tc := range []struct {
		dtypes []string
		want   string
	}{
		{[]string{DTypeVideo}, "[observation.images.top observation.images.side]"},
		{[]string{DTypeImage}, "[observation.images.wrist]"},
		{[]string{DTypeVideo, DTypeImage}, "[observation.images.top observation.images.wrist observation.images.side]"},
		{[]string{"int64"}, "[]"},
	} {
		if got := fmt.Sprint(in.FeatureNames(tc.dtypes...)); got != tc.want {
			t.Errorf("FeatureNames(%v) = %s, want %s", tc.dtypes, got, tc.want)
		}
	}
}

func TestSecondsToFrames(t *testing.T) {
	for _, c := range []struct {
		sec, fps float64
		want     int64
		ok       bool
	}{
		{1, 30, 30, true},
		{-0.1, 30, -3, true},
		{0.05, 30, 2, true}, // 1.5 → 2 (half to even)
		{0.0833333, 30, 2, true},
		{1.0 / 60, 30, 0, true}, // 0.5 → 0 (half to even)
		{1e300, 30, 0, false},
		{-1e300, 10000, 0, false},
		{math.Inf(1), 30, 0, false},
		{math.NaN(), 30, 0, false},
		{1, math.NaN(), 0, false},
		{214748.3647, 10000, MaxFrameOffset, true},
		{214748.3648, 10000, 0, false},
	} {
		got, ok := SecondsToFrames(c.sec, c.fps)
		if got != c.want || ok != c.ok {
			t.Errorf("SecondsToFrames(%g, %g) = %d, %v; want %d, %v", c.sec, c.fps, got, ok, c.want, c.ok)
		}
	}
}
