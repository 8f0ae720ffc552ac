package lrstream

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"testing"
)

func TestDemo(t *testing.T) {
	d := Demo()
	b, err := fs.ReadFile(d, "meta/info.json")
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		CodebaseVersion string `json:"codebase_version"`
		TotalEpisodes   int    `json:"total_episodes"`
		TotalFrames     int    `json:"total_frames"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if info.CodebaseVersion != "v3.0" || info.TotalEpisodes != 12 || info.TotalFrames != 1175 {
		t.Fatalf("unexpected demo info: %+v", info)
	}
	for _, p := range []string{"meta/tasks.parquet", "meta/episodes/chunk-000/file-000.parquet", "data/chunk-000/file-000.parquet",
		// Every camera's videos: the demo shows camera frames.
		"videos/observation.images.front/chunk-000/file-000.mp4", "videos/observation.images.front/chunk-000/file-001.mp4",
		"videos/observation.images.front/chunk-001/file-000.mp4", "videos/observation.images.wrist/chunk-000/file-000.mp4",
		"videos/observation.images.wrist/chunk-000/file-001.mp4", "videos/observation.images.wrist/chunk-001/file-000.mp4"} {
		if _, err := fs.Stat(d, p); err != nil {
			t.Error(err)
		}
	}
	r := DemoRecipe()
	if !bytes.Contains(r, []byte("blend:")) || !bytes.Contains(r, []byte("observation.images.wrist")) {
		t.Fatalf("unexpected demo recipe:\n%s", r)
	}
	r[0] = 'X'
	if DemoRecipe()[0] == 'X' {
		t.Fatal("DemoRecipe returned shared memory")
	}
}
