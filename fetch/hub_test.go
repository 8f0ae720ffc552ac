package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrstream/lrstream/internal/fakehub"
)

func mustOpenHub(t *testing.T, spec string, o HubOptions) *Hub {
	t.Helper()
	h, err := OpenHub(context.Background(), spec, o)
	if err != nil {
		t.Fatalf("OpenHub(%s): %v", spec, err)
	}
	return h
}

// readAllCompare reads every file through src and compares it with the
// fake hub's bytes.
func readAllCompare(t *testing.T, f *fakeHub, src Source) {
	t.Helper()
	ctx := context.Background()
	names, err := src.List(ctx, "")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if !reflect.DeepEqual(names, f.Paths) {
		t.Fatalf("List = %v\nwant %v", names, f.Paths)
	}
	for _, n := range names {
		got, err := ReadAll(ctx, src, n)
		if err != nil {
			t.Fatalf("ReadAll(%s): %v", n, err)
		}
		if !bytes.Equal(got, f.Files[n].Data) {
			t.Fatalf("%s: bytes differ from the local file (%d vs %d bytes)", n, len(got), len(f.Files[n].Data))
		}
	}
}

func checkCacheLayout(t *testing.T, f *fakeHub, cache string, want []string) {
	t.Helper()
	repo := filepath.Join(cache, "datasets--"+fakeOrg+"--"+fakeName)
	ref, err := os.ReadFile(filepath.Join(repo, "refs", "main"))
	if err != nil || string(ref) != fakeSHA {
		t.Fatalf("refs/main = %q, %v; want %s", ref, err, fakeSHA)
	}
	for _, n := range want {
		ff := f.Files[n]
		lp := filepath.Join(repo, "snapshots", fakeSHA, filepath.FromSlash(n))
		target, err := os.Readlink(lp)
		if err != nil {
			t.Fatalf("%s: not a symlink: %v", n, err)
		}
		if filepath.IsAbs(target) {
			t.Fatalf("%s: absolute symlink %s", n, target)
		}
		hash := ff.SHA1
		if ff.LFS {
			hash = ff.SHA256
		}
		depth := strings.Count(n, "/")
		wantTarget := strings.Repeat("../", depth+2) + "blobs/" + hash
		if filepath.ToSlash(target) != wantTarget {
			t.Fatalf("%s -> %s, want %s", n, target, wantTarget)
		}
		data, err := os.ReadFile(lp)
		if err != nil || !bytes.Equal(data, ff.Data) {
			t.Fatalf("%s: blob content wrong (%v)", n, err)
		}
		if _, err := os.Stat(filepath.Join(cache, ".locks", "datasets--"+fakeOrg+"--"+fakeName, hash+".lock")); err != nil {
			t.Fatalf("%s: no lock file: %v", n, err)
		}
	}
	noIncomplete(t, cache)
}

func noIncomplete(t *testing.T, cache string) {
	t.Helper()
	filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (strings.HasSuffix(p, ".incomplete") || strings.Contains(p, ".lrstream-")) {
			t.Errorf("leftover temporary file %s", p)
		}
		return nil
	})
}

