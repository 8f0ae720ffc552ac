package fetch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Dir is a Source backed by a local directory or any fs.FS (for example the
// demo dataset embedded in the binary).
type Dir struct {
	id   string
	root string // the OS directory for NewDir, "" for NewFS
	fsys fs.FS
}

// NewDir returns a Source reading the dataset rooted at the directory root.
func NewDir(root string) (*Dir, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", root, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("dataset %s: not a directory", root)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", root, err)
	}
	return &Dir{id: filepath.Clean(root), root: abs, fsys: os.DirFS(root)}, nil
}

// NewFS returns a Source reading the dataset at the root of fsys, named id.
func NewFS(id string, fsys fs.FS) *Dir { return &Dir{id: id, fsys: fsys} }

// ID returns the directory path (or the name given to NewFS).
func (d *Dir) ID() string { return d.id }

// Revision is empty: a local directory has no revision.
func (d *Dir) Revision() string { return "" }

// List returns the sorted relative paths of regular files under dir.
func (d *Dir) List(ctx context.Context, dir string) ([]string, error) {
	root := "."
	if dir != "" {
		root = path.Clean(dir)
	}
	var out []string
	err := fs.WalkDir(d.fsys, root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if e.Type().IsRegular() || (e.Type()&fs.ModeSymlink != 0) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", root, d.id, err)
	}
	sort.Strings(out)
	return out, nil
}

// Open opens name for random access.
func (d *Dir) Open(ctx context.Context, name string) (File, error) {
	name = path.Clean(strings.TrimPrefix(name, "/"))
	if !fs.ValidPath(name) {
		return nil, fmt.Errorf("open %s in %s: invalid path", name, d.id)
	}
	f, err := d.fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open %s in %s: %w", name, d.id, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s in %s: %w", name, d.id, err)
	}
	ra, ok := f.(interface {
		ReadAt([]byte, int64) (int, error)
	})
	if !ok {
		f.Close()
		return nil, fmt.Errorf("open %s in %s: file does not support random access", name, d.id)
	}
	return &localFile{File: f, ra: ra, size: st.Size(), name: name}, nil
}

type localFile struct {
	fs.File
	ra interface {
		ReadAt([]byte, int64) (int, error)
	}
	size int64
	name string
}

func (f *localFile) ReadAt(p []byte, off int64) (int, error) { return f.ra.ReadAt(p, off) }
func (f *localFile) Size() int64                             { return f.size }
func (f *localFile) Name() string                            { return f.name }
