// Package fakehub is the test suite's Hugging Face Hub: it serves a local
// dataset directory with the real Hub's API paths and headers, counts
// requests and the bytes it serves per file, and injects faults.
//
//	GET  /api/datasets/{org}/{name}/revision/{rev}      {"id":..., "sha":...}
//	GET  /api/datasets/{org}/{name}/tree/{rev}/{path}   entries, Link rel="next" pages
//	HEAD/GET /datasets/{org}/{name}/resolve/{rev}/{path}
//	    non-LFS: 200/206, ETag "<git sha1>", X-Repo-Commit
//	    LFS (*.parquet, *.mp4): 302 to a second server (the "CDN") with
//	    X-Linked-Etag "<sha256>", X-Linked-Size, X-Repo-Commit
//
// Faults (Fault): statuses with headers (5xx, 429 with Retry-After),
// bodies cut in the middle, bodies that stall; a required token
// (Hub.Token, 401 without it), servers ignoring Range, wrong ETags,
// corrupted content, hostile tree entries, expired CDN signatures.
//
// Buckets (buckets.go, cas.go) is the same for Storage Buckets and the Xet
// CAS behind them. The package imports nothing of lrstream but the Xet
// formats (fetch/xet, itself free of lrstream imports), so that fetch's own
// tests can use it.
package fakehub