func TestHubCacheFull(t *testing.T) {
	f := newFakeHub(t)
	f.Token = fakeToken
	cache := t.TempDir()
	var prog bytes.Buffer
	o := f.options(t, cache, CacheFull)
	o.Progress = &prog
	h := mustOpenHub(t, fakeID, o)
	if h.Revision() != fakeSHA || h.ID() != fakeID {
		t.Fatalf("ID/Revision = %s/%s", h.ID(), h.Revision())
	}
	readAllCompare(t, f, h)
	c := f.Snapshot()
	t.Logf("cache=full cold: %d files, requests by kind %v, hub stats %+v", len(f.Paths), c, h.Stats())
	nEntries := len(f.Paths) + 9 // 9 directories in this dataset
	if c["revision"] != 1 || c["tree"] > (nEntries+f.PageSize-1)/f.PageSize+1 || c["resolve"] != len(f.Paths) {
		t.Errorf("unexpected request counts %v", c)
	}
	nLFS := 0
	for _, ff := range f.Files {
		if ff.LFS {
			nLFS++
		}
	}
	if c["cdn"] != nLFS {
		t.Errorf("cdn requests = %d, want %d", c["cdn"], nLFS)
	}
	if f.CDNAuth != 0 || f.SeenAuth["cdn"] != "" {
		t.Fatalf("the Authorization header reached the CDN host %d times", f.CDNAuth)
	}
	if f.SeenAuth["resolve"] != "Bearer "+fakeToken {
		t.Fatalf("the token was not sent to the hub host")
	}
	if f.Unpinned != 0 {
		t.Fatalf("%d requests were not pinned to the commit", f.Unpinned)
	}
	checkCacheLayout(t, f, cache, f.Paths)
	if !strings.Contains(prog.String(), "ETA") || !strings.HasSuffix(prog.String(), "\n") {
		t.Errorf("progress output = %q", prog.String())
	}

	// Warm cache: only the revision and the listing hit the network.
	before := f.Snapshot()
	h2 := mustOpenHub(t, fakeID+"@main", f.options(t, cache, CacheFull))
	readAllCompare(t, f, h2)
	after := f.Snapshot()
	t.Logf("cache=full warm: requests revision=%d tree=%d resolve=%d cdn=%d, stats %+v",
		after["revision"]-before["revision"], after["tree"]-before["tree"], after["resolve"]-before["resolve"], after["cdn"]-before["cdn"], h2.Stats())
	if after["resolve"] != before["resolve"] || after["cdn"] != before["cdn"] {
		t.Fatalf("warm cache still downloaded files")
	}

	// Open without List: one tree request for the parent directory
	// describes the file and its siblings.
	before = f.Snapshot()
	cache2 := t.TempDir()
	h3 := mustOpenHub(t, fakeID, f.options(t, cache2, CacheFull))
	for _, n := range []string{"meta/info.json", "meta/stats.json", "meta/tasks.parquet"} {
		if got, err := ReadAll(context.Background(), h3, n); err != nil || !bytes.Equal(got, f.Files[n].Data) {
			t.Fatalf("ReadAll(%s) = %v", n, err)
		}
	}
	after = f.Snapshot()
	if d := after["tree"] - before["tree"]; d != 1 {
		t.Errorf("opening 3 files of meta/ cost %d tree requests, want 1", d)
	}
	if _, err := h3.Open(context.Background(), "meta/nope.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestHubCacheNone(t *testing.T) {
	f := newFakeHub(t)
	cache := t.TempDir()
	h := mustOpenHub(t, fakeID, f.options(t, cache, CacheNone))
	readAllCompare(t, f, h)
	c := f.Snapshot()
	t.Logf("cache=none: requests by kind %v, stats %+v", c, h.Stats())
	if c["resolve"] != len(f.Paths) {
		t.Errorf("resolve requests = %d, want one per file (%d)", c["resolve"], len(f.Paths))
	}
	// Shards are not cached; metadata is.
	blobs, _ := os.ReadDir(filepath.Join(cache, RepoFolderName(fakeID), "blobs"))
	var meta []string
	for _, p := range f.Paths {
		if !isShard(p) {
			meta = append(meta, p)
		}
	}
	if len(blobs) != len(meta) {
		t.Errorf("%d blobs cached, want %d metadata files", len(blobs), len(meta))
	}
	checkCacheLayout(t, f, cache, meta)
	fi, err := h.Open(context.Background(), "data/chunk-000/file-000.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer fi.Close()
	if _, ok := fi.(Prefetcher); !ok {
		t.Fatalf("streamed file %T does not implement Prefetcher", fi)
	}
}

func TestHubPrefetchCoalescesAndFooter(t *testing.T) {
	f := newFakeHub(t)
	o := f.options(t, t.TempDir(), CacheNone)
	o.FooterSize = 1024
	o.PrefetchGap = 4096
	o.PrefetchMaxSpan = 8192
	o.PrefetchConcurrency = 3
	h := mustOpenHub(t, fakeID, o)
	name := "data/chunk-000/file-001.parquet"
	want := f.Files[name].Data
	size := int64(len(want))
	ctx := context.Background()
	fi, err := h.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer fi.Close()

	// Footer: the 8-byte trailer, then the footer itself: one request.
	base := f.Count("cdn")
	buf := make([]byte, 8)
	if _, err := fi.ReadAt(buf, size-8); err != nil || !bytes.Equal(buf, want[size-8:]) {
		t.Fatalf("trailer: %v", err)
	}
	buf = make([]byte, 900)
	if _, err := fi.ReadAt(buf, size-908); err != nil || !bytes.Equal(buf, want[size-908:size-8]) {
		t.Fatalf("footer: %v", err)
	}
	if n := f.Count("cdn") - base; n != 1 {
		t.Errorf("footer reads cost %d requests, want 1", n)
	}

	// Column chunks: close ranges merge, far ones do not, a big one splits.
	ranges := []Range{
		{Off: 100, Len: 1000}, {Off: 3000, Len: 500}, // gap 1900 -> merged
		{Off: 20000, Len: 100}, {Off: 20100, Len: 50}, // touching -> merged
		{Off: 30000, Len: 20000},   // 20000 > 8192 -> 3 pieces
		{Off: size - 100, Len: 50}, // already in the footer span
	}
	base = f.Count("cdn")
	if err := fi.(Prefetcher).Prefetch(ctx, ranges); err != nil {
		t.Fatal(err)
	}
	prefetchReqs := f.Count("cdn") - base
	t.Logf("prefetch of %d ranges: %d requests", len(ranges), prefetchReqs)
	if prefetchReqs != 5 {
		t.Errorf("prefetch issued %d requests, want 5 (1 merged + 1 merged + 3 split)", prefetchReqs)
	}
	base = f.Count("cdn")
	for _, r := range ranges {
		b := make([]byte, r.Len)
		if _, err := fi.ReadAt(b, r.Off); err != nil || !bytes.Equal(b, want[r.Off:r.Off+r.Len]) {
			t.Fatalf("ReadAt(%d,%d): %v", r.Off, r.Len, err)
		}
	}
	// A read across two split pieces is assembled from them.
	b := make([]byte, 2000)
	if _, err := fi.ReadAt(b, 36000); err != nil || !bytes.Equal(b, want[36000:38000]) {
		t.Fatalf("cross-piece read: %v", err)
	}
	// A read outside everything: one request.
	b = make([]byte, 10)
	if _, err := fi.ReadAt(b, 10000); err != nil || !bytes.Equal(b, want[10000:10010]) {
		t.Fatal(err)
	}
	if n := f.Count("cdn") - base; n != 1 {
		t.Errorf("reads after prefetch cost %d requests, want 1", n)
	}
	// Reading past the end returns io.EOF with the available bytes.
	b = make([]byte, 100)
	if n, err := fi.ReadAt(b, size-10); n != 10 || err != io.EOF {
		t.Fatalf("ReadAt at end = %d, %v", n, err)
	}
	// Prefetch again the same ranges: nothing to fetch.
	base = f.Count("cdn")
	if err := fi.(Prefetcher).Prefetch(ctx, ranges[:2]); err != nil || f.Count("cdn") != base {
		t.Errorf("re-prefetch cost %d requests (%v)", f.Count("cdn")-base, err)
	}
	if f.CDNAuth != 0 {
		t.Fatal("Authorization reached the CDN")
	}
	// After the first redirect, range requests go straight to the CDN.
	if n := f.Count("resolve"); n != 1 {
		t.Errorf("%d resolve requests for one streamed file, want 1", n)
	}
	// An expired CDN signature sends the next request back to the Hub.
	f.ExpireSignatures()
	b = make([]byte, 100)
	if _, err := fi.ReadAt(b, 12345); err != nil || !bytes.Equal(b, want[12345:12445]) {
		t.Fatalf("read after the CDN URL expired: %v", err)
	}
	if n := f.Count("resolve"); n != 2 {
		t.Errorf("%d resolve requests after expiry, want 2", n)
	}
	if _, err := fi.ReadAt(b, 23456); err != nil || !bytes.Equal(b, want[23456:23556]) || f.Count("resolve") != 2 {
		t.Fatalf("read with the fresh CDN URL: %v (resolve requests %d)", err, f.Count("resolve"))
	}
	t.Logf("streamed file: %d resolve + %d CDN requests in all", f.Count("resolve"), f.Count("cdn"))
}

func TestCoalesce(t *testing.T) {
	got := coalesce([]Range{{Off: 50, Len: 10}, {Off: 0, Len: 10}, {Off: 15, Len: 5}, {Off: 100, Len: 30}}, 5, 0)
	want := []Range{{Off: 0, Len: 20}, {Off: 50, Len: 10}, {Off: 100, Len: 30}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("coalesce = %v, want %v", got, want)
	}
	got = coalesce([]Range{{Off: 0, Len: 100}, {Off: 10, Len: 5}}, 0, 30)
	want = []Range{{Off: 0, Len: 25}, {Off: 25, Len: 25}, {Off: 50, Len: 25}, {Off: 75, Len: 25}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("coalesce split = %v, want %v", got, want)
	}
}

func TestHubFaultsRecover(t *testing.T) {
	f := newFakeHub(t)
	f.Token = fakeToken
	f.AddFault(&fakehub.Fault{Kind: "revision", N: 1, Status: 429, Headers: map[string]string{"Retry-After": "1"}})
	f.AddFault(&fakehub.Fault{Kind: "tree", N: 2, Status: 500})
	f.AddFault(&fakehub.Fault{Kind: "tree", N: 1, Status: 503, Headers: map[string]string{"RateLimit": `"api";r=0;t=0`}})
	f.AddFault(&fakehub.Fault{Kind: "cdn", N: 2, Drop: true})      // LFS downloads cut mid-body
	f.AddFault(&fakehub.Fault{Kind: "resolve", N: 3, Status: 502}) // hub errors on resolve
	f.AddFault(&fakehub.Fault{Kind: "resolve", N: 1, Drop: true})  // a non-LFS body cut
	start := time.Now()
	cache := t.TempDir()
	h := mustOpenHub(t, fakeID, f.options(t, cache, CacheFull))
	if el := time.Since(start); el < time.Second {
		t.Errorf("Retry-After: 1 not honoured (resolved after %v)", el)
	}
	readAllCompare(t, f, h)
	t.Logf("faults, cache=full: requests %v, stats %+v", f.Snapshot(), h.Stats())
	if h.Stats().Retries < 8 {
		t.Errorf("retries = %d, want >= 8", h.Stats().Retries)
	}
	checkCacheLayout(t, f, cache, f.Paths)

	// Streaming: a range body cut in the middle resumes.
	f.AddFault(&fakehub.Fault{Kind: "cdn", N: 2, Drop: true})
	o := f.options(t, t.TempDir(), CacheNone)
	o.FooterSize = 512
	h2 := mustOpenHub(t, fakeID, o)
	name := "data/chunk-001/file-000.parquet"
	fi, err := h2.Open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer fi.Close()
	b := make([]byte, 20000)
	if _, err := fi.ReadAt(b, 1000); err != nil || !bytes.Equal(b, f.Files[name].Data[1000:21000]) {
		t.Fatalf("ReadAt after a dropped connection: %v", err)
	}
	if err := fi.(Prefetcher).Prefetch(context.Background(), []Range{{Off: 30000, Len: 5000}}); err != nil {
		t.Fatal(err)
	}
	if _, err := fi.ReadAt(b[:5000], 30000); err != nil || !bytes.Equal(b[:5000], f.Files[name].Data[30000:35000]) {
		t.Fatalf("prefetched read after a drop: %v", err)
	}
	t.Logf("faults, cache=none: stats %+v", h2.Stats())
	if f.CDNAuth != 0 {
		t.Fatal("Authorization reached the CDN")
	}
}

func TestHubServerIgnoresRange(t *testing.T) {
	f := newFakeHub(t)
	f.IgnoreRange = true
	o := f.options(t, t.TempDir(), CacheNone)
	o.FooterSize = 1024
	h := mustOpenHub(t, fakeID, o)
	readAllCompare(t, f, h)
	name := "data/chunk-000/file-000.parquet"
	want := f.Files[name].Data
	fi, err := h.Open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer fi.Close()
	base := f.Count("cdn")
	b := make([]byte, 8)
	if _, err := fi.ReadAt(b, int64(len(want)-8)); err != nil || !bytes.Equal(b, want[len(want)-8:]) {
		t.Fatal(err)
	}
	if err := fi.(Prefetcher).Prefetch(context.Background(), []Range{{Off: 0, Len: 100}, {Off: 20000, Len: 100}}); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 5000, 20000, 40000} {
		b := make([]byte, 1000)
		if _, err := fi.ReadAt(b, off); err != nil || !bytes.Equal(b, want[off:off+1000]) {
			t.Fatalf("ReadAt(%d): %v", off, err)
		}
	}
	n := f.Count("cdn") - base
	t.Logf("server ignoring Range: %d request(s) for footer + prefetch + 4 reads; all files: %v", n, f.Snapshot())
	if n != 1 {
		t.Errorf("got %d requests, want 1 (the whole body read once)", n)
	}
}

func TestHubWrongETagRejected(t *testing.T) {
	f := newFakeHub(t)
	f.WrongEtag["meta/info.json"] = true
	f.Corrupt["meta/tasks.parquet"] = true
	cache := t.TempDir()
	h := mustOpenHub(t, fakeID, f.options(t, cache, CacheFull))
	for _, n := range []string{"meta/info.json", "meta/tasks.parquet"} {
		_, err := h.Open(context.Background(), n)
		if !errors.Is(err, ErrHashMismatch) {
			t.Fatalf("Open(%s) = %v, want ErrHashMismatch", n, err)
		}
		t.Logf("rejected: %v", err)
		ff := f.Files[n]
		repo := filepath.Join(cache, RepoFolderName(fakeID))
		for _, p := range []string{
			filepath.Join(repo, "blobs", ff.SHA1), filepath.Join(repo, "blobs", ff.SHA256),
			filepath.Join(repo, "snapshots", fakeSHA, filepath.FromSlash(n)),
		} {
			if _, err := os.Lstat(p); err == nil {
				t.Fatalf("%s exists after a rejected download", p)
			}
		}
	}
	noIncomplete(t, cache)
	// Streaming a corrupted file whole (server ignoring Range) is checked too.
	f.IgnoreRange = true
	f.Corrupt["data/chunk-000/file-000.parquet"] = true
	h2 := mustOpenHub(t, fakeID, f.options(t, t.TempDir(), CacheNone))
	fi, err := h2.Open(context.Background(), "data/chunk-000/file-000.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer fi.Close()
	if _, err := fi.ReadAt(make([]byte, 10), 0); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("corrupt whole-body read = %v, want ErrHashMismatch", err)
	}
}

func TestHubRetryBudgetError(t *testing.T) {
	f := newFakeHub(t)
	f.Token = fakeToken
	f.AddFault(&fakehub.Fault{Kind: "resolve", N: -1, Status: 503})
	h := mustOpenHub(t, fakeID, f.options(t, t.TempDir(), CacheFull))
	before := f.Count("resolve")
	_, err := h.Open(context.Background(), "meta/info.json")
	if err == nil {
		t.Fatal("Open succeeded against a failing server")
	}
	msg := err.Error()
	t.Logf("budget error: %s (%d attempts)", msg, f.Count("resolve")-before)
	if !errors.Is(err, ErrRetryBudget) {
		t.Errorf("error does not match ErrRetryBudget")
	}
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != 503 || he.Attempts != 5 {
		t.Errorf("HTTPError = %+v", he)
	}
	for _, s := range []string{f.Server.URL + "/datasets/" + fakeID + "/resolve/" + fakeSHA + "/meta/info.json", "503"} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not name %q", msg, s)
		}
	}
	if strings.Contains(msg, fakeToken) {
		t.Fatal("the token appears in the error")
	}
	if n := f.Count("resolve") - before; n != 5 {
		t.Errorf("%d attempts, want 5", n)
	}

	// A rate limit that resets later than the budget allows ends at once.
	f2 := newFakeHub(t)
	f2.AddFault(&fakehub.Fault{Kind: "revision", N: -1, Status: 429, Headers: map[string]string{"RateLimit": `"api";r=0;t=3600`}})
	start := time.Now()
	_, err = OpenHub(context.Background(), fakeID, f2.options(t, t.TempDir(), CacheFull))
	if !errors.Is(err, ErrRetryBudget) || time.Since(start) > 2*time.Second || !strings.Contains(err.Error(), "429") {
		t.Fatalf("rate-limited OpenHub = %v after %v", err, time.Since(start))
	}
	t.Logf("rate limit error: %v", err)

	// Private dataset without a token: a clear 401.
	f3 := newFakeHub(t)
	f3.Token = fakeToken
	o := f3.options(t, t.TempDir(), CacheFull)
	o.Token = ""
	_, err = OpenHub(context.Background(), fakeID, o)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Fatalf("unauthenticated OpenHub = %v", err)
	}
	// A wrong token is not echoed.
	o.Token = "hf_wrong_SECRET_value"
	_, err = OpenHub(context.Background(), fakeID, o)
	if err == nil || strings.Contains(err.Error(), o.Token) {
		t.Fatalf("wrong-token OpenHub = %v", err)
	}
}

