package schema

import (
	"strings"
	"testing"
)

func TestParseInfo(t *testing.T) {
	in, err := ParseInfo([]byte(`{
		"codebase_version": "v3.0", "robot_type": "so101", "fps": 30,
		"total_episodes": 2, "total_frames": 10, "total_tasks": 1, "chunks_size": 1000,
		"data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
		"features": {
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
	if got := strings.Join(names, " "); got != "z.last observation.images.front a.first language_persistent motors" {
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
