package pipeline

import (
	"fmt"
	"testing"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/fetch/objstore"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
)

// pinnedFake is a fetch.Source with pins (the other methods are not
// called).
type pinnedFake struct {
	fetch.Source
	pins map[string]objstore.Pin
}

func (p pinnedFake) Pins() map[string]objstore.Pin { return p.pins }
func (p pinnedFake) PinHash() string               { return "etag" }

// TestHeaderPinsRunFiles: the header pins the metadata the run reads and
// the data files of the selected episodes, not the other objects; Hub and
// local sources get none.
func TestHeaderPinsRunFiles(t *testing.T) {
	pins := map[string]objstore.Pin{}
	for _, n := range []string{"meta/info.json", "meta/tasks.parquet", "meta/stats.json", "meta/episodes/chunk-000/file-000.parquet",
		"data/chunk-000/file-000.parquet", "data/chunk-000/file-001.parquet", "data/chunk-001/file-000.parquet", "README.md"} {
		pins[n] = objstore.Pin{Size: int64(len(n)), ETag: "e-" + n}
	}
	ds := &schema.Dataset{ID: "s3://b/p", Revision: "r", Episodes: []schema.Episode{
		{Index: 0, DataChunk: 0, DataFile: 0}, {Index: 1, DataChunk: 0, DataFile: 0},
		{Index: 2, DataChunk: 0, DataFile: 1}, {Index: 3, DataChunk: 1, DataFile: 0},
	}}
	meta := []string{"meta/episodes/chunk-000/file-000.parquet", "meta/info.json", "meta/tasks.parquet"}
	for _, tc := range []struct {
		sel  string
		data []string
	}{
		{"", []string{"data/chunk-000/file-000.parquet", "data/chunk-000/file-001.parquet", "data/chunk-001/file-000.parquet"}},
		{"0-1", []string{"data/chunk-000/file-000.parquet"}},
		{"1,3", []string{"data/chunk-000/file-000.parquet", "data/chunk-001/file-000.parquet"}},
	} {
		t.Run(tc.sel, func(t *testing.T) {
			sel, err := shard.ParseSelection(tc.sel, "")
			if err != nil {
				t.Fatal(err)
			}
			got := headerPins(&Config{Source: pinnedFake{pins: pins}, Dataset: ds, Selection: sel})
			if len(got) != 1 || got[0].Objects != int64(len(pins)) || got[0].Hash != "etag" || got[0].Revision != "r" {
				t.Fatalf("pins %+v", got)
			}
			var names []string
			for _, f := range got[0].Files {
				if p := pins[f.Name]; p.Size != f.Size || p.ETag != f.Hash {
					t.Fatalf("%s pinned as %+v", f.Name, f)
				}
				names = append(names, f.Name)
			}
			want := append(append([]string{}, tc.data...), meta...)
			if fmt.Sprint(names) != fmt.Sprint(want) {
				t.Fatalf("pinned %v, want %v", names, want)
			}
		})
	}
	dir, err := fetch.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := headerPins(&Config{Source: dir, Dataset: ds}); got != nil {
		t.Fatalf("a local directory has pins %+v", got)
	}
}
