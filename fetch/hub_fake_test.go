package fetch

import (
	"github.com/lrstream/lrstream/internal/testkit"

	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
)

// The fake Hub serves a local dataset directory with the real Hub's
// paths and headers:
//
//	GET  /api/datasets/{org}/{name}/revision/{rev}      {"id":..., "sha":...}
//	GET  /api/datasets/{org}/{name}/tree/{rev}/{path}   entries, Link rel="next" pages
//	HEAD/GET /datasets/{org}/{name}/resolve/{rev}/{path}
//	    non-LFS: 200/206, ETag "<git sha1>", X-Repo-Commit
//	    LFS (*.parquet): 302 to a second server (the "CDN") with
//	    X-Linked-Etag "<sha256>", X-Linked-Size, X-Repo-Commit
//
// plus injectable faults. Requests are counted per kind.

const (
	fakeOrg   = "lerobot-test"
	fakeName  = "pub_inferred_front_wrist"
	fakeID    = fakeOrg + "/" + fakeName
	fakeSHA   = "0123456789abcdef0123456789abcdef01234567"
	fakeToken = "hf_SECRETtoken_do_not_leak_123"
)

type fakeFile struct {
	path         string
	data         []byte
	sha1, sha256 string
	lfs          bool
}

type fakeHub struct {
	t        *testing.T
	files    map[string]*fakeFile
	paths    []string // sorted file paths
	byHash   map[string]*fakeFile
	token    string // required on the hub when non-empty
	pageSize int

	hub, cdn *httptest.Server

	mu          sync.Mutex
	counts      map[string]int // revision, tree, resolve, cdn
	ranged      map[string]int // range requests per kind
	cdnAuth     int            // requests reaching the CDN with an Authorization header
	unpinned    int            // tree/resolve requests not pinned to the SHA
	extraTree   []map[string]any
	ignoreRange bool
	wrongEtag   map[string]bool   // path -> announce a wrong ETag
	corrupt     map[string]bool   // path -> serve flipped bytes
	faults      []*fault          // consulted in order
	seenHeaders map[string]string // last Authorization seen per kind (for leak checks)
	sigs        int               // CDN signatures issued (sig-N)
	sigsValidAt int               // signatures below this number are expired
}

// fault answers the first n requests of a kind (or all, n < 0) with a
// status, or (drop) with a body cut in the middle.
type fault struct {
	kind    string // revision, tree, resolve, cdn
	n       int
	status  int
	headers map[string]string
	drop    bool
	stall   bool // send half the body, then nothing (until the client gives up)
	hits    int
}

// stallBody writes part of a body, flushes it and then stops sending
// until the client closes the connection (or 5 s pass).
func stallBody(w http.ResponseWriter, r *http.Request, part []byte) {
	w.Write(part)
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
}

func datasetDir(t *testing.T) string {
	t.Helper()
	p := testkit.Shared(t, "conformance", "datasets", fakeName)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("conformance dataset not available: %v", err)
	}
	return p
}

func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	root := datasetDir(t)
	f := &fakeHub{
		t: t, files: map[string]*fakeFile{}, byHash: map[string]*fakeFile{},
		pageSize: 5, counts: map[string]int{}, ranged: map[string]int{},
		wrongEtag: map[string]bool{}, corrupt: map[string]bool{}, seenHeaders: map[string]string{},
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s256 := sha256.Sum256(data)
		h1 := sha1.New()
		fmt.Fprintf(h1, "blob %d\x00", len(data))
		h1.Write(data)
		ff := &fakeFile{path: filepath.ToSlash(rel), data: data, sha256: hex.EncodeToString(s256[:]),
			sha1: hex.EncodeToString(h1.Sum(nil)), lfs: strings.HasSuffix(rel, ".parquet")}
		f.files[ff.path] = ff
		f.byHash[ff.sha256] = ff
		f.paths = append(f.paths, ff.path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(f.paths)
	f.hub = httptest.NewServer(http.HandlerFunc(f.serveHub))
	f.cdn = httptest.NewServer(http.HandlerFunc(f.serveCDN))
	t.Cleanup(func() { f.hub.Close(); f.cdn.Close() })
	return f
}

func (f *fakeHub) addFault(fl *fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fl)
}

func (f *fakeHub) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[kind]
}

func (f *fakeHub) snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]int{}
	for k, v := range f.counts {
		m[k] = v
	}
	for k, v := range f.ranged {
		m[k+"-range"] = v
	}
	return m
}

