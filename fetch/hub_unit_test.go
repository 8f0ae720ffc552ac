package fetch

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseRepoSpec(t *testing.T) {
	for _, c := range []struct{ in, id, rev string }{
		{"lerobot/aloha", "lerobot/aloha", "main"},
		{"lerobot/aloha@v2.1", "lerobot/aloha", "v2.1"},
		{"org/na.me_x-1@refs/pr/3", "org/na.me_x-1", "refs/pr/3"},
		{"hf://datasets/org/name@" + fakeSHA, "org/name", fakeSHA},
	} {
		id, rev, err := ParseRepoSpec(c.in)
		if err != nil || id != c.id || rev != c.rev {
			t.Errorf("ParseRepoSpec(%q) = %q, %q, %v", c.in, id, rev, err)
		}
	}
	for _, bad := range []string{"", "name", "a/b/c", "../x", "org/..", "org/a--b", "org/name@../x", "org/name@a\\b", "/org/name", "org/name@/x"} {
		if _, _, err := ParseRepoSpec(bad); err == nil {
			t.Errorf("ParseRepoSpec(%q) accepted", bad)
		}
	}
}

func TestHubOptionsFromEnv(t *testing.T) {
	home := t.TempDir()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	o, err := HubOptionsFromEnv(env(map[string]string{"HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	if o.Endpoint != DefaultEndpoint || o.CacheDir != filepath.Join(home, ".cache", "huggingface", "hub") || o.Token != "" || o.Offline {
		t.Fatalf("defaults: %+v", o)
	}
	// Token file under HF_HOME.
	hf := filepath.Join(home, "hf")
	os.MkdirAll(hf, 0o700)
	os.WriteFile(filepath.Join(hf, "token"), []byte("hf_from_file\n"), 0o600)
	o, err = HubOptionsFromEnv(env(map[string]string{"HOME": home, "HF_HOME": hf, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "https://mirror.example/"}))
	if err != nil {
		t.Fatal(err)
	}
	if o.Token != "hf_from_file" || o.CacheDir != filepath.Join(hf, "hub") || !o.Offline || o.Endpoint != "https://mirror.example" {
		t.Fatalf("HF_HOME: %+v", o)
	}
	// HF_TOKEN wins; HF_TOKEN_PATH and HF_HUB_CACHE are honoured.
	os.WriteFile(filepath.Join(home, "tok"), []byte("hf_path"), 0o600)
	o, _ = HubOptionsFromEnv(env(map[string]string{"HOME": home, "HF_TOKEN_PATH": filepath.Join(home, "tok"), "HF_HUB_CACHE": "/c"}))
	if o.Token != "hf_path" || o.CacheDir != "/c" {
		t.Fatalf("HF_TOKEN_PATH: %+v", o)
	}
	o, _ = HubOptionsFromEnv(env(map[string]string{"HOME": home, "HF_TOKEN": "hf_env", "HF_TOKEN_PATH": filepath.Join(home, "tok"), "XDG_CACHE_HOME": "/x"}))
	if o.Token != "hf_env" || o.CacheDir != "/x/huggingface/hub" {
		t.Fatalf("HF_TOKEN: %+v", o)
	}
	if _, err := ParseCacheMode("bogus"); err == nil {
		t.Fatal("bad cache mode accepted")
	}
}

func TestServerWait(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Retry-After", "7")
	if d := serverWait(h, now); d != 7*time.Second {
		t.Errorf("Retry-After seconds: %v", d)
	}
	h.Set("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat))
	if d := serverWait(h, now); d != 90*time.Second {
		t.Errorf("Retry-After date: %v", d)
	}
	h = http.Header{}
	h.Set("RateLimit", `"api";r=0;t=55`)
	if d := serverWait(h, now); d != 55*time.Second {
		t.Errorf("RateLimit: %v", d)
	}
	h.Set("RateLimit", `"resolvers";r=12;t=55`)
	if d := serverWait(h, now); d != 0 {
		t.Errorf("RateLimit with requests left: %v", d)
	}
	h.Set("Retry-After", "3")
	h.Set("RateLimit", `"api";r=0;t=10`)
	if d := serverWait(h, now); d != 10*time.Second {
		t.Errorf("both: %v", d)
	}
	p := RetryPolicy{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	for i := 0; i < 10; i++ {
		d := backoff(p, i)
		hi := min(p.MinBackoff<<i, p.MaxBackoff)
		if d < hi/2 || d > hi {
			t.Errorf("backoff(%d) = %v outside [%v, %v]", i, d, hi/2, hi)
		}
	}
}

func TestNextLink(t *testing.T) {
	for in, want := range map[string]string{
		`<https://huggingface.co/api/datasets/a/b/tree/x?cursor=abc>; rel="next"`: "https://huggingface.co/api/datasets/a/b/tree/x?cursor=abc",
		`<https://h/p?c=1>; rel="prev", <https://h/p?c=3>; rel=next`:              "https://h/p?c=3",
		`<https://h/p?c=1>; rel="prev"`:                                           "",
		"":                                                                        "",
		`<https://h/p?c=1>; title="x"; rel="last next"`:                           "https://h/p?c=1",
	} {
		if got := nextLink(in); got != want {
			t.Errorf("nextLink(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestValidateRemotePath(t *testing.T) {
	for _, ok := range []string{"meta/info.json", "data/chunk-000/file-000.parquet", "README.md", "a b/c:d.txt", "..foo/bar..", ".gitattributes"} {
		if err := ValidateRemotePath(ok); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/abs", "../x", "a/../b", "a/..", "./a", "a//b", "a/", `a\b`, "a\x00b", "a\nb", "C:/x"} {
		if err := ValidateRemotePath(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := inside("/cache/snap", "a/../../x"); err == nil {
		t.Error("inside accepted an escaping path")
	}
}

func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf)
	clock := time.Unix(0, 0)
	p.now = func() time.Time { return clock }
	tr := p.start("data/x.parquet", 4<<20)
	clock = clock.Add(time.Second)
	tr.add(1 << 20)
	clock = clock.Add(time.Second)
	tr.add(1 << 20)
	tr.done()
	out := buf.String()
	if !strings.Contains(out, "2.0 MiB / 4.0 MiB") || !strings.Contains(out, "1.0 MiB/s") || !strings.Contains(out, "ETA 2s") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("progress output %q", out)
	}
}

func TestHubListMemoised(t *testing.T) {
	f := newFakeHub(t)
	h := mustOpenHub(t, fakeID, f.options(t, t.TempDir(), CacheNone))
	ctx := context.Background()
	if _, err := h.List(ctx, ""); err != nil {
		t.Fatal(err)
	}
	n := f.Count("tree")
	meta, err := h.List(ctx, "meta")
	if err != nil || len(meta) != 4 || f.Count("tree") != n {
		t.Fatalf("List(meta) = %v, %v after %d extra requests", meta, err, f.Count("tree")-n)
	}
	if missing, err := h.List(ctx, "nope"); err != nil || len(missing) != 0 {
		t.Fatalf("List(nope) = %v, %v", missing, err)
	}
	// A fresh source: a missing directory lists as empty (404 from the Hub).
	h2 := mustOpenHub(t, fakeID, f.options(t, t.TempDir(), CacheNone))
	if missing, err := h2.List(ctx, "nope"); err != nil || len(missing) != 0 {
		t.Fatalf("List(nope) = %v, %v", missing, err)
	}
	// Revision names with slashes are escaped into one path segment.
	h3 := mustOpenHub(t, fakeID+"@refs/pr/1", f.options(t, t.TempDir(), CacheFull))
	if h3.Revision() != fakeSHA {
		t.Fatal(h3.Revision())
	}
	if _, err := ReadAll(ctx, h3, "meta/info.json"); err != nil {
		t.Fatal(err)
	}
	ref, err := os.ReadFile(filepath.Join(h3.cache.dir, "refs", "refs", "pr", "1"))
	if err != nil || string(ref) != fakeSHA {
		t.Fatalf("refs/refs/pr/1 = %q, %v", ref, err)
	}
}

func TestOpenDataset(t *testing.T) {
	dir := datasetDir(t)
	src, err := OpenDataset(context.Background(), dir, HubOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := src.(*Dir); !ok {
		t.Fatalf("local dir opened as %T", src)
	}
	if _, err := OpenDataset(context.Background(), "./no/such/dir", HubOptions{}); err == nil || !strings.Contains(err.Error(), "no such local directory") {
		t.Fatalf("bad spec: %v", err)
	}
	f := newFakeHub(t)
	src, err = OpenDataset(context.Background(), fakeID, f.options(t, t.TempDir(), CacheFull))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := src.(*Hub); !ok {
		t.Fatalf("hub spec opened as %T", src)
	}
	// The same bytes through the local directory and the Hub.
	for _, n := range []string{"meta/info.json", "data/chunk-002/file-000.parquet"} {
		a, err1 := ReadAll(context.Background(), src, n)
		local, _ := NewDir(dir)
		b, err2 := ReadAll(context.Background(), local, n)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Fatalf("%s: %v %v", n, err1, err2)
		}
	}
}

func TestHubUnreachableAndCancelled(t *testing.T) {
	f := newFakeHub(t)
	o := f.options(t, t.TempDir(), CacheFull)
	f.Server.Close()
	start := time.Now()
	_, err := OpenHub(context.Background(), fakeID, o)
	if err == nil || !errors.Is(err, ErrRetryBudget) || !strings.Contains(err.Error(), f.Server.URL+"/api/datasets/"+fakeID+"/revision/main") {
		t.Fatalf("unreachable hub: %v", err)
	}
	t.Logf("unreachable: %v (after %v)", err, time.Since(start).Round(time.Millisecond))

	f2 := newFakeHub(t)
	h := mustOpenHub(t, fakeID, f2.options(t, t.TempDir(), CacheFull))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Open(ctx, "meta/info.json"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Open: %v", err)
	}
}