func TestHubOffline(t *testing.T) {
	f := newFakeHub(t)
	cache := t.TempDir()
	h := mustOpenHub(t, fakeID, f.options(t, cache, CacheFull))
	readAllCompare(t, f, h)
	f.Server.Close()
	f.CDN.Close()

	o := f.options(t, cache, CacheFull)
	o.Offline = true
	for _, spec := range []string{fakeID, fakeID + "@main", fakeID + "@" + fakeSHA} {
		off := mustOpenHub(t, spec, o)
		if off.Revision() != fakeSHA {
			t.Fatalf("offline revision = %s", off.Revision())
		}
		readAllCompare(t, f, off)
		meta, err := off.List(context.Background(), "meta")
		if err != nil || len(meta) != 4 {
			t.Fatalf("offline List(meta) = %v, %v", meta, err)
		}
	}
	// Cold cache: a clear error.
	o.CacheDir = t.TempDir()
	_, err := OpenHub(context.Background(), fakeID, o)
	if !errors.Is(err, ErrOffline) || !strings.Contains(err.Error(), "refs/main") {
		t.Fatalf("cold offline OpenHub = %v", err)
	}
	t.Logf("cold offline: %v", err)
	// Unknown tag: same.
	o.CacheDir = cache
	if _, err := OpenHub(context.Background(), fakeID+"@v9", o); !errors.Is(err, ErrOffline) {
		t.Fatalf("offline unknown tag = %v", err)
	}
	// A file missing from a warm snapshot.
	off := mustOpenHub(t, fakeID, o)
	os.Remove(filepath.Join(cache, RepoFolderName(fakeID), "snapshots", fakeSHA, "meta", "info.json"))
	if _, err := off.Open(context.Background(), "meta/info.json"); !errors.Is(err, ErrOffline) {
		t.Fatalf("offline missing file = %v", err)
	}
}