// hit counts a request and returns the fault to apply, if any.
func (f *fakeHub) hit(kind string, r *http.Request) *fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[kind]++
	if r.Header.Get("Range") != "" {
		f.ranged[kind]++
	}
	if kind == "cdn" && r.Header.Get("Authorization") != "" {
		f.cdnAuth++
	}
	f.seenHeaders[kind] = r.Header.Get("Authorization")
	for _, fl := range f.faults {
		if fl.kind == kind && (fl.n < 0 || fl.hits < fl.n) {
			fl.hits++
			return fl
		}
	}
	return nil
}

func hubError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Error-Code", code)
	w.Header().Set("X-Error-Message", msg)
	http.Error(w, msg, status)
}

func (f *fakeHub) serveHub(w http.ResponseWriter, r *http.Request) {
	prefixAPI := "/api/datasets/" + fakeID + "/"
	prefixResolve := "/datasets/" + fakeID + "/resolve/"
	var kind string
	switch {
	case strings.HasPrefix(r.URL.Path, prefixAPI+"revision/"):
		kind = "revision"
	case strings.HasPrefix(r.URL.Path, prefixAPI+"tree/"):
		kind = "tree"
	case strings.HasPrefix(r.URL.Path, prefixResolve):
		kind = "resolve"
	default:
		hubError(w, 404, "RepoNotFound", "Repository not found")
		return
	}
	fl := f.hit(kind, r)
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		hubError(w, 401, "RepoNotFound", "Invalid credentials in Authorization header")
		return
	}
	if fl != nil && !fl.drop && !fl.stall {
		for k, v := range fl.headers {
			w.Header().Set(k, v)
		}
		http.Error(w, http.StatusText(fl.status), fl.status)
		return
	}
	if fl != nil && fl.stall && kind != "resolve" {
		w.Header().Set("Content-Type", "application/json")
		stallBody(w, r, []byte(`{"id": "`+fakeID+`", "sha": "`))
		return
	}
	switch kind {
	case "revision":
		rev := strings.TrimPrefix(r.URL.Path, prefixAPI+"revision/")
		if rev != "main" && rev != "v1.0" && rev != fakeSHA && rev != "refs/pr/1" {
			hubError(w, 404, "RevisionNotFound", "Invalid rev id: "+rev)
			return
		}
		sib := []map[string]string{}
		for _, p := range f.paths {
			sib = append(sib, map[string]string{"rfilename": p})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"_id": "x", "id": fakeID, "sha": fakeSHA, "private": f.token != "", "siblings": sib})
	case "tree":
		f.serveTree(w, r, strings.TrimPrefix(r.URL.Path, prefixAPI+"tree/"))
	case "resolve":
		rest := strings.TrimPrefix(r.URL.Path, prefixResolve)
		rev, p, _ := strings.Cut(rest, "/")
		if rev != fakeSHA {
			f.mu.Lock()
			f.unpinned++
			f.mu.Unlock()
		}
		ff := f.files[p]
		if ff == nil {
			hubError(w, 404, "EntryNotFound", p+" does not exist on \"main\"")
			return
		}
		w.Header().Set("X-Repo-Commit", fakeSHA)
		if ff.lfs {
			etag := ff.sha256
			if f.wrongEtag[p] {
				etag = strings.Repeat("e", 64)
			}
			w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
			w.Header().Set("X-Linked-Size", strconv.Itoa(len(ff.data)))
			w.Header().Set("ETag", `"`+etag+`"`)
			f.mu.Lock()
			f.sigs++
			sig := f.sigs
			f.mu.Unlock()
			w.Header().Set("Location", f.cdn.URL+"/blobs/"+ff.sha256+"?X-Amz-Signature=sig-"+strconv.Itoa(sig))
			w.WriteHeader(http.StatusFound)
			return
		}
		etag := ff.sha1
		if f.wrongEtag[p] {
			etag = strings.Repeat("e", 40)
		}
		w.Header().Set("ETag", `"`+etag+`"`)
		f.serveBytes(w, r, ff, fl)
	}
}

func (f *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	fl := f.hit("cdn", r)
	if fl != nil && !fl.drop && !fl.stall {
		for k, v := range fl.headers {
			w.Header().Set(k, v)
		}
		http.Error(w, http.StatusText(fl.status), fl.status)
		return
	}
	ff := f.byHash[strings.TrimPrefix(r.URL.Path, "/blobs/")]
	sig, err := strconv.Atoi(strings.TrimPrefix(r.URL.Query().Get("X-Amz-Signature"), "sig-"))
	if ff == nil || err != nil {
		http.Error(w, "no such blob", 404)
		return
	}
	f.mu.Lock()
	expired := sig < f.sigsValidAt
	f.mu.Unlock()
	if expired {
		http.Error(w, "Request has expired", http.StatusForbidden)
		return
	}
	w.Header().Set("ETag", `"s3-etag-not-a-hash"`)
	f.serveBytes(w, r, ff, fl)
}

