package fetch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/lrstream/lrstream/internal/fakehub"
)

func TestMaterializeDir(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "videos", "cam"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(root, "videos", "cam", "file-000.mp4")
	if err := os.WriteFile(want, []byte("mp4 bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, release, err := Materialize(ctx, d, "videos/cam/file-000.mp4")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if p != want {
		t.Fatalf("path = %s, want the real file %s", p, want)
	}
	if _, err := os.Stat(want); err != nil {
		t.Fatalf("release touched the dataset file: %v", err)
	}
	for _, bad := range []string{"../x", "videos/../../x", "videos/cam", "videos/missing.mp4", ""} {
		if _, _, err := Materialize(ctx, d, bad); err == nil {
			t.Errorf("Materialize(%q) succeeded", bad)
		}
	}
}

func TestMaterializeFS(t *testing.T) {
	fsys := fstest.MapFS{"videos/a.mp4": {Data: []byte("embedded video")}}
	src := NewFS("demo", fsys)
	p, release, err := Materialize(context.Background(), src, "videos/a.mp4")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || string(got) != "embedded video" {
		t.Fatalf("temp copy = %q, %v", got, err)
	}
	if filepath.Ext(p) != ".mp4" {
		t.Errorf("temp copy %s lost the extension", p)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("temp copy mode %v, want 0600", st.Mode().Perm())
	}
	release()
	release() // idempotent
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("release left %s: %v", p, err)
	}
	if _, _, err := Materialize(context.Background(), src, "videos/missing.mp4"); err == nil {
		t.Fatal("missing file materialized")
	}
}

func TestMaterializeHub(t *testing.T) {
	f := newFakeHub(t)
	f.Token = fakeToken
	const shard = "data/chunk-001/file-000.parquet"
	ctx := context.Background()

	t.Run("full", func(t *testing.T) {
		cache := t.TempDir()
		h := mustOpenHub(t, fakeID, f.options(t, cache, CacheFull))
		p, release, err := Materialize(ctx, h, shard)
		if err != nil {
			t.Fatal(err)
		}
		release()
		if want := filepath.Join(h.SnapshotDir(), "data", "chunk-001", "file-000.parquet"); p != want {
			t.Fatalf("path = %s, want the snapshot path %s", p, want)
		}
		if st, err := os.Lstat(p); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("snapshot entry is not a symlink into blobs/: %v", err)
		}
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, f.Files[shard].Data) {
			t.Fatalf("content differs: %v", err)
		}
		checkCacheLayout(t, f, cache, []string{shard})
		// Warm: no request.
		before := f.Snapshot()
		if p2, _, err := Materialize(ctx, h, shard); err != nil || p2 != p {
			t.Fatalf("warm Materialize = %s, %v", p2, err)
		}
		if after := f.Snapshot(); after["resolve"] != before["resolve"] {
			t.Fatal("warm Materialize downloaded again")
		}
	})

	t.Run("none", func(t *testing.T) {
		cache := t.TempDir()
		h := mustOpenHub(t, fakeID, f.options(t, cache, CacheNone))
		f.AddFault(&fakehub.Fault{Kind: "cdn", N: 1, Drop: true}) // resumed with Range
		p, release, err := Materialize(ctx, h, shard)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(p, cache) {
			t.Fatalf("--cache none materialized into the cache: %s", p)
		}
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, f.Files[shard].Data) {
			t.Fatalf("content differs: %v", err)
		}
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
			t.Errorf("private file mode %v, want 0600", st.Mode().Perm())
		}
		release()
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("release left %s", p)
		}
		if _, err := os.Stat(filepath.Join(cache, RepoFolderName(fakeID), "blobs", f.Files[shard].SHA256)); err == nil {
			t.Fatal("--cache none wrote the shard's blob")
		}
		// Metadata is cached whole even under --cache none.
		mp, _, err := Materialize(ctx, h, "meta/info.json")
		if err != nil || !strings.HasPrefix(mp, h.SnapshotDir()) {
			t.Fatalf("metadata path %s, %v: want the snapshot", mp, err)
		}
	})

	t.Run("unsafe", func(t *testing.T) {
		h := mustOpenHub(t, fakeID, f.options(t, t.TempDir(), CacheFull))
		for _, bad := range []string{"../../etc/passwd", "/abs", "data/../../x", "a\\b", "data//x"} {
			_, _, err := Materialize(ctx, h, bad)
			if !errors.Is(err, ErrUnsafePath) {
				t.Errorf("Materialize(%q) = %v, want ErrUnsafePath", bad, err)
			}
		}
	})

	t.Run("corrupt", func(t *testing.T) {
		h := mustOpenHub(t, fakeID, f.options(t, t.TempDir(), CacheNone))
		f.Mu.Lock()
		f.Corrupt[shard] = true
		f.Mu.Unlock()
		defer func() { f.Mu.Lock(); delete(f.Corrupt, shard); f.Mu.Unlock() }()
		if _, _, err := Materialize(ctx, h, shard); !errors.Is(err, ErrHashMismatch) {
			t.Fatalf("corrupt shard: %v, want ErrHashMismatch", err)
		}
	})
}
