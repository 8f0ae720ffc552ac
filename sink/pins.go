package sink

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/lrstream/lrstream/schema"
)

// DatasetPins are the object versions a stream of an object store dataset
// (s3://…, hf://buckets/…) reads, pinned when the run started: the
// header's "pins" (docs/wire-format.md). Hub repos (pinned by their commit)
// and local directories have none.
type DatasetPins struct {
	// Dataset is the dataset's id, as in the header's dataset.
	Dataset string
	// Revision is the digest of the whole listing (every object under the
	// prefix), the dataset's revision.
	Revision string
	// Hash names what File.Hash holds: "etag" (S3) or "xet" (a Storage
	// Bucket file's Xet content hash).
	Hash string
	// Objects is the number of objects in the listing.
	Objects int64
	// Files are the files the run reads, sorted by name.
	Files []PinnedFile
}

// PinnedFile is one pinned object: its dataset-relative path, size and
// hash (an ETag without quotes, or a Xet hash).
type PinnedFile struct {
	Name string
	Size int64
	Hash string
}

// appendPins appends the header's pins: an array of one map per dataset,
// {dataset, revision, hash, objects, files}, where files maps each
// directory ("" for the root) to its files' [name, size, hash] arrays
// (name relative to the directory), directories and files sorted: a
// directory's path is written once, not once per file.
func appendPins(b []byte, pins []DatasetPins) []byte {
	b = mpArrayHeader(b, len(pins))
	for _, p := range pins {
		b = mpMapHeader(b, 5)
		b = mpStr(b, "dataset")
		b = mpStr(b, p.Dataset)
		b = mpStr(b, "revision")
		b = mpStr(b, p.Revision)
		b = mpStr(b, "hash")
		b = mpStr(b, p.Hash)
		b = mpStr(b, "objects")
		b = mpInt(b, p.Objects)
		b = mpStr(b, "files")
		dirs, byDir := groupByDir(p.Files)
		b = mpMapHeader(b, len(dirs))
		for _, d := range dirs {
			b = mpStr(b, d)
			fs := byDir[d]
			b = mpArrayHeader(b, len(fs))
			for _, f := range fs {
				b = mpArrayHeader(b, 3)
				b = mpStr(b, path.Base(f.Name))
				b = mpInt(b, f.Size)
				b = mpStr(b, f.Hash)
			}
		}
	}
	return b
}

// groupByDir groups files by directory, both sorted.
func groupByDir(files []PinnedFile) ([]string, map[string][]PinnedFile) {
	byDir := map[string][]PinnedFile{}
	for _, f := range files {
		d := path.Dir(f.Name)
		if d == "." {
			d = ""
		}
		byDir[d] = append(byDir[d], f)
	}
	dirs := make([]string, 0, len(byDir))
	for d, fs := range byDir {
		dirs = append(dirs, d)
		sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	}
	sort.Strings(dirs)
	return dirs, byDir
}

// pinsFromValue decodes the header's pins.
func pinsFromValue(v any) ([]DatasetPins, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("sink: header pins: not an array")
	}
	out := make([]DatasetPins, 0, len(list))
	for i, e := range list {
		m, ok := e.(schema.Map)
		if !ok {
			return nil, fmt.Errorf("sink: header pins[%d]: not a map", i)
		}
		p := DatasetPins{Dataset: getStr(m, "dataset"), Revision: getStr(m, "revision"), Hash: getStr(m, "hash"), Objects: getInt(m, "objects")}
		fv, _ := m.Get("files")
		dirs, ok := fv.(schema.Map)
		if !ok {
			return nil, fmt.Errorf("sink: header pins[%d] (%s): files is not a map", i, p.Dataset)
		}
		for k, d := range dirs.Keys {
			fs, _ := dirs.Values[k].([]any)
			for _, f := range fs {
				t, _ := f.([]any)
				if len(t) != 3 {
					return nil, fmt.Errorf("sink: header pins[%d] (%s): a file of %q is not [name, size, hash]", i, p.Dataset, d)
				}
				name, _ := t[0].(string)
				size, sok := t[1].(int64)
				hash, _ := t[2].(string)
				if name == "" || !sok || hash == "" {
					return nil, fmt.Errorf("sink: header pins[%d] (%s): a file of %q is not [name, size, hash]", i, p.Dataset, d)
				}
				if strings.Contains(name, "/") {
					return nil, fmt.Errorf("sink: header pins[%d] (%s): file name %q of %q has a slash", i, p.Dataset, name, d)
				}
				if d != "" {
					name = d + "/" + name
				}
				if !schema.SafeRelPath(name) {
					return nil, fmt.Errorf("sink: header pins[%d] (%s): %q is not a clean relative path", i, p.Dataset, name)
				}
				p.Files = append(p.Files, PinnedFile{Name: name, Size: size, Hash: hash})
			}
		}
		sort.Slice(p.Files, func(i, j int) bool { return p.Files[i].Name < p.Files[j].Name })
		out = append(out, p)
	}
	return out, nil
}
