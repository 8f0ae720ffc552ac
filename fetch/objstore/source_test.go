package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrstream/lrstream/fetch"
)

// memStore is an in-memory Store with injectable faults, to test the
// domain logic without a server (fetch/s3 and fetch/hfbucket test it
// against real protocols).
type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	etags   map[string]string
	listErr error
	cut     int // the next cut bodies end after half their bytes
	stall   int // the next stall bodies stop after half their bytes
	gets    int
}

func newMemStore(files map[string]string) *memStore {
	m := &memStore{objects: map[string][]byte{}, etags: map[string]string{}}
	for n, c := range files {
		m.put(n, []byte(c))
	}
	return m
}

func (m *memStore) put(name string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[name] = b
	m.etags[name] = fmt.Sprintf("etag-%x", len(b)*31+int(b[0]))
}

func (m *memStore) ID() string             { return "mem://test" }
func (m *memStore) Key(name string) string { return "root/" + name }

func (m *memStore) List(context.Context) (map[string]Pin, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.listErr != nil {
		return nil, m.listErr
	}
	pins := map[string]Pin{}
	for n, b := range m.objects {
		pins[n] = Pin{Size: int64(len(b)), ETag: m.etags[n]}
	}
	return pins, nil
}

func (m *memStore) Get(_ context.Context, name string, p Pin, off, end int64) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets++
	if m.etags[name] != p.ETag {
		return nil, fmt.Errorf("get %s: %w", name, ErrObjectChanged)
	}
	data := m.objects[name][off:end]
	switch {
	case m.cut > 0 && len(data) > 1:
		m.cut--
		return io.NopCloser(io.MultiReader(bytes.NewReader(data[:len(data)/2]), errReader{io.ErrUnexpectedEOF})), nil
	case m.stall > 0 && len(data) > 1:
		m.stall--
		pr, pw := io.Pipe()
		go func() { pw.Write(data[:len(data)/2]) }() // then nothing, until closed
		return pr, nil
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

var testFiles = map[string]string{
	"meta/info.json":                  `{"codebase_version":"v3.0"}`,
	"data/chunk-000/file-000.parquet": strings.Repeat("parquet bytes ", 5000),
	"videos/cam/chunk-000/file-0.mp4": strings.Repeat("video ", 3000),
}

func testOptions(t *testing.T, mode fetch.CacheMode) Options {
	return Options{Dir: t.TempDir(), Cache: mode, StallTimeout: 100 * time.Millisecond,
		Retry: fetch.RetryPolicy{MaxAttempts: 4, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}}
}

func TestReadsAndResumes(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []fetch.CacheMode{fetch.CacheFull, fetch.CacheNone} {
		for _, fault := range []string{"none", "cut", "stall"} {
			t.Run(string(mode)+"/"+fault, func(t *testing.T) {
				m := newMemStore(testFiles)
				src, err := Open(ctx, m, testOptions(t, mode))
				if err != nil {
					t.Fatal(err)
				}
				switch fault {
				case "cut":
					m.cut = 2
				case "stall":
					m.stall = 1
				}
				for n, want := range testFiles {
					got, err := fetch.ReadAll(ctx, src, n)
					if err != nil || string(got) != want {
						t.Fatalf("%s: %v", n, err)
					}
				}
				if fault != "none" && src.Stats().Retries == 0 {
					t.Fatal("no resume counted")
				}
				names, _ := src.List(ctx, "data")
				if len(names) != 1 || len(src.Revision()) != 40 {
					t.Fatalf("List(data) %v, revision %q", names, src.Revision())
				}
			})
		}
	}
}

func TestBudgetChangedAndErrors(t *testing.T) {
	ctx := context.Background()
	m := newMemStore(testFiles)
	src, err := Open(ctx, m, testOptions(t, fetch.CacheNone))
	if err != nil {
		t.Fatal(err)
	}
	name := "data/chunk-000/file-000.parquet"
	m.cut = 10
	if _, err := fetch.ReadAll(ctx, src, name); !errors.Is(err, fetch.ErrRetryBudget) {
		t.Fatalf("bodies cut beyond the budget: %v", err)
	}
	m.cut = 0
	m.put(name, []byte("a new version"))
	if _, err := fetch.ReadAll(ctx, src, name); !errors.Is(err, ErrObjectChanged) {
		t.Fatalf("changed object: %v", err)
	}
	if _, err := src.Open(ctx, "data/missing.parquet"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := src.Open(ctx, "../escape"); !errors.Is(err, fetch.ErrUnsafePath) {
		t.Fatalf("unsafe name: %v", err)
	}
	bad := newMemStore(map[string]string{"a//b": "x"})
	if _, err := Open(ctx, bad, testOptions(t, fetch.CacheFull)); !errors.Is(err, fetch.ErrUnsafePath) {
		t.Fatalf("unsafe listed key: %v", err)
	}
	if _, err := Open(ctx, &memStore{}, testOptions(t, fetch.CacheFull)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty listing: %v", err)
	}
	secret := &memStore{listErr: errors.New("denied for key SECRET123")}
	o := testOptions(t, fetch.CacheFull)
	o.Secrets = []string{"SECRET123"}
	if _, err := Open(ctx, secret, o); err == nil || strings.Contains(err.Error(), "SECRET123") {
		t.Fatalf("a secret in an error: %v", err)
	}
}

func TestOfflineFallbackSideCacheMaterialize(t *testing.T) {
	ctx := context.Background()
	m := newMemStore(testFiles)
	o := testOptions(t, fetch.CacheFull)
	src, err := Open(ctx, m, o)
	if err != nil {
		t.Fatal(err)
	}
	for n := range testFiles {
		if _, err := fetch.ReadAll(ctx, src, n); err != nil {
			t.Fatal(err)
		}
	}
	p, release, err := fetch.Materialize(ctx, src, "videos/cam/chunk-000/file-0.mp4")
	if err != nil || !strings.HasSuffix(p, ".mp4") || !strings.HasPrefix(p, o.Dir) {
		t.Fatalf("materialize: %q %v", p, err)
	}
	release()
	src.WriteSide("footers", "data/chunk-000/file-000.parquet", int64(len(testFiles["data/chunk-000/file-000.parquet"])), []byte("footer"))
	if b, ok := src.ReadSide("footers", "data/chunk-000/file-000.parquet", int64(len(testFiles["data/chunk-000/file-000.parquet"]))); !ok || string(b) != "footer" {
		t.Fatal("side cache entry not read back")
	}
	// Unreachable: the cached listing and the cache serve the run.
	m.listErr = &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	before := m.gets
	fell, err := Open(ctx, m, o)
	if err != nil || !fell.UsingCachedListing() || fell.Revision() != src.Revision() {
		t.Fatalf("fallback: %v", err)
	}
	for n, want := range testFiles {
		if got, err := fetch.ReadAll(ctx, fell, n); err != nil || string(got) != want {
			t.Fatalf("fallback read %s: %v", n, err)
		}
	}
	if m.gets != before {
		t.Fatal("the fallback source asked the store")
	}
	// An answer of the store is not hidden behind the cache.
	m.listErr = errors.New("403 AccessDenied")
	if _, err := Open(ctx, m, o); err == nil {
		t.Fatal("an access error fell back to the cache")
	}
	// Offline on a cold cache.
	cold := testOptions(t, fetch.CacheFull)
	cold.Offline = true
	if _, err := Open(ctx, m, cold); !errors.Is(err, fetch.ErrOffline) {
		t.Fatalf("cold offline: %v", err)
	}
}
