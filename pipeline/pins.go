package pipeline

import (
	"sort"
	"strings"

	"github.com/lrstream/lrstream/fetch/objstore"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

// pinnedSource is a source whose objects were pinned when the run started
// (objstore.Source: s3://, hf://buckets/).
type pinnedSource interface {
	Pins() map[string]objstore.Pin
	PinHash() string
}

// headerPins are the header's pins of the datasets of cfgs that live in an
// object store (none for Hub repos, pinned by their commit, and local
// directories).
func headerPins(cfgs ...*Config) []sink.DatasetPins {
	var out []sink.DatasetPins
	for _, cfg := range cfgs {
		ps, ok := cfg.Source.(pinnedSource)
		if !ok {
			continue
		}
		pins := ps.Pins()
		d := sink.DatasetPins{Dataset: cfg.Dataset.ID, Revision: cfg.Dataset.Revision, Hash: ps.PinHash(), Objects: int64(len(pins))}
		for _, name := range runFiles(cfg, pins) {
			p := pins[name]
			d.Files = append(d.Files, sink.PinnedFile{Name: name, Size: p.Size, Hash: p.ETag})
		}
		out = append(out, d)
	}
	return out
}

// runFiles are the pinned files a run of cfg reads, sorted: the metadata
// shard.OpenDataset reads (info.json, tasks, every episodes index file),
// the data files of the selected episodes and the video files of their
// decoded cameras.
func runFiles(cfg *Config, pins map[string]objstore.Pin) []string {
	ds := cfg.Dataset
	set := map[string]bool{shard.InfoPath: true, shard.TasksPath: true}
	for name := range pins {
		if strings.HasPrefix(name, shard.EpisodesDir+"/") {
			set[name] = true
		}
	}
	var eps []int64
	for _, e := range ds.Episodes {
		if !cfg.Selection.Contains(e.Index) {
			continue
		}
		eps = append(eps, e.Index)
		if name, err := ds.Info.DataFile(e.DataChunk, e.DataFile); err == nil {
			set[name] = true
		}
	}
	if cfg.Cameras != nil && eps != nil {
		if files, _, err := cfg.Cameras.Files(eps); err == nil {
			for _, f := range files {
				set[f] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for name := range set {
		if _, ok := pins[name]; ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
