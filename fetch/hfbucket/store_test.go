package hfbucket

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/fetch/objstore"
)

const conformance = "../../../shared/conformance/datasets/pub_inferred_front_wrist"

// fakeBucket serves a directory as bucket ns/name under prefix "sets/ds"
// with the Hub's bucket routes (tree, resolve → CDN redirect), counting
// faults to inject and the Authorization headers the CDN saw.
type fakeBucket struct {
	hub, cdn *httptest.Server
	mu       sync.Mutex
	files    map[string][]byte // bucket path → content
	fail503  int
	cdnAuth  []string
	resolves map[string]int // resolve requests per bucket path
	signed   int            // signature generation
}

func xetHash(b []byte) string {
	h := sha256.Sum256(append([]byte("xet"), b...))
	return hex.EncodeToString(h[:])
}

func newFakeBucket(t *testing.T, dir string) *fakeBucket {
	t.Helper()
	fb := &fakeBucket{files: map[string][]byte{}, resolves: map[string]int{}}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			fb.files["sets/ds/"+filepath.ToSlash(rel)] = b
		}
		return err
	})
	fb.files["sets/ds2/other.txt"] = []byte("another prefix")
	fb.cdn = httptest.NewServer(http.HandlerFunc(fb.serveCDN))
	fb.hub = httptest.NewServer(http.HandlerFunc(fb.serveHub))
	t.Cleanup(fb.hub.Close)
	t.Cleanup(fb.cdn.Close)
	return fb
}

func (fb *fakeBucket) serveHub(w http.ResponseWriter, r *http.Request) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if fb.fail503 > 0 {
		fb.fail503--
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if r.Header.Get("Authorization") != "Bearer hf_bucketSECRET" {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	const tree, resolve = "/api/buckets/ns/name/tree", "/buckets/ns/name/resolve/"
	switch {
	case strings.HasPrefix(r.URL.EscapedPath(), tree):
		prefix, _ := url.PathUnescape(strings.TrimPrefix(strings.TrimPrefix(r.URL.EscapedPath(), tree), "/"))
		var paths []string
		for p := range fb.files {
			if strings.HasPrefix(p, prefix) {
				paths = append(paths, p)
			}
		}
		sort.Strings(paths)
		start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		end := min(start+3, len(paths))
		var page []map[string]any
		for _, p := range paths[start:end] {
			page = append(page, map[string]any{"type": "file", "path": p, "size": len(fb.files[p]), "xetHash": xetHash(fb.files[p]), "mtime": "2026-01-01T00:00:00.000Z"})
		}
		if end < len(paths) {
			w.Header().Set("Link", "<"+fb.hub.URL+r.URL.EscapedPath()+"?recursive=true&cursor="+strconv.Itoa(end)+`>; rel="next"`)
		}
		json.NewEncoder(w).Encode(page)
	case strings.HasPrefix(r.URL.Path, resolve):
		p := strings.TrimPrefix(r.URL.Path, resolve)
		b, ok := fb.files[p]
		if !ok {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			w.WriteHeader(http.StatusNotFound)
			return
		}
		fb.resolves[p]++
		w.Header().Set("X-Xet-Hash", xetHash(b))
		http.Redirect(w, r, fb.cdn.URL+"/cdn/"+url.PathEscape(p)+"?sig=SIGNED"+strconv.Itoa(fb.signed), http.StatusFound)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (fb *fakeBucket) serveCDN(w http.ResponseWriter, r *http.Request) {
	fb.mu.Lock()
	fb.cdnAuth = append(fb.cdnAuth, r.Header.Get("Authorization"))
	p, _ := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), "/cdn/"))
	b, ok := fb.files[p]
	stale := r.URL.Query().Get("sig") != "SIGNED"+strconv.Itoa(fb.signed)
	fb.mu.Unlock()
	if stale {
		w.WriteHeader(http.StatusForbidden) // an expired signature
		return
	}
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

func hubOpts(t *testing.T, fb *fakeBucket) fetch.HubOptions {
	return fetch.HubOptions{Endpoint: fb.hub.URL, Token: "hf_bucketSECRET",
		Retry: fetch.RetryPolicy{MaxAttempts: 4, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}}
}

func TestBucketReadsEveryFile(t *testing.T) {
	fb := newFakeBucket(t, conformance)
	ctx := context.Background()
	for _, mode := range []fetch.CacheMode{fetch.CacheFull, fetch.CacheNone} {
		o := hubOpts(t, fb)
		o.Cache = mode
		src, err := Open(ctx, "hf://buckets/ns/name/sets/ds", o, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		names, _ := src.List(ctx, "")
		if len(names) != len(fb.files)-1 {
			t.Fatalf("%s: listed %d files, want %d (not the other prefix's)", mode, len(names), len(fb.files)-1)
		}
		for _, n := range names {
			got, err := fetch.ReadAll(ctx, src, n)
			if err != nil || !bytes.Equal(got, fb.files["sets/ds/"+n]) {
				t.Fatalf("%s %s: %v", mode, n, err)
			}
		}
	}
	for _, a := range fb.cdnAuth {
		if a != "" {
			t.Fatalf("the CDN received an Authorization header %q", a)
		}
	}
}

func TestBucketFaults(t *testing.T) {
	fb := newFakeBucket(t, conformance)
	ctx := context.Background()
	fb.fail503 = 2
	src, err := Open(ctx, "hf://buckets/ns/name/sets/ds", hubOpts(t, fb), t.TempDir())
	if err != nil {
		t.Fatalf("2 503s within the budget: %v", err)
	}
	if src.Stats().Retries < 2 {
		t.Fatalf("stats %+v", src.Stats())
	}
	fb.fail503 = 10
	_, err = fetch.ReadAll(ctx, src, "meta/info.json")
	if !errors.Is(err, fetch.ErrRetryBudget) || strings.Contains(err.Error(), "hf_bucketSECRET") {
		t.Fatalf("a 503 storm: %v", err)
	}
	fb.mu.Lock()
	fb.fail503 = 0
	fb.mu.Unlock()
	// A file rewritten after Open.
	name := "meta/info.json"
	fb.mu.Lock()
	fb.files["sets/ds/"+name] = append(bytes.Clone(fb.files["sets/ds/"+name]), ' ')
	fb.mu.Unlock()
	if _, err := fetch.ReadAll(ctx, src, name); !errors.Is(err, objstore.ErrObjectChanged) {
		t.Fatalf("changed file: %v", err)
	}
	o := hubOpts(t, fb)
	o.Token = "wrong"
	if _, err := Open(ctx, "hf://buckets/ns/name/sets/ds", o, t.TempDir()); err == nil || !strings.Contains(err.Error(), "HF_TOKEN") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong token: %v", err)
	}
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in, id, prefix string
		ok             bool
	}{
		{"hf://buckets/ns/name", "ns/name", "", true},
		{"hf://buckets/ns/name/", "ns/name", "", true},
		{"hf://buckets/ns/name/a/b/", "ns/name", "a/b", true},
		{"hf://buckets/ns", "", "", false},
		{"hf://buckets/n--s/name", "", "", false},
		{"hf://buckets/ns/na me", "", "", false},
		{"hf://buckets/ns/name/../x", "", "", false},
		{"hf://buckets/ns/name//x", "", "", false},
		{"hf://datasets/ns/name", "", "", false},
	} {
		id, p, err := ParseURL(c.in)
		if (err == nil) != c.ok || id != c.id || p != c.prefix {
			t.Errorf("ParseURL(%q) = %q %q %v", c.in, id, p, err)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"hf://buckets/ns/name/a/b", "hf://buckets/a/b", "hf://buckets/a/b/../c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, p, err := ParseURL(s)
		if err != nil {
			return
		}
		if got := URL(id, p); got != strings.TrimSuffix(s, "/") {
			t.Fatalf("round trip %q -> %q", s, got)
		}
		if strings.Contains(id, "..") || strings.Count(id, "/") != 1 {
			t.Fatalf("bad id %q", id)
		}
	})
}

