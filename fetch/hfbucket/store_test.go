package hfbucket

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/fetch/objstore"
	"github.com/lrstream/lrstream/internal/fakehub"
)

const conformance = "../../../shared/conformance/datasets/pub_inferred_front_wrist"

const testToken = "hf_bucketSECRET"

// fakeBucket is the fake Hub's buckets (internal/fakehub.Buckets, with its
// Xet CAS) serving the conformance dataset as bucket ns/name under the
// prefix "sets/ds", and "sets/ds2/other.txt" beside it (another prefix
// that starts with the same characters).
type fakeBucket struct {
	*fakehub.Buckets
	files map[string][]byte // bucket path → content
}

func newFakeBucket(t *testing.T, dir string) *fakeBucket {
	t.Helper()
	fb := &fakeBucket{Buckets: fakehub.NewBuckets(t), files: map[string][]byte{}}
	fb.Token = testToken
	fb.PageSize = 3
	fb.AddBucket("ns/name")
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			fb.files["sets/ds/"+filepath.ToSlash(rel)] = b
		}
		return err
	})
	fb.files["sets/ds2/other.txt"] = []byte("another prefix")
	for p, b := range fb.files {
		if err := fb.Put("ns/name", p, b); err != nil {
			t.Fatal(err)
		}
	}
	return fb
}

// put replaces a file of the bucket.
func (fb *fakeBucket) put(t *testing.T, p string, b []byte) {
	t.Helper()
	fb.files[p] = b
	if err := fb.Put("ns/name", p, b); err != nil {
		t.Fatal(err)
	}
}

func hubOpts(t *testing.T, fb *fakeBucket) fetch.HubOptions {
	return fetch.HubOptions{Endpoint: fb.URL(), Token: testToken,
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
	cdn := fb.Requests("cdn", "")
	if len(cdn) == 0 {
		t.Fatal("no CDN request")
	}
	for _, r := range cdn {
		if r.Auth != "" {
			t.Fatalf("the CDN received an Authorization header %q", r.Auth)
		}
	}
}

func TestBucketFaults(t *testing.T) {
	fb := newFakeBucket(t, conformance)
	ctx := context.Background()
	fb.AddFault(&fakehub.Fault{Kind: "tree", N: 2, Status: 503})
	src, err := Open(ctx, "hf://buckets/ns/name/sets/ds", hubOpts(t, fb), t.TempDir())
	if err != nil {
		t.Fatalf("2 503s within the budget: %v", err)
	}
	if src.Stats().Retries < 2 {
		t.Fatalf("stats %+v", src.Stats())
	}
	storm := &fakehub.Fault{Kind: "resolve", N: 10, Status: 503}
	fb.AddFault(storm)
	_, err = fetch.ReadAll(ctx, src, "meta/info.json")
	if !errors.Is(err, fetch.ErrRetryBudget) || strings.Contains(err.Error(), testToken) {
		t.Fatalf("a 503 storm: %v", err)
	}
	fb.Mu.Lock()
	storm.N = 0
	fb.Mu.Unlock()
	// A file rewritten after Open.
	name := "meta/info.json"
	fb.put(t, "sets/ds/"+name, append(bytes.Clone(fb.files["sets/ds/"+name]), ' '))
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
	if got := len(fb.Requests("resolve", "/sets/ds/"+name)); got != 1 {
		t.Fatalf("%d resolve requests for 3 ranges, want 1", got)
	}
	fb.ExpireSignatures() // every URL handed out so far expires
	read(2000, 10)
	if got := len(fb.Requests("resolve", "/sets/ds/"+name)); got != 2 {
		t.Fatalf("%d resolve requests after the CDN URL expired, want 2", got)
	}
}
