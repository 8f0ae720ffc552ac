package fakehub

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lrstream/lrstream/fetch/xet"
)

// Buckets is the test suite's Hugging Face Storage Buckets with the Xet CAS
// behind them, as huggingface_hub 1.33 and hf_xet 1.8 use them:
//
//	Hub (Server):
//	GET  /api/buckets/{ns}/{name}                       bucket info
//	GET  /api/buckets/{ns}/{name}/tree[/{prefix}]       entries with xetHash (prefix one
//	     escaped segment, matched lexically; ?recursive; Link rel="next" pages)
//	POST /api/buckets/{ns}/{name}/paths-info            {"paths": [...]} -> entries
//	GET  /api/buckets/{ns}/{name}/xet-{read,write}-token  {"casUrl","exp","accessToken"}
//	     (and the X-Xet-Cas-Url, X-Xet-Access-Token, X-Xet-Token-Expiration headers)
//	POST /api/buckets/{ns}/{name}/batch                 NDJSON addFile/deleteFile; a
//	     "failed" list in a 200 (some failed) or 422 (all failed)
//	HEAD|GET /buckets/{ns}/{name}/resolve/{path}        302 to the CDN with X-Xet-Hash,
//	     X-Linked-Size and Link: <xet-read-token>; rel="xet-auth"
//	CDN: GET /cdn/{xethash}?X-Amz-Signature=sig-N     the file's bytes, rebuilt from its xorbs
//	     (403 once ExpireSignatures expired the URL)
//	CAS:
//	POST /v1/xorbs/default/{hash}    the xorb's chunks parsed, its hash recomputed and checked
//	POST /v1/shards                  the shard parsed; every file checked against the stored
//	     xorbs (chunk ranges, sizes, verification hashes, file hash) before it is recorded
//	GET  /v1/reconstructions/{hash}  terms and fetch_info built from the shards (Range: a
//	     file byte range); /v2/reconstructions answers 404 (hf_xet falls back to v1)
//	GET  /v1/chunks/...              404 (no global deduplication)
//	GET  /xorb/{hash}                the stored xorb's bytes (Range), the fetch_info URLs
//
// The Hub routes require Token (when set) as a Bearer token; the CAS routes
// a CAS token issued by the token routes and not expired. Faults (Fault,
// kinds "token", "tree", "resolve", "batch", "xorb", "shard",
// "reconstruction", "xorb-get", "cdn") inject statuses. Everything is in
// memory; Bucket files are registered only through the batch API (or Put).
type Buckets struct {
	Server, CDN, CAS *httptest.Server
	// Token, when set, is required on the Hub routes.
	Token    string
	PageSize int
	// TokenTTL is the lifetime of the CAS tokens (default 1 hour).
	TokenTTL time.Duration
	// XorbDelay delays every xorb upload (an upload in progress, to
	// interrupt); set it before the first request, or under Mu.
	XorbDelay time.Duration

	// Tally counts requests per kind and holds the faults to inject;
	// its Mu guards the fields below.
	Tally
	buckets map[string]map[string]*BucketFile
	xorbs   map[xet.Hash]*storedXorb
	files   map[xet.Hash]*xet.FileInfo
	tokens  map[string]time.Time
	// Log is every request (method, path, whether it carried the expected
	// credentials).
	Log []Request
	// Batches are the paths of every batch request's operations, in order
	// ("+path" added, "-path" deleted).
	Batches [][]string
	// Shards are the bodies of the shards accepted, in order.
	Shards [][]byte
	// Refusals are the reasons of the CAS's 400 answers (bad xorbs and
	// shards), in order.
	Refusals []string
	// sigs counts the CDN signatures issued; those below sigsValid are
	// expired (403).
	sigs, sigsValid int
}

// Request is a logged request: Auth is its Authorization header.
type Request struct {
	Host, Method, Path, Auth string
}

// BucketFile is a file of a bucket.
type BucketFile struct {
	Path    string
	XetHash string
	Size    int64
	MTime   int64 // milliseconds
}

type storedXorb struct {
	data   []byte
	chunks []xet.ParsedChunk
}

// NewBuckets starts the fake's three servers (closed when the test ends).
func NewBuckets(t interface{ Cleanup(func()) }) *Buckets {
	b := NewBucketsServer()
	t.Cleanup(b.Close)
	return b
}

// NewBucketsServer starts the fake's servers; Close stops them.
func NewBucketsServer() *Buckets {
	b := &Buckets{PageSize: 50, TokenTTL: time.Hour,
		buckets: map[string]map[string]*BucketFile{}, xorbs: map[xet.Hash]*storedXorb{},
		files: map[xet.Hash]*xet.FileInfo{}, tokens: map[string]time.Time{}, Tally: newTally()}
	b.Server = httptest.NewServer(http.HandlerFunc(b.serveHub))
	b.CDN = httptest.NewServer(http.HandlerFunc(b.serveCDN))
	b.CAS = httptest.NewServer(http.HandlerFunc(b.serveCAS))
	return b
}

