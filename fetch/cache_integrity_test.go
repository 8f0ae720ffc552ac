package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lrstream/lrstream/internal/fakehub"
)

// TestHubCacheReplacesWrongSizeBlob: a cached blob whose size differs from
// the Hub's listing (truncated by a crash, extended by another tool) is
// downloaded again on reuse, through Open and Materialize, whether the
// listing was made before the open or by it; the content served is the
// Hub's. Offline the cached copy is all there is: it is served unchecked
// (docs/hub.md, "What is verified").
func TestHubCacheReplacesWrongSizeBlob(t *testing.T) {
	const name = "data/chunk-000/file-001.parquet"
	tests := []struct {
		name    string
		damage  func(p string) error
		listed  bool // List before Open
		through string
	}{
		{"truncated, open", func(p string) error { return os.Truncate(p, 1000) }, false, "open"},
		{"truncated, listed, open", func(p string) error { return os.Truncate(p, 0) }, true, "open"},
		{"extended, open", func(p string) error {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			f.Write([]byte("junk"))
			return f.Close()
		}, false, "open"},
		{"truncated, materialize", func(p string) error { return os.Truncate(p, 10) }, false, "materialize"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeHub(t)
			ctx := context.Background()
			cache := t.TempDir()
			o := f.options(t, cache, CacheFull)
			o.Logger = slog.New(slog.DiscardHandler)
			if _, err := ReadAll(ctx, mustOpenHub(t, fakeID, o), name); err != nil {
				t.Fatal(err)
			}
			ff := f.Files[name]
			blob := filepath.Join(cache, RepoFolderName(fakeID), "blobs", ff.SHA256)
			if !ff.LFS {
				blob = filepath.Join(cache, RepoFolderName(fakeID), "blobs", ff.SHA1)
			}
			if err := tc.damage(blob); err != nil {
				t.Fatal(err)
			}
			h := mustOpenHub(t, fakeID, o)
			if tc.listed {
				if _, err := h.List(ctx, ""); err != nil {
					t.Fatal(err)
				}
			}
			var got []byte
			var err error
			if tc.through == "open" {
				got, err = ReadAll(ctx, h, name)
			} else {
				var p string
				var release func()
				if p, release, err = Materialize(ctx, h, name); err == nil {
					got, err = os.ReadFile(p)
					release()
				}
			}
			if err != nil {
				t.Fatalf("reuse of the damaged blob: %v", err)
			}
			if !bytes.Equal(got, ff.Data) {
				t.Fatalf("served %d bytes, want the Hub's %d", len(got), len(ff.Data))
			}
			if st, err := os.Stat(blob); err != nil || st.Size() != int64(len(ff.Data)) {
				t.Fatalf("blob not replaced: %v %v", st, err)
			}
		})
	}
}

// TestHubCacheFlushesBeforePublish: a downloaded blob is flushed to disk
// while it is still blobs/<hash>.incomplete, before the rename publishes
// it; the directories holding the rename and the snapshot link are
// flushed after.
func TestHubCacheFlushesBeforePublish(t *testing.T) {
	f := newFakeHub(t)
	ctx := context.Background()
	cache := t.TempDir()
	h := mustOpenHub(t, fakeID, f.options(t, cache, CacheFull))
	var mu sync.Mutex
	var calls []string
	h.cache.sync = func(p string) error {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasSuffix(p, ".incomplete") {
			final := strings.TrimSuffix(p, ".incomplete")
			if _, err := os.Stat(final); err == nil {
				t.Errorf("%s flushed after the blob was published", p)
			}
		}
		calls = append(calls, p)
		return syncPath(p)
	}
	const name = "data/chunk-000/file-000.parquet"
	if _, err := ReadAll(ctx, h, name); err != nil {
		t.Fatal(err)
	}
	ff := f.Files[name]
	hash := ff.SHA1
	if ff.LFS {
		hash = ff.SHA256
	}
	blobs := filepath.Join(cache, RepoFolderName(fakeID), "blobs")
	snapDir := filepath.Join(cache, RepoFolderName(fakeID), "snapshots", fakeSHA, "data", "chunk-000")
	want := []string{filepath.Join(blobs, hash) + ".incomplete", blobs, snapDir}
	if len(calls) < len(want) {
		t.Fatalf("flushes %q, want %q first", calls, want)
	}
	for i, w := range want {
		if calls[i] != w {
			t.Errorf("flush %d: %s, want %s", i, calls[i], w)
		}
	}
	// A failing flush publishes nothing.
	h2 := mustOpenHub(t, fakeID, f.options(t, t.TempDir(), CacheFull))
	h2.cache.sync = func(string) error { return errors.New("disk full") }
	if _, err := ReadAll(ctx, h2, name); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("ReadAll with a failing flush: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h2.cache.dir, "blobs", hash)); err == nil {
		t.Errorf("blob published although its flush failed")
	}
}

// TestHubStreamHashesWholeFiles: with --download none, a data file read
// whole in one go (smaller than the footer span) is hashed against the
// listing like a download: flipped bytes fail with ErrHashMismatch.
func TestHubStreamHashesWholeFiles(t *testing.T) {
	f := newFakeHub(t)
	const name = "data/chunk-000/file-000.parquet"
	if n := len(f.Files[name].Data); n > 64<<10 {
		t.Fatalf("%s is %d bytes: want one smaller than the footer span", name, n)
	}
	ctx := context.Background()
	h := mustOpenHub(t, fakeID, f.options(t, t.TempDir(), CacheNone))
	file, err := h.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := io.ReadAll(io.NewSectionReader(file, 0, file.Size())); err != nil {
		t.Fatalf("clean file: %v", err)
	}
	f.Mu.Lock()
	f.Corrupt[name] = true
	f.Mu.Unlock()
	h2 := mustOpenHub(t, fakeID, f.options(t, t.TempDir(), CacheNone))
	file2, err := h2.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer file2.Close()
	buf := make([]byte, 8)
	if _, err := file2.ReadAt(buf, file2.Size()-8); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("footer read of a corrupt file: %v, want ErrHashMismatch", err)
	}
}

// TestHubCacheSizeCheckGivesUpOnce: when the listing a size check needs
// fails (the Hub answered the revision, then its tree API fails), cached
// files are served unchecked, and the failing listing is not asked again
// for every file.
func TestHubCacheSizeCheckGivesUpOnce(t *testing.T) {
	f := newFakeHub(t)
	ctx := context.Background()
	cache := t.TempDir()
	o := f.options(t, cache, CacheFull)
	o.Logger = slog.New(slog.DiscardHandler)
	warm := mustOpenHub(t, fakeID, o)
	names := []string{"meta/info.json", "meta/tasks.parquet", "data/chunk-000/file-000.parquet", "data/chunk-000/file-001.parquet"}
	for _, n := range names {
		if _, err := ReadAll(ctx, warm, n); err != nil {
			t.Fatal(err)
		}
	}
	f.AddFault(&fakehub.Fault{Kind: "tree", N: -1, Status: 500})
	h := mustOpenHub(t, fakeID, o)
	before := f.Count("tree")
	for _, n := range names {
		got, err := ReadAll(ctx, h, n)
		if err != nil || !bytes.Equal(got, f.Files[n].Data) {
			t.Fatalf("%s from the cache: %v", n, err)
		}
	}
	if n := f.Count("tree") - before; n != o.Retry.MaxAttempts {
		t.Errorf("%d tree requests, want one failed listing (%d attempts)", n, o.Retry.MaxAttempts)
	}
}