func TestHubRejectsPathTraversal(t *testing.T) {
	for _, bad := range []string{"../../../etc/passwd", "data/../../x", "/etc/passwd", `data\..\x`, "data/./x", "a//b", "nul\x00byte"} {
		f := newFakeHub(t)
		f.ExtraTree = []map[string]any{{"type": "file", "oid": strings.Repeat("a", 40), "size": 1, "path": bad}}
		h := mustOpenHub(t, fakeID, f.options(t, t.TempDir(), CacheFull))
		_, err := h.List(context.Background(), "")
		if !errors.Is(err, ErrUnsafePath) {
			t.Fatalf("List with %q = %v, want ErrUnsafePath", bad, err)
		}
		if _, err := h.Open(context.Background(), bad); !errors.Is(err, ErrUnsafePath) {
			t.Fatalf("Open(%q) = %v", bad, err)
		}
	}
	// A bad blob hash (it names a cache file) is rejected too.
	f := newFakeHub(t)
	f.ExtraTree = []map[string]any{{"type": "file", "oid": "../../x", "size": 1, "path": "zzz"}}
	h := mustOpenHub(t, fakeID, f.options(t, t.TempDir(), CacheFull))
	if _, err := h.List(context.Background(), ""); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("bad oid: %v", err)
	}
	// An entry outside the listed directory.
	f.ExtraTree = []map[string]any{{"type": "file", "oid": strings.Repeat("a", 40), "size": 1, "path": "other/x"}}
	if _, err := h.List(context.Background(), "meta"); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("entry outside dir: %v", err)
	}
}