// Close stops the servers.
func (b *Buckets) Close() { b.Server.Close(); b.CDN.Close(); b.CAS.Close() }

// URL is the Hub endpoint (HF_ENDPOINT).
func (b *Buckets) URL() string { return b.Server.URL }

// AddBucket creates an empty bucket "ns/name".
func (b *Buckets) AddBucket(id string) {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	if b.buckets[id] == nil {
		b.buckets[id] = map[string]*BucketFile{}
	}
}

// Files returns a copy of a bucket's files by path (nil: no such bucket).
func (b *Buckets) Files(id string) map[string]BucketFile {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	fs := b.buckets[id]
	if fs == nil {
		return nil
	}
	out := map[string]BucketFile{}
	for p, f := range fs {
		out[p] = *f
	}
	return out
}

// Content rebuilds a registered file's bytes from its xorbs.
func (b *Buckets) Content(xetHash string) ([]byte, error) {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	h, err := xet.ParseHash(xetHash)
	if err != nil {
		return nil, err
	}
	return b.content(h)
}

func (b *Buckets) content(h xet.Hash) ([]byte, error) {
	if h == (xet.Hash{}) {
		return []byte{}, nil
	}
	fi := b.files[h]
	if fi == nil {
		return nil, fmt.Errorf("no file %s in the CAS", h)
	}
	var out []byte
	for _, s := range fi.Segments {
		x := b.xorbs[s.Xorb]
		for _, c := range x.chunks[s.Start:s.End] {
			out = append(out, c.Data...)
		}
	}
	return out, nil
}

// Put stores data in the CAS (chunked and packed into xorbs as a client
// would) and registers it as path of bucket id, for tests that read.
func (b *Buckets) Put(id, path string, data []byte) error {
	h, chunks, _, err := xet.HashReader(strings.NewReader(string(data)))
	if err != nil {
		return err
	}
	fi := &xet.FileInfo{Hash: h}
	var x xet.Xorb
	off := 0
	flush := func() {
		if len(x.Chunks) == 0 {
			return
		}
		parsed, _ := xet.ParseXorb(x.Data)
		xh := x.Hash()
		b.xorbs[xh] = &storedXorb{data: append([]byte(nil), x.Data...), chunks: parsed}
		for i := range fi.Segments {
			if fi.Segments[i].Xorb == (xet.Hash{}) {
				fi.Segments[i].Xorb = xh
			}
		}
		x.Reset()
	}
	b.Mu.Lock()
	defer b.Mu.Unlock()
	for _, c := range chunks {
		if !x.Fits(int(c.Size)) {
			flush()
		}
		start := uint32(len(x.Chunks))
		x.Add(data[off : off+int(c.Size)])
		if n := len(fi.Segments); n > 0 && fi.Segments[n-1].Xorb == (xet.Hash{}) {
			fi.Segments[n-1].End++
			fi.Segments[n-1].Bytes += uint32(c.Size)
		} else {
			fi.Segments = append(fi.Segments, xet.Segment{Start: start, End: start + 1, Bytes: uint32(c.Size)})
		}
		off += int(c.Size)
	}
	flush()
	if len(chunks) > 0 {
		b.files[h] = fi
	}
	if b.buckets[id] == nil {
		b.buckets[id] = map[string]*BucketFile{}
	}
	b.buckets[id][path] = &BucketFile{Path: path, XetHash: h.String(), Size: int64(len(data)), MTime: time.Now().UnixMilli()}
	return nil
}