// serveBytes answers a single-range or plain request (its own Range
// handling so faults can cut bodies).
func (f *fakeHub) serveBytes(w http.ResponseWriter, r *http.Request, ff *fakeFile, fl *fault) {
	data := ff.data
	f.mu.Lock()
	if f.corrupt[ff.path] {
		data = append([]byte(nil), data...)
		data[len(data)/2] ^= 0xff
	}
	ignore := f.ignoreRange
	f.mu.Unlock()
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Type", "application/octet-stream")
	status := http.StatusOK
	body := data
	if rng := r.Header.Get("Range"); rng != "" && !ignore {
		start, end, ok := parseRangeHeader(rng, int64(len(data)))
		if !ok {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			http.Error(w, "bad range", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		body = data[start : end+1]
		status = http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	if fl != nil && fl.stall {
		stallBody(w, r, body[:len(body)/2])
		return
	}
	if fl != nil && fl.drop {
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-body
	}
	w.Write(body)
}

func parseRangeHeader(v string, size int64) (int64, int64, bool) {
	spec, ok := strings.CutPrefix(v, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, ok := strings.Cut(spec, "-")
	if !ok {
		return 0, 0, false
	}
	if a == "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size - 1, true
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start >= size {
		return 0, 0, false
	}
	end := size - 1
	if b != "" {
		if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
			return 0, 0, false
		}
		end = min(end, size-1)
	}
	return start, end, true
}

func (f *fakeHub) serveTree(w http.ResponseWriter, r *http.Request, rest string) {
	rev, dir, _ := strings.Cut(rest, "/")
	if rev != fakeSHA {
		f.mu.Lock()
		f.unpinned++
		f.mu.Unlock()
	}
	dir = strings.Trim(dir, "/")
	recursive := r.URL.Query().Get("recursive") == "true" || r.URL.Query().Get("recursive") == "True"
	var entries []map[string]any
	dirs := map[string]bool{}
	found := dir == ""
	for _, p := range f.paths {
		if dir != "" && !strings.HasPrefix(p, dir+"/") {
			continue
		}
		found = true
		rel := strings.TrimPrefix(p, dir+"/")
		if dir == "" {
			rel = p
		}
		segs := strings.Split(rel, "/")
		for i := 1; i < len(segs); i++ {
			if !recursive && i > 1 {
				break
			}
			d := strings.Join(segs[:i], "/")
			if dir != "" {
				d = dir + "/" + d
			}
			dirs[d] = true
		}
		if !recursive && len(segs) > 1 {
			continue
		}
		ff := f.files[p]
		e := map[string]any{"type": "file", "oid": ff.sha1, "size": len(ff.data), "path": p}
		if ff.lfs {
			e["lfs"] = map[string]any{"oid": ff.sha256, "size": len(ff.data), "pointerSize": 134}
		}
		entries = append(entries, e)
	}
	if !found {
		hubError(w, 404, "EntryNotFound", dir+" does not exist")
		return
	}
	for d := range dirs {
		entries = append(entries, map[string]any{"type": "directory", "oid": strings.Repeat("d", 40), "size": 0, "path": d})
	}
	f.mu.Lock()
	entries = append(entries, f.extraTree...)
	f.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i]["path"].(string) < entries[j]["path"].(string) })
	cursor, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	end := min(cursor+f.pageSize, len(entries))
	if end < len(entries) {
		q := url.Values{}
		if recursive {
			q.Set("recursive", "true")
		}
		q.Set("cursor", strconv.Itoa(end))
		next := "http://" + r.Host + r.URL.EscapedPath() + "?" + q.Encode()
		w.Header().Set("Link", "<"+next+`>; rel="next"`)
	}
	w.Header().Set("Content-Type", "application/json")
	page := entries[cursor:end]
	if page == nil {
		page = []map[string]any{}
	}
	json.NewEncoder(w).Encode(page)
}

// testOptions are options for the fake hub with fast retries.
func (f *fakeHub) options(t *testing.T, cache string, mode CacheMode) HubOptions {
	return HubOptions{
		Endpoint: f.hub.URL,
		Token:    f.token,
		CacheDir: cache,
		Cache:    mode,
		Retry:    RetryPolicy{MaxAttempts: 5, MinBackoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxWait: 10 * time.Second},
	}
}

// FakeHubForTest starts the fake Hub for the external test package
// (fetch_test). It returns the repo id, the options for a cache
// directory and mode, the local dataset directory, and the request
// counter.
func FakeHubForTest(t *testing.T) (id string, options func(cache string, mode CacheMode) HubOptions, dir string, counts func() map[string]int) {
	f := newFakeHub(t)
	return fakeID, func(cache string, mode CacheMode) HubOptions { return f.options(t, cache, mode) }, datasetDir(t), f.snapshot
}
