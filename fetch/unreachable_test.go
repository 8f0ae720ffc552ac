package fetch

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/internal/fakehub"
)

// closedEndpoint is an http URL on a loopback port nothing listens on.
func closedEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// noDNS is a transport whose every lookup fails like an unknown host.
func noDNS() http.RoundTripper {
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
	}}
}

// warmCache downloads the whole fake dataset into a new cache.
func warmCache(t *testing.T, f *fakeHub, mode CacheMode) string {
	t.Helper()
	cache := t.TempDir()
	readAllCompare(t, f, mustOpenHub(t, fakeID, f.options(t, cache, mode)))
	return cache
}

func TestHubUnreachableFallsBackToCache(t *testing.T) {
	f := newFakeHub(t)
	cache := warmCache(t, f, CacheFull)
	cases := []struct {
		name      string
		spec      string
		endpoint  string
		transport http.RoundTripper
		status    int // fault on the revision request (0: none)
	}{
		{"connection refused", fakeID, closedEndpoint(t), nil, 0},
		{"no such host", fakeID + "@main", "http://hub.invalid", noDNS(), 0},
		{"hub down (503 until the budget ends)", fakeID, f.Server.URL, nil, 503},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.status != 0 {
				f.AddFault(&fakehub.Fault{Kind: "revision", N: 5, Status: c.status})
			}
			var logs bytes.Buffer
			o := f.options(t, cache, CacheFull)
			o.Endpoint, o.Transport = c.endpoint, c.transport
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			before := f.Snapshot()
			start := time.Now()
			h, err := OpenHub(context.Background(), c.spec, o)
			el := time.Since(start)
			if err != nil {
				t.Fatalf("OpenHub with a cached snapshot: %v", err)
			}
			if h.Revision() != fakeSHA || !h.UsingCachedSnapshot() {
				t.Fatalf("revision %s, fallback %v", h.Revision(), h.UsingCachedSnapshot())
			}
			if c.status == 0 && (h.Stats().Requests != 1 || el > time.Second) {
				t.Errorf("a connection failure cost %d requests and %v before the fallback, want 1 and fast", h.Stats().Requests, el)
			}
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "cached snapshot") || !strings.Contains(logs.String(), fakeSHA) {
				t.Errorf("no warning about the fallback: %q", logs.String())
			}
			readAllCompare(t, f, h)
			if after := f.Snapshot(); after["tree"] != before["tree"] || after["resolve"] != before["resolve"] {
				t.Errorf("the fallback source went back to the network: %v -> %v", before, after)
			}
		})
	}
}

func TestHubUnreachableWithoutCache(t *testing.T) {
	f := newFakeHub(t)
	o := f.options(t, t.TempDir(), CacheFull)
	o.Endpoint = closedEndpoint(t)
	o.Retry.MaxAttempts = 3
	_, err := OpenHub(context.Background(), fakeID, o)
	if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrOffline) {
		t.Fatalf("cold cache, no Hub: %v, want ErrUnreachable", err)
	}
	msg := err.Error()
	t.Logf("cold: %s", msg)
	for _, want := range []string{"no refs/main", "no snapshot of this dataset is cached", "3 attempts"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q", want)
		}
	}
	if strings.Contains(msg, "HF_HUB_OFFLINE") {
		t.Errorf("HF_HUB_OFFLINE suggested with nothing cached")
	}

	// Another revision is cached: name it and suggest going offline.
	cache := warmCache(t, f, CacheFull)
	o.CacheDir = cache
	_, err = OpenHub(context.Background(), fakeID+"@v1.0", o)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "HF_HUB_OFFLINE=1") || !strings.Contains(err.Error(), fakeSHA) || !strings.Contains(err.Error(), "no refs/v1.0") {
		t.Fatalf("other revision cached: %v", err)
	}

	// A definitive answer of the Hub is not hidden by the cache: an
	// unknown revision whose stale ref is cached still fails.
	if err := os.WriteFile(filepath.Join(cache, RepoFolderName(fakeID), "refs", "v9"), []byte(fakeSHA), 0o644); err != nil {
		t.Fatal(err)
	}
	o = f.options(t, cache, CacheFull)
	if _, err := OpenHub(context.Background(), fakeID+"@v9", o); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("404 revision with a cached ref = %v, want the Hub's 404", err)
	}

	// Falling back to a snapshot lacking a file: that file fails clearly.
	metaOnly := warmMeta(t, f)
	o = f.options(t, metaOnly, CacheNone)
	o.Endpoint = closedEndpoint(t)
	o.Logger = slog.New(slog.DiscardHandler)
	h, err := OpenHub(context.Background(), fakeID, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open(context.Background(), "data/chunk-000/file-000.parquet"); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "not in the cached snapshot") {
		t.Fatalf("missing shard after fallback: %v", err)
	}
}

// warmMeta caches the metadata only (a --cache none run).
func warmMeta(t *testing.T, f *fakeHub) string {
	cache := t.TempDir()
	h := mustOpenHub(t, fakeID, f.options(t, cache, CacheNone))
	if _, err := ReadAll(context.Background(), h, "meta/info.json"); err != nil {
		t.Fatal(err)
	}
	return cache
}