// hit logs and counts a request and returns the fault to apply, if any.
func (b *Buckets) hit(kind string, r *http.Request) *Fault {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	b.Log = append(b.Log, Request{Host: kind, Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization")})
	return b.fault(kind)
}

// RevokeTokens makes every CAS token issued so far invalid (401).
func (b *Buckets) RevokeTokens() {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	clear(b.tokens)
}

// ExpireSignatures makes every CDN URL issued so far expired (403).
func (b *Buckets) ExpireSignatures() {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	b.sigsValid = b.sigs + 1
}

// Requests returns the logged requests of a kind ("" for all) whose path
// ends with suffix.
func (b *Buckets) Requests(kind, suffix string) []Request {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	var out []Request
	for _, r := range b.Log {
		if (kind == "" || r.Host == kind) && strings.HasSuffix(r.Path, suffix) {
			out = append(out, r)
		}
	}
	return out
}

// BatchLog returns a copy of Batches.
func (b *Buckets) BatchLog() [][]string {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	out := make([][]string, len(b.Batches))
	for i, x := range b.Batches {
		out[i] = append([]string(nil), x...)
	}
	return out
}

func writeFault(w http.ResponseWriter, f *Fault) {
	for k, v := range f.Headers {
		w.Header().Set(k, v)
	}
	http.Error(w, http.StatusText(f.Status), f.Status)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// bucketRoute splits /api/buckets/NS/NAME/REST (api) or
// /buckets/NS/NAME/REST into the bucket id and the rest (unescaped).
func bucketRoute(r *http.Request) (id, rest string, api, ok bool) {
	p := r.URL.EscapedPath()
	switch {
	case strings.HasPrefix(p, "/api/buckets/"):
		p, api = strings.TrimPrefix(p, "/api/buckets/"), true
	case strings.HasPrefix(p, "/buckets/"):
		p = strings.TrimPrefix(p, "/buckets/")
	default:
		return "", "", false, false
	}
	segs := strings.SplitN(p, "/", 3)
	if len(segs) < 2 {
		return "", "", false, false
	}
	ns, _ := url.PathUnescape(segs[0])
	name, _ := url.PathUnescape(segs[1])
	if len(segs) == 3 {
		rest, _ = url.PathUnescape(segs[2])
	}
	return ns + "/" + name, rest, api, true
}

func (b *Buckets) serveHub(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_fake/") {
		b.serveControl(w, r)
		return
	}
	id, rest, api, ok := bucketRoute(r)
	kind := "hub"
	switch {
	case !ok:
	case api && (rest == "tree" || strings.HasPrefix(rest, "tree/")):
		kind = "tree"
	case api && strings.HasPrefix(rest, "xet-"):
		kind = "token"
	case api && rest == "batch":
		kind = "batch"
	case api && rest == "paths-info":
		kind = "paths-info"
	case !api && strings.HasPrefix(rest, "resolve/"):
		kind = "resolve"
	}
	if f := b.hit(kind, r); f != nil {
		writeFault(w, f)
		return
	}
	if b.Token != "" && r.Header.Get("Authorization") != "Bearer "+b.Token {
		hubError(w, http.StatusUnauthorized, "RepoNotFound", "Invalid credentials in Authorization header")
		return
	}
	b.Mu.Lock()
	files := b.buckets[id]
	b.Mu.Unlock()
	if !ok || files == nil {
		hubError(w, http.StatusNotFound, "RepoNotFound", "Bucket "+id+" not found")
		return
	}
	switch kind {
	case "tree":
		b.serveTree(w, r, id, strings.TrimPrefix(strings.TrimPrefix(rest, "tree"), "/"))
	case "paths-info":
		b.servePathsInfo(w, r, id)
	case "token":
		b.serveToken(w, r, id, rest)
	case "batch":
		b.serveBatch(w, r, id)
	case "resolve":
		b.serveResolve(w, r, id, strings.TrimPrefix(rest, "resolve/"))
	default:
		if api && rest == "" {
			b.Mu.Lock()
			var size int64
			for _, f := range files {
				size += f.Size
			}
			n := len(files)
			b.Mu.Unlock()
			writeJSON(w, 200, map[string]any{"id": id, "private": b.Token != "", "createdAt": "2026-01-01T00:00:00.000Z", "size": size, "totalFiles": n})
			return
		}
		hubError(w, http.StatusNotFound, "NotFound", "no route "+r.URL.Path)
	}
}

func entryJSON(f *BucketFile) map[string]any {
	mt := time.UnixMilli(f.MTime).UTC().Format("2006-01-02T15:04:05.000Z")
	return map[string]any{"type": "file", "path": f.Path, "size": f.Size, "xetHash": f.XetHash, "mtime": mt, "uploadedAt": mt}
}

// serveTree lists the bucket's files whose path starts with prefix
// (lexically, as the Hub does), with directories unless recursive.
func (b *Buckets) serveTree(w http.ResponseWriter, r *http.Request, id, prefix string) {
	recursive := r.URL.Query().Get("recursive") == "true" || r.URL.Query().Get("recursive") == "True"
	b.Mu.Lock()
	var entries []map[string]any
	dirs := map[string]bool{}
	base := ""
	if prefix != "" && !recursive {
		base = strings.TrimRight(prefix, "/") + "/"
	}
	for p, f := range b.buckets[id] {
		if !strings.HasPrefix(p, prefix) || (base != "" && !strings.HasPrefix(p, base)) {
			continue
		}
		if sub := p[len(base):]; !recursive && strings.Contains(sub, "/") {
			dirs[base+strings.SplitN(sub, "/", 2)[0]] = true
			continue
		}
		entries = append(entries, entryJSON(f))
	}
	b.Mu.Unlock()
	for d := range dirs {
		entries = append(entries, map[string]any{"type": "directory", "path": d, "uploadedAt": "2026-01-01T00:00:00.000Z"})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i]["path"].(string) < entries[j]["path"].(string) })
	cursor, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	cursor = min(max(cursor, 0), len(entries))
	end := min(cursor+max(b.PageSize, 1), len(entries))
	if end < len(entries) {
		q := url.Values{"cursor": {strconv.Itoa(end)}}
		if recursive {
			q.Set("recursive", "true")
		}
		w.Header().Set("Link", "<"+b.Server.URL+r.URL.EscapedPath()+"?"+q.Encode()+`>; rel="next"`)
	}
	page := entries[cursor:end]
	if page == nil {
		page = []map[string]any{}
	}
	writeJSON(w, 200, page)
}

