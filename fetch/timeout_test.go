package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTimeoutEnv(t *testing.T) {
	tests := []struct {
		v       string
		want    time.Duration
		wantErr bool
	}{
		{"", 10 * time.Second, false},
		{"0", 10 * time.Second, false}, // int("0") or DEFAULT
		{"5", 5 * time.Second, false},
		{" 7 ", 7 * time.Second, false}, // Python's int() strips whitespace
		{"1_0", 10 * time.Second, false},
		{"+3", 3 * time.Second, false},
		{"1.5", 0, true}, // int("1.5") raises
		{"ten", 0, true},
		{"_1", 0, true},
		{"-3", 0, true},
	}
	for _, tc := range tests {
		for _, name := range []string{"HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT"} {
			env := map[string]string{"HOME": t.TempDir(), name: tc.v}
			o, err := HubOptionsFromEnv(func(k string) string { return env[k] })
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), name) {
					t.Errorf("%s=%q: err %v, want an error naming the variable", name, tc.v, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s=%q: %v", name, tc.v, err)
				continue
			}
			got := o.ETagTimeout
			if name == "HF_HUB_DOWNLOAD_TIMEOUT" {
				got = o.DownloadTimeout
			}
			if got != tc.want {
				t.Errorf("%s=%q: %v, want %v", name, tc.v, got, tc.want)
			}
		}
	}
}

// silentListener accepts TCP connections on 127.0.0.1, reads whatever is
// sent and never answers, until the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String()
}

// tinyWarmCache lays out a cached snapshot of o/n@main holding meta/info.json.
func tinyWarmCache(t *testing.T, sha string) string {
	t.Helper()
	cache := t.TempDir()
	dir := filepath.Join(cache, RepoFolderName("o/n"))
	if err := os.MkdirAll(filepath.Join(dir, "snapshots", sha, "meta"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "snapshots", sha, "meta", "info.json"), []byte(`{"fps":30}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(sha), 0o644); err != nil {
		t.Fatal(err)
	}
	return cache
}

// TestHubNeverAnswers: a Hub that accepts connections and never answers
// costs HF_HUB_ETAG_TIMEOUT per attempt: OpenHub falls back to a warm
// cache after one timeout, and without a cache gives up after
// MaxNoAnswer of them (the default retry backoff included), instead of
// minutes. The bounds are generous; the lower bound shows the timeout is
// waited for, not skipped.
func TestHubNeverAnswers(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	endpoint := silentListener(t)
	tests := []struct {
		name     string
		cache    func(t *testing.T) string
		min, max time.Duration
	}{
		{"warm cache", func(t *testing.T) string { return tinyWarmCache(t, sha) }, 900 * time.Millisecond, 5 * time.Second},
		{"no cache", func(t *testing.T) string { return t.TempDir() }, 2900 * time.Millisecond, 15 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"HOME": t.TempDir(), "HF_ENDPOINT": endpoint, "HF_HUB_CACHE": tc.cache(t), "HF_HUB_ETAG_TIMEOUT": "1"}
			o, err := HubOptionsFromEnv(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			o.Logger = slog.New(slog.DiscardHandler)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			h, err := OpenHub(ctx, "o/n", o)
			took := time.Since(start)
			if took < tc.min || took > tc.max {
				t.Errorf("OpenHub took %v, want %v..%v", took, tc.min, tc.max)
			}
			if tc.name == "no cache" {
				if !errors.Is(err, ErrUnreachable) || !errors.Is(err, ErrNoAnswer) {
					t.Fatalf("OpenHub: %v, want ErrUnreachable and ErrNoAnswer", err)
				}
				if !strings.Contains(err.Error(), "did not answer 3 attempts") {
					t.Errorf("error %q does not say the server did not answer", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !h.UsingCachedSnapshot() || h.Revision() != sha {
				t.Fatalf("not on the cached snapshot: %v %s", h.UsingCachedSnapshot(), h.Revision())
			}
			if b, err := ReadAll(ctx, h, "meta/info.json"); err != nil || string(b) != `{"fps":30}` {
				t.Fatalf("cached file: %q, %v", b, err)
			}
		})
	}
}

// TestHubDownloadNeverAnswers: file requests honour DownloadTimeout the
// same way (a Hub whose API answers but whose file server hangs).
func TestHubDownloadNeverAnswers(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/datasets/o/n/revision/"):
			fmt.Fprintf(w, `{"sha":%q}`, sha)
		case strings.HasPrefix(r.URL.Path, "/api/datasets/o/n/tree/"):
			fmt.Fprint(w, `[{"type":"file","path":"meta/info.json","size":10,"oid":"`+strings.Repeat("a", 40)+`"}]`)
		default:
			<-r.Context().Done() // never answers
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := HubOptions{Endpoint: srv.URL, CacheDir: t.TempDir(), DownloadTimeout: 300 * time.Millisecond,
		Retry: RetryPolicy{MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}}
	h, err := OpenHub(ctx, "o/n", o)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = h.Open(ctx, "meta/info.json")
	took := time.Since(start)
	if !errors.Is(err, ErrNoAnswer) || !errors.Is(err, ErrRetryBudget) {
		t.Fatalf("Open: %v, want ErrNoAnswer and ErrRetryBudget", err)
	}
	if took < 850*time.Millisecond || took > 8*time.Second {
		t.Errorf("Open took %v, want about 3 × 300ms", took)
	}
}
