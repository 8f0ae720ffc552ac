package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSideCache: the Hub's side cache keeps an entry per (kind, file,
// size) at the pinned commit, inside the dataset's cache folder under a
// hashed name; a damaged entry is removed and not returned; unsafe names
// are refused; the kind's entries are trimmed to their bound, oldest
// first.
func TestSideCache(t *testing.T) {
	f := newFakeHub(t)
	cache := t.TempDir()
	h, err := OpenHub(context.Background(), fakeID, f.options(t, cache, CacheNone))
	if err != nil {
		t.Fatal(err)
	}
	name := "data/chunk-000/file-000.parquet"
	if _, ok := h.ReadSide("footers", name, 100); ok {
		t.Fatal("an entry before any was written")
	}
	data := []byte("footer bytes\x00PAR1")
	h.WriteSide("footers", name, 100, data)
	if got, ok := h.ReadSide("footers", name, 100); !ok || !bytes.Equal(got, data) {
		t.Fatalf("ReadSide = %q, %v", got, ok)
	}
	for _, other := range []struct {
		kind, name string
		size       int64
	}{{"footers", name, 101}, {"footers", "data/chunk-000/file-001.parquet", 100}, {"other", name, 100}} {
		if _, ok := h.ReadSide(other.kind, other.name, other.size); ok {
			t.Fatalf("%+v: an entry of another file", other)
		}
	}
	dir := filepath.Join(cache, RepoFolderName(fakeID), "lrstream-footers")
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 || len(ents[0].Name()) != 64 {
		t.Fatalf("side cache directory %s: %v %v", dir, ents, err)
	}
	// Another source on the same cache (another process) finds it.
	h2, err := OpenHub(context.Background(), fakeID, f.options(t, cache, CacheNone))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := h2.ReadSide("footers", name, 100); !ok || !bytes.Equal(got, data) {
		t.Fatal("another source on the cache does not find the entry")
	}
	if h2.Stats().SideHits != 1 {
		t.Fatalf("SideHits = %d", h2.Stats().SideHits)
	}
	// Damage: a flipped byte fails the checksum; the entry goes.
	p := filepath.Join(dir, ents[0].Name())
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 1
	os.WriteFile(p, b, 0o644)
	if _, ok := h.ReadSide("footers", name, 100); ok {
		t.Fatal("a damaged entry was returned")
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatal("the damaged entry was not removed")
	}
	// Unsafe names never reach the file system.
	for _, bad := range []string{"../x", "/abs", "a/../../b", ""} {
		h.WriteSide("footers", bad, 1, data)
		h.WriteSide(bad, name, 1, data)
	}
	filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasPrefix(p, filepath.Join(cache, RepoFolderName(fakeID))) {
			t.Errorf("a file outside the dataset's cache folder: %s", p)
		}
		return nil
	})
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("entries for unsafe names: %v", ents)
	}
	// Too large: not kept.
	h.WriteSide("footers", name, 7, make([]byte, SideEntryMax+1))
	if _, ok := h.ReadSide("footers", name, 7); ok {
		t.Fatal("an entry above SideEntryMax was kept")
	}
	// The bound: oldest entries go first.
	for i := range 5 {
		os.WriteFile(filepath.Join(dir, strings.Repeat(string(rune('a'+i)), 64)), make([]byte, 100), 0o644)
		ts := time.Unix(int64(1000+i), 0)
		os.Chtimes(filepath.Join(dir, strings.Repeat(string(rune('a'+i)), 64)), ts, ts)
	}
	if err := trimSide(dir, 250); err != nil {
		t.Fatal(err)
	}
	ents, _ = os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name()[:1])
	}
	if strings.Join(left, "") != "de" {
		t.Fatalf("after trimming to 250 bytes: %v, want the two newest (d, e)", left)
	}
}

// FuzzParseSide: a side cache entry is accepted only when its checksum
// matches its data, and then encodes back to the same bytes.
func FuzzParseSide(f *testing.F) {
	good := func(data []byte) []byte {
		sum := sha256.Sum256(data)
		return append(append([]byte(sideMagic), sum[:]...), data...)
	}
	f.Add(good([]byte("footer\x04\x00\x00\x00PAR1")))
	f.Add(good(nil))
	f.Add([]byte(sideMagic))
	f.Add([]byte("not an entry"))
	f.Fuzz(func(t *testing.T, b []byte) {
		data, ok := parseSide(b)
		if !ok {
			return
		}
		if !bytes.Equal(good(data), b) {
			t.Fatalf("accepted %q, which does not encode back", b)
		}
	})
}