func (b *Buckets) servePathsInfo(w http.ResponseWriter, r *http.Request, id string) {
	var req struct {
		Paths []string `json:"paths"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req); err != nil {
		hubError(w, 400, "BadRequest", "bad JSON: "+err.Error())
		return
	}
	b.Mu.Lock()
	defer b.Mu.Unlock()
	out := []map[string]any{}
	for _, p := range req.Paths {
		if f := b.buckets[id][p]; f != nil {
			out = append(out, entryJSON(f))
		}
	}
	writeJSON(w, 200, out)
}

// serveToken issues a CAS token (read or write: both are accepted by the
// fake CAS, which checks only that it was issued and has not expired).
func (b *Buckets) serveToken(w http.ResponseWriter, _ *http.Request, id, rest string) {
	if rest != "xet-read-token" && rest != "xet-write-token" {
		hubError(w, 404, "NotFound", "no route "+rest)
		return
	}
	raw := make([]byte, 12)
	rand.Read(raw)
	tok := "xet_cas_" + hex.EncodeToString(raw)
	exp := time.Now().Add(b.TokenTTL)
	b.Mu.Lock()
	b.tokens[tok] = exp
	b.Mu.Unlock()
	w.Header().Set("X-Xet-Cas-Url", b.CAS.URL)
	w.Header().Set("X-Xet-Access-Token", tok)
	w.Header().Set("X-Xet-Token-Expiration", strconv.FormatInt(exp.Unix(), 10))
	writeJSON(w, 200, map[string]any{"casUrl": b.CAS.URL, "accessToken": tok, "exp": exp.Unix()})
}

func (b *Buckets) serveResolve(w http.ResponseWriter, r *http.Request, id, path string) {
	b.Mu.Lock()
	f := b.buckets[id][path]
	b.Mu.Unlock()
	if f == nil {
		hubError(w, 404, "EntryNotFound", path+" does not exist in bucket "+id)
		return
	}
	w.Header().Set("X-Xet-Hash", f.XetHash)
	w.Header().Set("X-Linked-Size", strconv.FormatInt(f.Size, 10))
	w.Header().Set("ETag", `"`+f.XetHash+`"`)
	w.Header().Set("Link", "<"+b.Server.URL+"/api/buckets/"+id+`/xet-read-token>; rel="xet-auth"`)
	// Another host name for the CDN (huggingface_hub follows redirects to
	// the same host name on HEAD, whatever the port, as to the Hub itself).
	b.Mu.Lock()
	b.sigs++
	sig := b.sigs
	b.Mu.Unlock()
	w.Header().Set("Location", strings.Replace(b.CDN.URL, "127.0.0.1", "localhost", 1)+"/cdn/"+f.XetHash+
		"?X-Amz-Signature=sig-"+strconv.Itoa(sig))
	w.WriteHeader(http.StatusFound)
}

// serveCDN serves a file's bytes (Range supported), rebuilt from the CAS.
func (b *Buckets) serveCDN(w http.ResponseWriter, r *http.Request) {
	if f := b.hit("cdn", r); f != nil {
		writeFault(w, f)
		return
	}
	sig, serr := strconv.Atoi(strings.TrimPrefix(r.URL.Query().Get("X-Amz-Signature"), "sig-"))
	b.Mu.Lock()
	expired := serr != nil || sig < b.sigsValid
	h, err := xet.ParseHash(strings.TrimPrefix(r.URL.Path, "/cdn/"))
	var data []byte
	if err == nil {
		data, err = b.content(h)
	}
	b.Mu.Unlock()
	if expired {
		http.Error(w, "Request has expired", http.StatusForbidden)
		return
	}
	if err != nil {
		http.Error(w, "no such file", http.StatusNotFound)
		return
	}
	serveRange(w, r, data)
}

// serveRange answers a plain or single-range GET of data.
func serveRange(w http.ResponseWriter, r *http.Request, data []byte) {
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Type", "application/octet-stream")
	body, status := data, http.StatusOK
	if rng := r.Header.Get("Range"); rng != "" {
		start, end, ok := ParseRange(rng, int64(len(data)))
		if !ok {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			http.Error(w, "bad range", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		body, status = data[start:end+1], http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}
