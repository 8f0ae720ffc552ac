package video

import (
	"context"
	"slices"
	"sync"

	"github.com/lrstream/lrstream/fetch"
)

// Materializer locates the video files of any source through
// fetch.Materialize: a local directory's own files; a Hub dataset's files
// downloaded into the Hugging Face cache (--download full) or into private
// temporary files (--download none); an embedded dataset's files copied
// to temporary files. Each file is materialized once while in use (the
// segments of several workers share it) and kept for up to Keep more
// files after its last segment is done (the next piece or episode of the
// same file usually follows); older ones are released (a temporary file
// is removed). Only the files of the segments decoded are fetched. It is
// safe for concurrent use.
type Materializer struct {
	src  fetch.Source
	keep int

	mu    sync.Mutex
	files map[string]*matFile
	idle  []string // unreferenced files still kept, oldest first
}

type matFile struct {
	ready   chan struct{} // closed once path/release/err are set
	path    string
	release func()
	err     error
	refs    int
}

// NewMaterializer returns a Materializer for src keeping up to keep idle
// files (at least 1).
func NewMaterializer(src fetch.Source, keep int) *Materializer {
	return &Materializer{src: src, keep: max(1, keep), files: map[string]*matFile{}}
}

// Locate is a Locator: it returns the local path of dataset file name and
// a release function to call once the path is no longer needed.
func (m *Materializer) Locate(ctx context.Context, name string) (string, func(), error) {
	m.mu.Lock()
	f := m.files[name]
	first := f == nil
	if first {
		f = &matFile{ready: make(chan struct{})}
		m.files[name] = f
	}
	f.refs++
	m.idle = slices.DeleteFunc(m.idle, func(n string) bool { return n == name }) // in use again
	m.mu.Unlock()
	if first {
		f.path, f.release, f.err = fetch.Materialize(ctx, m.src, name)
		close(f.ready)
	} else {
		select {
		case <-f.ready:
		case <-ctx.Done():
			m.unref(name, f)
			return "", nil, ctx.Err()
		}
	}
	if f.err != nil {
		m.unref(name, f)
		return "", nil, f.err
	}
	var once sync.Once
	return f.path, func() { once.Do(func() { m.unref(name, f) }) }, nil
}

// Held is Set.Held: the local path of file name if it is materialized
// (in use or kept idle), with a reference like Locate's; nothing is
// fetched.
func (m *Materializer) Held(name string) (string, func(), bool) {
	m.mu.Lock()
	f := m.files[name]
	if f == nil {
		m.mu.Unlock()
		return "", nil, false
	}
	select {
	case <-f.ready:
	default:
		m.mu.Unlock()
		return "", nil, false // being fetched
	}
	if f.err != nil {
		m.mu.Unlock()
		return "", nil, false
	}
	f.refs++
	m.idle = slices.DeleteFunc(m.idle, func(n string) bool { return n == name }) // in use again
	m.mu.Unlock()
	var once sync.Once
	return f.path, func() { once.Do(func() { m.unref(name, f) }) }, true
}

// unref drops a reference to f; an unreferenced file becomes idle (or is
// forgotten when it failed, so that a later Locate tries again).
func (m *Materializer) unref(name string, f *matFile) {
	var drop []func()
	m.mu.Lock()
	f.refs--
	if f.refs == 0 {
		if f.err != nil {
			if m.files[name] == f {
				delete(m.files, name)
			}
		} else {
			m.idle = append(m.idle, name)
			for len(m.idle) > m.keep {
				old := m.idle[0]
				m.idle = m.idle[1:]
				drop = append(drop, m.files[old].release)
				delete(m.files, old)
			}
		}
	}
	m.mu.Unlock()
	for _, r := range drop {
		r()
	}
}

// Close releases the idle files (temporary files are removed). Files in
// use are released when their last user is done. The Materializer stays
// usable.
func (m *Materializer) Close() {
	m.mu.Lock()
	var drop []func()
	for _, n := range m.idle {
		drop = append(drop, m.files[n].release)
		delete(m.files, n)
	}
	m.idle = nil
	m.mu.Unlock()
	for _, r := range drop {
		r()
	}
}