func TestHubConcurrentProcessesShareCache(t *testing.T) {
	f := newFakeHub(t)
	cache := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := OpenHub(context.Background(), fakeID, f.options(t, cache, CacheFull))
			if err != nil {
				errs <- err
				return
			}
			for _, n := range f.Paths {
				got, err := ReadAll(context.Background(), h, n)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, f.Files[n].Data) {
					errs <- errors.New(n + ": bytes differ")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkCacheLayout(t, f, cache, f.Paths)
	c := f.Snapshot()
	t.Logf("4 concurrent sources on one cache: requests %v (files: %d)", c, len(f.Paths))
	if c["resolve"] > 2*len(f.Paths) {
		t.Errorf("resolve requests = %d: the lock did not prevent duplicate downloads", c["resolve"])
	}
}

func TestHubResumesIncomplete(t *testing.T) {
	f := newFakeHub(t)
	cache := t.TempDir()
	name := "data/chunk-000/file-000.parquet"
	ff := f.Files[name]
	blobs := filepath.Join(cache, RepoFolderName(fakeID), "blobs")
	os.MkdirAll(blobs, 0o755)
	os.WriteFile(filepath.Join(blobs, ff.SHA256+".incomplete"), ff.Data[:10000], 0o644)
	h := mustOpenHub(t, fakeID, f.options(t, cache, CacheFull))
	got, err := ReadAll(context.Background(), h, name)
	if err != nil || !bytes.Equal(got, ff.Data) {
		t.Fatalf("resume: %v", err)
	}
	if f.Ranged["cdn"] != 1 {
		t.Errorf("resume used %d range requests, want 1", f.Ranged["cdn"])
	}
	if st := h.Stats(); st.BytesFetched >= int64(len(ff.Data)) {
		t.Errorf("resume fetched %d bytes, want < %d", st.BytesFetched, len(ff.Data))
	}
}

func TestHubReusesPythonCache(t *testing.T) {
	// A cache laid out by huggingface_hub (blob + relative link + ref) is
	// used as is, with no download.
	f := newFakeHub(t)
	cache := t.TempDir()
	repo := filepath.Join(cache, RepoFolderName(fakeID))
	ff := f.Files["meta/info.json"]
	os.MkdirAll(filepath.Join(repo, "blobs"), 0o755)
	os.WriteFile(filepath.Join(repo, "blobs", ff.SHA1), ff.Data, 0o644)
	os.MkdirAll(filepath.Join(repo, "snapshots", fakeSHA, "meta"), 0o755)
	os.Symlink("../../../blobs/"+ff.SHA1, filepath.Join(repo, "snapshots", fakeSHA, "meta", "info.json"))
	os.MkdirAll(filepath.Join(repo, "refs"), 0o755)
	os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(fakeSHA), 0o644)
	h := mustOpenHub(t, fakeID+"@"+fakeSHA, f.options(t, cache, CacheFull))
	got, err := ReadAll(context.Background(), h, "meta/info.json")
	if err != nil || !bytes.Equal(got, ff.Data) {
		t.Fatal(err)
	}
	if st := h.Stats(); st.Requests != 0 || st.CacheHits != 1 {
		t.Fatalf("stats %+v: want no request for a cached commit", st)
	}
}
