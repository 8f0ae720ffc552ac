package bench

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/lrstream/lrstream/fetch"
)

// countingSource counts the bytes read from the data files of a source.
type countingSource struct {
	fetch.Source
	read atomic.Int64
}

func (s *countingSource) Open(ctx context.Context, name string) (fetch.File, error) {
	f, err := s.Source.Open(ctx, name)
	if err != nil || !strings.HasPrefix(name, "data/") {
		return f, err
	}
	cf := &countingFile{File: f, n: &s.read}
	if p, ok := f.(fetch.Prefetcher); ok {
		return &countingPrefetchFile{countingFile: cf, p: p}, nil
	}
	return cf, nil
}

// countingFile adds every ReadAt's byte count to n.
type countingFile struct {
	fetch.File
	n *atomic.Int64
}

func (f *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

// countingPrefetchFile keeps the Prefetcher of a remote file.
type countingPrefetchFile struct {
	*countingFile
	p fetch.Prefetcher
}

func (f *countingPrefetchFile) Prefetch(ctx context.Context, ranges []fetch.Range) error {
	return f.p.Prefetch(ctx, ranges)
}
