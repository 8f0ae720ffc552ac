package fetch

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Materialize makes the dataset file name available at a local path, for
// tools that only read files (FFmpeg decoding a video). release must be
// called once the path is no longer needed; it never fails and is safe to
// call more than once.
//
//   - A local directory (NewDir) returns the file's real path; release
//     does nothing.
//   - An fs.FS source (NewFS, e.g. the embedded demo) copies the file to a
//     private temporary file; release removes it.
//   - A Hub source with CacheFull (or a file already in the cache snapshot,
//     or any metadata file) downloads the file into the huggingface_hub
//     cache (blobs/ + snapshot symlink, verified like a parquet shard) and
//     returns its snapshot path; release does nothing (the cache keeps it).
//   - A Hub source with CacheNone downloads data shards (data/, videos/)
//     to a private temporary file (mode 0600, verified against the listed
//     hash, resumed with Range requests after a cut), never into the cache;
//     release removes it.
//   - A Source implementing Materializer (an object store's source)
//     decides itself (its cache, or a private temporary download).
//   - Any other Source is copied to a temporary file through Open.
//
// Remote names are validated (ValidateRemotePath): they never escape the
// cache or the dataset directory.
func Materialize(ctx context.Context, src Source, name string) (p string, release func(), err error) {
	noop := func() {}
	switch s := src.(type) {
	case *Dir:
		if s.root != "" {
			clean := path.Clean(strings.TrimPrefix(name, "/"))
			if !fs.ValidPath(clean) || clean == "." {
				return "", nil, fmt.Errorf("materialize %s in %s: invalid path", name, s.id)
			}
			p := filepath.Join(s.root, filepath.FromSlash(clean))
			st, err := os.Stat(p)
			if err != nil {
				return "", nil, fmt.Errorf("materialize %s in %s: %w", name, s.id, err)
			}
			if !st.Mode().IsRegular() {
				return "", nil, fmt.Errorf("materialize %s in %s: not a regular file", name, s.id)
			}
			return p, noop, nil
		}
	case Materializer:
		return s.Materialize(ctx, name)
	case *Hub:
		p, release, err := s.materialize(ctx, name)
		if err != nil {
			return "", nil, s.scrub(fmt.Errorf("materialize %s in %s@%s: %w", name, s.id, shortSHA(s.sha), err))
		}
		return p, release, nil
	}
	return copyToTemp(ctx, src, name)
}

// tempFor creates a private temporary file keeping name's extension (FFmpeg
// and others use it as a format hint).
func tempFor(name string) (*os.File, error) {
	ext := path.Ext(name)
	if len(ext) > 16 || strings.ContainsAny(ext, "/\\*") {
		ext = ""
	}
	return os.CreateTemp("", "lrstream-*"+ext) // 0600
}

// copyToTemp copies a file of any Source to a temporary file.
func copyToTemp(ctx context.Context, src Source, name string) (string, func(), error) {
	f, err := src.Open(ctx, name)
	if err != nil {
		return "", nil, fmt.Errorf("materialize: %w", err)
	}
	defer f.Close()
	tmp, err := tempFor(name)
	if err != nil {
		return "", nil, fmt.Errorf("materialize %s in %s: %w", name, src.ID(), err)
	}
	release := removeOnce(tmp.Name())
	_, err = io.Copy(tmp, &ctxReader{ctx: ctx, r: io.NewSectionReader(f, 0, f.Size())})
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		release()
		return "", nil, fmt.Errorf("materialize %s in %s: %w", name, src.ID(), err)
	}
	return tmp.Name(), release, nil
}

func removeOnce(p string) func() {
	done := false
	return func() {
		if !done {
			done = true
			os.Remove(p)
		}
	}
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// materialize is Materialize for the Hub.
func (h *Hub) materialize(ctx context.Context, name string) (string, func(), error) {
	noop := func() {}
	if err := ValidateRemotePath(name); err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrUnsafePath, err)
	}
	snap, err := inside(h.cache.snapshotDir(h.sha), name)
	if err != nil {
		return "", nil, err
	}
	var e treeEntry
	if st, err := os.Stat(snap); err == nil && st.Mode().IsRegular() {
		se, stale := h.cachedStale(ctx, name, st.Size())
		if !stale {
			h.stats.cacheHits.Add(1)
			return snap, noop, nil
		}
		e = se
	} else if h.cacheOnly() {
		return "", nil, h.cacheOnlyErr()
	} else if e, err = h.stat(ctx, name); err != nil {
		return "", nil, err
	}
	if h.opts.Cache != CacheNone || !isShard(name) {
		if err := h.download(ctx, e); err != nil {
			return "", nil, err
		}
		return snap, noop, nil
	}
	hash, size := e.blobHash(), e.size()
	tmp, err := tempFor(name)
	if err != nil {
		return "", nil, err
	}
	tmp.Close()
	release := removeOnce(tmp.Name())
	if err := h.fetchToFile(ctx, e, hash, size, tmp.Name()); err != nil {
		release()
		return "", nil, err
	}
	if err := verifyBlob(tmp.Name(), hash, size); err != nil {
		release()
		return "", nil, err
	}
	return tmp.Name(), release, nil
}
