package fetch

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// repoCache is one dataset's directory in a huggingface_hub cache:
//
//	<root>/datasets--<org>--<name>/
//	    blobs/<sha256 or git-sha1>           file contents
//	    blobs/<hash>.incomplete              downloads in progress
//	    snapshots/<commit>/<path>            relative symlinks to ../../blobs/<hash>
//	    refs/<branch or tag>                 the commit it points to
//	<root>/.locks/datasets--<org>--<name>/<hash>.lock
type repoCache struct {
	root    string // HF_HUB_CACHE
	dir     string // root/datasets--org--name
	lockDir string
	// sync flushes a file or directory to stable storage (syncPath; a
	// test may record the calls).
	sync func(path string) error
}

// RepoFolderName is huggingface_hub's cache folder name for a dataset
// repo: "datasets--ORG--NAME".
func RepoFolderName(id string) string {
	return "datasets--" + strings.ReplaceAll(id, "/", "--")
}

func newRepoCache(root, id string) (*repoCache, error) {
	if root == "" {
		return nil, errors.New("hub cache: no cache directory")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("hub cache %s: %w", root, err)
	}
	folder := RepoFolderName(id)
	return &repoCache{root: abs, dir: filepath.Join(abs, folder), lockDir: filepath.Join(abs, ".locks", folder), sync: syncPath}, nil
}

// syncPath fsyncs a file or a directory (a directory's fsync makes the
// renames and links inside it durable).
func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// publish renames a complete, verified file to its final name so that it
// survives a crash whole or not at all: the file's data is flushed before
// the rename, the directory after it. huggingface_hub renames without
// flushing; a power loss after such a rename can leave a blob of the
// right name and size holding zeros.
func (c *repoCache) publish(tmp, final string) error {
	if err := c.sync(tmp); err != nil {
		return fmt.Errorf("hub cache: flush %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	if err := c.sync(filepath.Dir(final)); err != nil {
		return fmt.Errorf("hub cache: flush %s: %w", filepath.Dir(final), err)
	}
	return nil
}

func (c *repoCache) snapshotDir(sha string) string { return filepath.Join(c.dir, "snapshots", sha) }

func (c *repoCache) blobPath(hash string) string { return filepath.Join(c.dir, "blobs", hash) }

// inside joins a validated slash path to base and double-checks that the
// result stays under base.
func inside(base, rel string) (string, error) {
	if err := ValidateRemotePath(rel); err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnsafePath, err)
	}
	p := filepath.Join(base, filepath.FromSlash(rel))
	r, err := filepath.Rel(base, p)
	if err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
		return "", fmt.Errorf("%w: %q escapes %s", ErrUnsafePath, rel, base)
	}
	return p, nil
}

// offlineRevision resolves rev from the cache alone: a commit SHA with a
// snapshot directory, or refs/<rev>. What is missing matches ErrOffline.
func (c *repoCache) offlineRevision(rev string) (string, error) {
	sha, missing, err := c.cachedRevision(rev)
	if missing {
		return "", fmt.Errorf("%w: %w", err, ErrOffline)
	}
	return sha, err
}

// cachedRevision resolves rev from the cache alone: a commit SHA with a
// snapshot directory, or refs/<rev> naming one. missing is true when the
// cache simply does not hold it (err then says what is missing).
func (c *repoCache) cachedRevision(rev string) (sha string, missing bool, err error) {
	if shaRE.MatchString(rev) {
		if st, err := os.Stat(c.snapshotDir(rev)); err == nil && st.IsDir() {
			return rev, false, nil
		}
		return "", true, fmt.Errorf("commit %s: no snapshot in the cache %s", rev, c.dir)
	}
	refPath, err := inside(filepath.Join(c.dir, "refs"), rev)
	if err != nil {
		return "", false, err
	}
	b, err := os.ReadFile(refPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", true, fmt.Errorf("revision %s: no refs/%s in the cache %s", rev, rev, c.dir)
		}
		return "", false, fmt.Errorf("revision %s: %w", rev, err)
	}
	sha = strings.TrimSpace(string(b))
	if !shaRE.MatchString(sha) {
		return "", false, fmt.Errorf("revision %s: cache file %s does not hold a commit SHA", rev, refPath)
	}
	if st, err := os.Stat(c.snapshotDir(sha)); err != nil || !st.IsDir() {
		return "", true, fmt.Errorf("revision %s (commit %s): no snapshot in the cache %s", rev, sha, c.dir)
	}
	return sha, false, nil
}

