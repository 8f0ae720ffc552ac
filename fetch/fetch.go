// Package fetch says where a dataset's bytes come from: a local directory,
// the Hugging Face Hub (through a cache), or anything else that can list
// files and serve byte ranges. Nothing here knows about parquet or frames.
package fetch

import (
	"context"
	"io"
)

// File is one dataset file opened for random access.
type File interface {
	io.ReaderAt
	io.Closer
	// Size is the file's length in bytes.
	Size() int64
	// Name is the file's path relative to the dataset root, slash-separated.
	Name() string
}

// Range is a byte range [Off, Off+Len) of a file.
type Range struct {
	Off, Len int64
}

// Prefetcher is implemented by files that benefit from knowing, ahead of
// the reads, which byte ranges will be read (remote files coalesce them
// into few concurrent range requests). Reads outside prefetched ranges must
// still work.
type Prefetcher interface {
	Prefetch(ctx context.Context, ranges []Range) error
}

// Source is a dataset's storage.
type Source interface {
	// ID names the dataset for headers and errors: a directory path or a
	// Hub repo id.
	ID() string
	// Revision is the resolved revision (a commit SHA for the Hub, "" for
	// a local directory).
	Revision() string
	// List returns the relative, slash-separated paths of all files under
	// dir ("" for the whole dataset), sorted.
	List(ctx context.Context, dir string) ([]string, error)
	// Open opens the file at the relative path name.
	Open(ctx context.Context, name string) (File, error)
}

// ReadAll reads a whole (small) file, such as meta/info.json.
func ReadAll(ctx context.Context, src Source, name string) ([]byte, error) {
	f, err := src.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, f.Size())
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return buf, nil
}