// TestBucketCDNReuse: with CacheNone, the ranges of a file go to the CDN
// URL its first resolve was redirected to (one Hub request per file); an
// expired URL is resolved again, and the error never shows a signature.
func TestBucketCDNReuse(t *testing.T) {
	fb := newFakeBucket(t, conformance)
	ctx := context.Background()
	o := hubOpts(t, fb)
	o.Cache = fetch.CacheNone
	o.FooterSize = 1024
	src, err := Open(ctx, "hf://buckets/ns/name/sets/ds", o, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for n := range src.Pins() {
		if strings.HasPrefix(n, "data/") && src.Pins()[n].Size > 4096 {
			name = n
		}
	}
	if name == "" {
		t.Fatal("no data file larger than 4 KiB")
	}
	want := fb.files["sets/ds/"+name]
	f, err := src.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	read := func(off, n int64) {
		t.Helper()
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, off); err != nil || !bytes.Equal(buf, want[off:off+n]) {
			t.Fatalf("read [%d,+%d): %v", off, n, err)
		}
	}
	read(0, 100)
	read(200, 100)
	read(1000, 50)
	if got := fb.resolves["sets/ds/"+name]; got != 1 {
		t.Fatalf("%d resolve requests for 3 ranges, want 1", got)
	}
	fb.mu.Lock()
	fb.signed++ // every URL handed out so far expires
	fb.mu.Unlock()
	read(2000, 10)
	if got := fb.resolves["sets/ds/"+name]; got != 2 {
		t.Fatalf("%d resolve requests after the CDN URL expired, want 2", got)
	}
}