// listSnapshot lists the files (symlinks resolving to regular files, or
// regular files) under dir of a cached snapshot.
func (c *repoCache) listSnapshot(sha, dir string) ([]string, error) {
	base := c.snapshotDir(sha)
	root := base
	if dir != "" {
		var err error
		if root, err = inside(base, dir); err != nil {
			return nil, err
		}
	}
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		st, err := os.Stat(p) // follows the blob symlink
		if err != nil || !st.Mode().IsRegular() {
			return nil // dangling link or special file: not usable
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// openSnapshot opens a cached file of the snapshot; fs.ErrNotExist when
// it is not there (or its blob is missing).
func (c *repoCache) openSnapshot(sha, name string) (File, error) {
	p, err := inside(c.snapshotDir(sha), name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("cached %s is not a regular file", name)
	}
	return &cachedFile{File: f, size: st.Size(), name: name}, nil
}

// cachedFile is a File read from the local cache.
type cachedFile struct {
	*os.File
	size int64
	name string
}

func (f *cachedFile) Size() int64  { return f.size }
func (f *cachedFile) Name() string { return f.name }

// link points snapshots/<sha>/<name> at blobs/<hash> with a relative
// symlink (as huggingface_hub does), replacing it atomically.
func (c *repoCache) link(sha, name, hash string) error {
	lp, err := inside(c.snapshotDir(sha), name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(lp), 0o755); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	target, err := filepath.Rel(filepath.Dir(lp), c.blobPath(hash))
	if err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	if cur, err := os.Readlink(lp); err == nil && cur == target {
		return nil
	}
	tmp := lp + ".lrstream-" + randSuffix()
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("hub cache: link %s: %w", name, err)
	}
	if err := os.Rename(tmp, lp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hub cache: link %s: %w", name, err)
	}
	if err := c.sync(filepath.Dir(lp)); err != nil {
		return fmt.Errorf("hub cache: link %s: flush: %w", name, err)
	}
	return nil
}

// writeRef records refs/<rev> = sha atomically.
func (c *repoCache) writeRef(rev, sha string) error {
	p, err := inside(filepath.Join(c.dir, "refs"), rev)
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == sha {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	return c.writeFileAtomic(p, []byte(sha))
}

func (c *repoCache) writeFileAtomic(p string, data []byte) error {
	tmp := p + ".lrstream-" + randSuffix()
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	if err := c.publish(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func randSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lock takes the inter-process lock of one blob
// (.locks/datasets--org--name/<hash>.lock, flock as Python's filelock
// does), polling so that ctx can cancel the wait.
func (c *repoCache) lock(ctx context.Context, hash string, waiting func()) (func(), error) {
	release, err := LockFile(ctx, filepath.Join(c.lockDir, hash+".lock"), waiting)
	if err != nil {
		return nil, fmt.Errorf("hub cache: %w", err)
	}
	return release, nil
}

// ErrHashMismatch is matched (errors.Is) by errors for downloads whose
// content does not match the size or hash the Hub announced.
var ErrHashMismatch = errors.New("downloaded content does not match its hash")

// normalizeEtag strips the quotes (and a weak prefix) of an ETag header.
func normalizeEtag(v string) string {
	v = strings.TrimSpace(v)
	v = strings.TrimPrefix(v, "W/")
	return strings.ToLower(strings.Trim(v, `"`))
}

// verifyBlob checks size and hash of a downloaded file: sha256 for a
// 64-hex hash (LFS), the git blob sha1 ("blob <len>\0" + data) for a
// 40-hex hash.
func verifyBlob(p, want string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if st.Size() != size {
		return fmt.Errorf("%w: got %d bytes, want %d", ErrHashMismatch, st.Size(), size)
	}
	var hh hash.Hash
	switch len(want) {
	case 64:
		hh = sha256.New()
	case 40:
		hh = sha1.New()
		io.WriteString(hh, "blob "+strconv.FormatInt(size, 10)+"\x00")
	default:
		return fmt.Errorf("%w: unsupported hash %q", ErrHashMismatch, want)
	}
	if _, err := io.Copy(hh, f); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if got := hex.EncodeToString(hh.Sum(nil)); got != want {
		return fmt.Errorf("%w: content hashes to %s, want %s", ErrHashMismatch, got, want)
	}
	return nil
}

// hashBytes is verifyBlob for content in memory.
func hashBytes(data []byte, want string) error {
	var got string
	switch len(want) {
	case 64:
		s := sha256.Sum256(data)
		got = hex.EncodeToString(s[:])
	case 40:
		hh := sha1.New()
		io.WriteString(hh, "blob "+strconv.Itoa(len(data))+"\x00")
		hh.Write(data)
		got = hex.EncodeToString(hh.Sum(nil))
	default:
		return nil
	}
	if got != want {
		return fmt.Errorf("%w: content hashes to %s, want %s", ErrHashMismatch, got, want)
	}
	return nil
}