import (
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

// DefaultSHA is the commit every revision resolves to unless Options.SHA
// says otherwise.
const DefaultSHA = "0123456789abcdef0123456789abcdef01234567"

// File is one served file.
type File struct {
	Path         string
	Data         []byte
	SHA1, SHA256 string // the git blob id and the content's sha256
	LFS          bool   // served through the CDN redirect
}

// Fault answers the first N requests of a kind ("revision", "tree",
// "resolve", "cdn"; all of them when N < 0) with Status and Headers, or
// (Drop) with a body cut in the middle, or (Stall) with half the body and
// then nothing until the client gives up.
type Fault struct {
	Kind    string
	N       int
	Status  int
	Headers map[string]string
	Drop    bool
	Stall   bool
	Hits    int
}

// Options configure a Hub.
type Options struct {
	// ID is the repo id, "org/name".
	ID string
	// SHA is the commit revisions resolve to (DefaultSHA when empty).
	SHA string
	// PageSize is the tree listing's page size (0: one page).
	PageSize int
}

// Hub is a fake Hugging Face Hub serving one dataset. Its exported fields
// may be set before the first request; Mu guards the fields the handlers
// read and write (lock it to change them while requests run).
type Hub struct {
	ID, SHA string
	// Files by path, Paths sorted, ByHash by sha256.
	Files  map[string]*File
	Paths  []string
	ByHash map[string]*File
	// Token, when set, is required (Authorization: Bearer) on the Hub
	// host (not on the CDN).
	Token    string
	PageSize int

	// Server is the Hub host, CDN the host LFS files redirect to.
	Server, CDN *httptest.Server

	// Tally counts requests per kind (revision, tree, resolve, cdn) and
	// holds the faults to inject, under Mu.
	Tally
	// Ranged counts the requests with a Range header per kind.
	Ranged map[string]int
	// Gets counts content requests (GET answered with a file's bytes) per
	// path, Bytes the body bytes served per path.
	Gets  map[string]int
	Bytes map[string]int64
	// Spans are the byte ranges served per path, in order.
	Spans map[string][]Span
	// CDNAuth counts requests reaching the CDN with an Authorization
	// header; Unpinned tree/resolve requests not pinned to SHA.
	CDNAuth, Unpinned int
	// ExtraTree entries are appended to every tree listing.
	ExtraTree   []map[string]any
	IgnoreRange bool
	WrongEtag   map[string]bool // path -> announce a wrong ETag
	Corrupt     map[string]bool // path -> serve flipped bytes
	// SeenAuth is the last Authorization header seen per kind.
	SeenAuth map[string]string
	// Sigs counts the CDN signatures issued (sig-N); those below
	// SigsValidAt are expired (403).
	Sigs, SigsValidAt int
}

// New serves the dataset directory dir. The servers close when the test
// ends.
func New(t testing.TB, dir string, o Options) *Hub {
	t.Helper()
	h := &Hub{
		ID: o.ID, SHA: o.SHA, PageSize: o.PageSize,
		Files: map[string]*File{}, ByHash: map[string]*File{},
		Tally: newTally(), Ranged: map[string]int{}, Gets: map[string]int{}, Bytes: map[string]int64{},
		Spans:     map[string][]Span{},
		WrongEtag: map[string]bool{}, Corrupt: map[string]bool{}, SeenAuth: map[string]string{},
	}
	if h.SHA == "" {
		h.SHA = DefaultSHA
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		s256 := sha256.Sum256(data)
		h1 := sha1.New()
		fmt.Fprintf(h1, "blob %d\x00", len(data))
		h1.Write(data)
		f := &File{Path: rel, Data: data, SHA256: hex.EncodeToString(s256[:]), SHA1: hex.EncodeToString(h1.Sum(nil)),
			LFS: strings.HasSuffix(rel, ".parquet") || strings.HasSuffix(rel, ".mp4")}
		h.Files[rel] = f
		h.ByHash[f.SHA256] = f
		h.Paths = append(h.Paths, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(h.Paths)
	h.Server = httptest.NewServer(http.HandlerFunc(h.serveHub))
	h.CDN = httptest.NewServer(http.HandlerFunc(h.serveCDN))
	t.Cleanup(func() { h.Server.Close(); h.CDN.Close() })
	return h
}

// URL is the Hub's endpoint (HF_ENDPOINT).
func (h *Hub) URL() string { return h.Server.URL }

// Tally is the part of a fake server that counts its requests and injects
// faults, shared by Hub and Buckets: Mu guards it and the server's other
// fields the handlers read and write.
type Tally struct {
	Mu sync.Mutex
	// Counts are requests per kind.
	Counts map[string]int
	// Faults are consulted in order.
	Faults []*Fault
}

func newTally() Tally { return Tally{Counts: map[string]int{}} }

// AddFault adds a fault.
func (x *Tally) AddFault(f *Fault) {
	x.Mu.Lock()
	defer x.Mu.Unlock()
	x.Faults = append(x.Faults, f)
}

// Count returns the number of requests of a kind.
func (x *Tally) Count(kind string) int {
	x.Mu.Lock()
	defer x.Mu.Unlock()
	return x.Counts[kind]
}

// fault counts a request of kind and returns the first fault of that kind
// with hits left, counting the hit (nil: none). The caller holds Mu.
func (x *Tally) fault(kind string) *Fault {
	x.Counts[kind]++
	for _, f := range x.Faults {
		if f.Kind == kind && (f.N < 0 || f.Hits < f.N) {
			f.Hits++
			return f
		}
	}
	return nil
}

// Snapshot returns the request counts per kind, and per kind+"-range"
// those with a Range header.
func (h *Hub) Snapshot() map[string]int {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	m := map[string]int{}
	for k, v := range h.Counts {
		m[k] = v
	}
	for k, v := range h.Ranged {
		m[k+"-range"] = v
	}
	return m
}

// Span is a byte range served: Len bytes from Off.
type Span struct{ Off, Len int64 }

// ServedSpans returns the byte ranges served per path since the last
// ResetServed.
func (h *Hub) ServedSpans() map[string][]Span {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	out := make(map[string][]Span, len(h.Spans))
	for k, v := range h.Spans {
		out[k] = append([]Span(nil), v...)
	}
	return out
}

// Served returns the body bytes served per path since the last
// ResetServed, and the content requests per path.
func (h *Hub) Served() (map[string]int64, map[string]int) {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	b := make(map[string]int64, len(h.Bytes))
	for k, v := range h.Bytes {
		b[k] = v
	}
	g := make(map[string]int, len(h.Gets))
	for k, v := range h.Gets {
		g[k] = v
	}
	return b, g
}

// ResetServed zeroes the per-path byte and request counts.
func (h *Hub) ResetServed() {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	clear(h.Bytes)
	clear(h.Gets)
	clear(h.Spans)
}

// ExpireSignatures makes every CDN URL issued so far expired.
func (h *Hub) ExpireSignatures() {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	h.SigsValidAt = h.Sigs + 1
}

// hit counts a request and returns the fault to apply, if any.
func (h *Hub) hit(kind string, r *http.Request) *Fault {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	if r.Header.Get("Range") != "" {
		h.Ranged[kind]++
	}
	if kind == "cdn" && r.Header.Get("Authorization") != "" {
		h.CDNAuth++
	}
	h.SeenAuth[kind] = r.Header.Get("Authorization")
	return h.fault(kind)
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

func hubError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Error-Code", code)
	w.Header().Set("X-Error-Message", msg)
	http.Error(w, msg, status)
}

func (h *Hub) serveHub(w http.ResponseWriter, r *http.Request) {
	prefixAPI := "/api/datasets/" + h.ID + "/"
	prefixResolve := "/datasets/" + h.ID + "/resolve/"
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
	fl := h.hit(kind, r)
	if h.Token != "" && r.Header.Get("Authorization") != "Bearer "+h.Token {
		hubError(w, 401, "RepoNotFound", "Invalid credentials in Authorization header")
		return
	}
	if fl != nil && !fl.Drop && !fl.Stall {
		for k, v := range fl.Headers {
			w.Header().Set(k, v)
		}
		http.Error(w, http.StatusText(fl.Status), fl.Status)
		return
	}
	if fl != nil && fl.Stall && kind != "resolve" {
		w.Header().Set("Content-Type", "application/json")
		stallBody(w, r, []byte(`{"id": "`+h.ID+`", "sha": "`))
		return
	}
	switch kind {
	case "revision":
		h.serveRevision(w, strings.TrimPrefix(r.URL.Path, prefixAPI+"revision/"))
	case "tree":
		h.serveTree(w, r, strings.TrimPrefix(r.URL.Path, prefixAPI+"tree/"))
	case "resolve":
		h.serveResolve(w, r, strings.TrimPrefix(r.URL.Path, prefixResolve), fl)
	}
}

// serveRevision answers the revision API: the dataset's sha and files.
func (h *Hub) serveRevision(w http.ResponseWriter, rev string) {
	if rev != "main" && rev != "v1.0" && rev != h.SHA && rev != "refs/pr/1" {
		hubError(w, 404, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	sib := []map[string]string{}
	for _, p := range h.Paths {
		sib = append(sib, map[string]string{"rfilename": p})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"_id": "x", "id": h.ID, "sha": h.SHA, "private": h.Token != "", "siblings": sib})
}

// serveResolve answers a resolve request for rest (REV/PATH): a redirect
// to the CDN for an LFS file, else its bytes.
func (h *Hub) serveResolve(w http.ResponseWriter, r *http.Request, rest string, fl *Fault) {
	rev, p, _ := strings.Cut(rest, "/")
	if rev != h.SHA {
		h.Mu.Lock()
		h.Unpinned++
		h.Mu.Unlock()
	}
	f := h.Files[p]
	if f == nil {
		hubError(w, 404, "EntryNotFound", p+" does not exist on \"main\"")
		return
	}
	h.Mu.Lock()
	wrong := h.WrongEtag[p]
	h.Mu.Unlock()
	w.Header().Set("X-Repo-Commit", h.SHA)
	if f.LFS {
		etag := f.SHA256
		if wrong {
			etag = strings.Repeat("e", 64)
		}
		w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
		w.Header().Set("ETag", `"`+etag+`"`)
		h.Mu.Lock()
		h.Sigs++
		sig := h.Sigs
		h.Mu.Unlock()
		w.Header().Set("Location", h.CDN.URL+"/blobs/"+f.SHA256+"?X-Amz-Signature=sig-"+strconv.Itoa(sig))
		w.WriteHeader(http.StatusFound)
		return
	}
	etag := f.SHA1
	if wrong {
		etag = strings.Repeat("e", 40)
	}
	w.Header().Set("ETag", `"`+etag+`"`)
	h.serveBytes(w, r, f, fl)
}

func (h *Hub) serveCDN(w http.ResponseWriter, r *http.Request) {
	fl := h.hit("cdn", r)
	if fl != nil && !fl.Drop && !fl.Stall {
		for k, v := range fl.Headers {
			w.Header().Set(k, v)
		}
		http.Error(w, http.StatusText(fl.Status), fl.Status)
		return
	}
	f := h.ByHash[strings.TrimPrefix(r.URL.Path, "/blobs/")]
	sig, err := strconv.Atoi(strings.TrimPrefix(r.URL.Query().Get("X-Amz-Signature"), "sig-"))
	if f == nil || err != nil {
		http.Error(w, "no such blob", 404)
		return
	}
	h.Mu.Lock()
	expired := sig < h.SigsValidAt
	h.Mu.Unlock()
	if expired {
		http.Error(w, "Request has expired", http.StatusForbidden)
		return
	}
	w.Header().Set("ETag", `"s3-etag-not-a-hash"`)
	h.serveBytes(w, r, f, fl)
}

// serveBytes answers a single-range or plain request (its own Range
// handling so faults can cut bodies), counting the body bytes written.
func (h *Hub) serveBytes(w http.ResponseWriter, r *http.Request, f *File, fl *Fault) {
	data := f.Data
	h.Mu.Lock()
	if h.Corrupt[f.Path] {
		data = append([]byte(nil), data...)
		data[len(data)/2] ^= 0xff
	}
	ignore := h.IgnoreRange
	h.Mu.Unlock()
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Type", "application/octet-stream")
	status := http.StatusOK
	body := data
	var off int64
	if rng := r.Header.Get("Range"); rng != "" && !ignore {
		start, end, ok := ParseRange(rng, int64(len(data)))
		if !ok {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			http.Error(w, "bad range", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		body = data[start : end+1]
		off = start
		status = http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	count := func(n int) {
		h.Mu.Lock()
		h.Gets[f.Path]++
		h.Bytes[f.Path] += int64(n)
		h.Spans[f.Path] = append(h.Spans[f.Path], Span{Off: off, Len: int64(n)})
		h.Mu.Unlock()
	}
	if fl != nil && fl.Stall {
		count(len(body) / 2)
		stallBody(w, r, body[:len(body)/2])
		return
	}
	if fl != nil && fl.Drop {
		count(len(body) / 2)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-body
	}
	n, _ := w.Write(body)
	count(n)
}

// ParseRange parses a single-range Range header ("bytes=a-b", "bytes=a-",
// "bytes=-n") against a size; ok is false for anything else.
func ParseRange(v string, size int64) (start, end int64, ok bool) {
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
	end = size - 1
	if b != "" {
		if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
			return 0, 0, false
		}
		end = min(end, size-1)
	}
	return start, end, true
}

func (h *Hub) serveTree(w http.ResponseWriter, r *http.Request, rest string) {
	rev, dir, _ := strings.Cut(rest, "/")
	if rev != h.SHA {
		h.Mu.Lock()
		h.Unpinned++
		h.Mu.Unlock()
	}
	dir = strings.Trim(dir, "/")
	recursive := r.URL.Query().Get("recursive") == "true" || r.URL.Query().Get("recursive") == "True"
	var entries []map[string]any
	dirs := map[string]bool{}
	found := dir == ""
	for _, p := range h.Paths {
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
		f := h.Files[p]
		e := map[string]any{"type": "file", "oid": f.SHA1, "size": len(f.Data), "path": p}
		if f.LFS {
			e["lfs"] = map[string]any{"oid": f.SHA256, "size": len(f.Data), "pointerSize": 134}
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
	h.Mu.Lock()
	entries = append(entries, h.ExtraTree...)
	h.Mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i]["path"].(string) < entries[j]["path"].(string) })
	cursor, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	cursor = min(max(cursor, 0), len(entries))
	end := len(entries)
	if h.PageSize > 0 {
		end = min(cursor+h.PageSize, len(entries))
	}
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
