package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Identifier is implemented by sources that can name one version of a
// file: a string that differs whenever the file's bytes may differ. Caches
// of data derived from a file (decoded camera frames) key their entries
// by it, so that a changed file never serves stale data.
type Identifier interface {
	Identity(ctx context.Context, name string) (string, error)
}

// Identity returns the identity of the version of file name that src
// serves: for a local directory its absolute path, size, modification
// time, inode and change time; for a directory that is not on the OS
// (an embedded dataset) the SHA-256 of its bytes; for the Hub the repo,
// the pinned commit and the path; for a source implementing Identifier,
// its answer. ok is false for a source that cannot name versions: nothing
// derived from its files should be cached.
func Identity(ctx context.Context, src Source, name string) (id string, ok bool, err error) {
	switch s := src.(type) {
	case *Dir:
		id, err = s.identity(name)
		return id, err == nil, err
	case *Hub:
		if s.sha == "" {
			return "", false, nil
		}
		return "hub\x00" + s.id + "\x00" + s.sha + "\x00" + name, true, nil
	case Identifier:
		id, err = s.Identity(ctx, name)
		return id, err == nil, err
	}
	return "", false, nil
}

// identity is Identity for a directory.
func (d *Dir) identity(name string) (string, error) {
	clean := path.Clean(strings.TrimPrefix(name, "/"))
	if !fs.ValidPath(clean) || clean == "." {
		return "", fmt.Errorf("identity of %s in %s: invalid path", name, d.id)
	}
	if d.root == "" {
		f, err := d.fsys.Open(clean)
		if err != nil {
			return "", fmt.Errorf("identity of %s in %s: %w", name, d.id, err)
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return "", fmt.Errorf("identity of %s in %s: %w", name, d.id, err)
		}
		return "fs\x00" + d.id + "\x00" + clean + "\x00" + hex.EncodeToString(h.Sum(nil)), nil
	}
	stamp, err := fileStamp(filepath.Join(d.root, filepath.FromSlash(clean)))
	if err != nil {
		return "", fmt.Errorf("identity of %s in %s: %w", name, d.id, err)
	}
	return "file\x00" + stamp, nil
}

// Label names src for a cache of data derived from its files (what a
// listing of the cache shows): its ID, a local directory's absolute path.
func Label(src Source) string {
	if d, ok := src.(*Dir); ok && d.root != "" {
		return d.root
	}
	return src.ID()
}

// FileStamp names the version of the local regular file at p as Identity
// does for a directory's files: its path, size, modification time and,
// where the platform has them, device, inode and change time.
func FileStamp(p string) (string, bool) {
	stamp, err := fileStamp(p)
	return stamp, err == nil
}

func fileStamp(p string) (string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	return fmt.Sprintf("%s\x00%d\x00%d%s", p, st.Size(), st.ModTime().UnixNano(), statExtra(st)), nil
}
