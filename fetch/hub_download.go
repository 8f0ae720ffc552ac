package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// fileSizeIs reports whether p is a regular file of the given size.
func fileSizeIs(p string, size int64) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Size() == size
}

// cachedStale reports whether the cached copy of name (size bytes)
// disagrees with the Hub's listing of the file at the pinned commit: a
// blob truncated or extended since it was verified (a crash of a writer
// that did not flush, a disk problem, another tool). Online the file's
// listing is used, made if needed (one request per directory, as a cold
// Open would make); with a cached pinned commit (no request made at all)
// only a listing made anyway; offline or after falling back to the cache,
// nothing. A stale copy is downloaded again (download replaces the blob).
// The content of a blob of the right size is not hashed again on reuse
// (docs/hub.md, "What is verified").
func (h *Hub) cachedStale(ctx context.Context, name string, size int64) (treeEntry, bool) {
	if h.cacheOnly() {
		return treeEntry{}, false
	}
	h.mu.Lock()
	e, known := h.entries[name]
	h.mu.Unlock()
	if !known {
		if h.pinnedCached || h.noSizeCheck.Load() {
			return treeEntry{}, false
		}
		var err error
		if e, err = h.stat(ctx, name); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				h.noSizeCheck.Store(true)
			}
			h.log.Debug("hub: cannot check the cached file against the listing; cached files are served unchecked", "file", name, "error", h.scrub(err).Error())
			return treeEntry{}, false
		}
	}
	if e.Type != "file" || e.size() == size {
		return treeEntry{}, false
	}
	h.log.Warn("hub: a cached file's size differs from the Hub's listing; downloading it again",
		"dataset", h.id, "file", name, "cached_bytes", size, "listed_bytes", e.size(), "blob", e.blobHash())
	return e, true
}

// download makes sure the blob of e is in the cache (verified) and that
// the snapshot links to it. Concurrent callers, in this process or in
// others (lrstream or huggingface_hub), serialise on the blob's lock.
func (h *Hub) download(ctx context.Context, e treeEntry) error {
	hash, size := e.blobHash(), e.size()
	if !hexRE.MatchString(hash) {
		return fmt.Errorf("%w: invalid blob hash %q", ErrUnsafePath, shorten(hash, 80))
	}
	blob := h.cache.blobPath(hash)
	finish := func() error {
		if err := h.cache.link(h.sha, e.Path, hash); err != nil {
			return err
		}
		return h.writeRef()
	}
	if fileSizeIs(blob, size) {
		return finish()
	}
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	unlock, err := h.cache.lock(ctx, hash, func() {
		h.log.Debug("hub: waiting for another download of the same file", "file", e.Path)
	})
	if err != nil {
		return err
	}
	defer unlock()
	if fileSizeIs(blob, size) { // another process finished it meanwhile
		return finish()
	}
	inc := blob + ".incomplete"
	if err := h.fetchToFile(ctx, e, hash, size, inc); err != nil {
		if errors.Is(err, ErrHashMismatch) {
			os.Remove(inc) // untrusted bytes: never resume from them
		}
		return err
	}
	if err := verifyBlob(inc, hash, size); err != nil {
		os.Remove(inc)
		return fmt.Errorf("download %s: %w", e.Path, err)
	}
	if err := h.cache.publish(inc, blob); err != nil {
		return err
	}
	h.log.Debug("hub: downloaded", "file", e.Path, "bytes", size, "blob", hash)
	return finish()
}

// writeRef records refs/<requested> when a branch or tag was asked for,
// once a snapshot file exists (huggingface_hub's scan_cache_dir treats a
// ref to a missing snapshot as corruption).
func (h *Hub) writeRef() error {
	h.mu.Lock()
	done := h.refDone
	h.mu.Unlock()
	if done || h.requested == h.sha {
		return nil
	}
	if err := h.cache.writeRef(h.requested, h.sha); err != nil {
		return err
	}
	h.mu.Lock()
	h.refDone = true
	h.mu.Unlock()
	return nil
}

// checkOrigin validates the headers of a resolve response against the
// pinned commit and the expected blob hash. A mismatching ETag is a hard
// error: the bytes cannot be trusted to be the file we listed.
func (h *Hub) checkOrigin(resp *http.Response, ri *redirectInfo, hash string, size int64) error {
	if ri.linkedSize != "" {
		if n, err := strconv.ParseInt(strings.TrimSpace(ri.linkedSize), 10, 64); err == nil && n != size {
			return fmt.Errorf("%w: the Hub's X-Linked-Size %d differs from the listed size %d", ErrHashMismatch, n, size)
		}
	}
	commit := ri.repoCommit
	if !ri.redirected {
		commit = resp.Header.Get("X-Repo-Commit")
	}
	if commit != "" && !strings.EqualFold(commit, h.sha) {
		return fmt.Errorf("the Hub served commit %s instead of the pinned %s", shorten(commit, 64), h.sha)
	}
	etag := normalizeEtag(ri.linkedEtag)
	if etag == "" && !ri.redirected && (resp.Request == nil || h.sameOrigin(resp.Request.URL)) {
		etag = normalizeEtag(resp.Header.Get("X-Linked-Etag"))
		if etag == "" {
			etag = normalizeEtag(resp.Header.Get("ETag"))
		}
	}
	if etag != "" && hash != "" && etag != hash {
		return fmt.Errorf("%w: the Hub's ETag %s differs from the listed hash %s", ErrHashMismatch, shorten(etag, 80), hash)
	}
	return nil
}

// fetchToFile downloads e into the .incomplete file p, resuming a partial
// file with a Range request and resuming after connection drops within
// the retry budget.
func (h *Hub) fetchToFile(ctx context.Context, e treeEntry, hash string, size int64, p string) error {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	have := st.Size()
	if have > size {
		have = 0
	}
	if err := f.Truncate(have); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	var tr *tracker
	if h.prog != nil {
		tr = h.prog.start(e.Path, size-have)
		defer tr.done()
	}
	var s *retryState
	for have < size || size == 0 {
		resp, from, err := h.getFrom(ctx, e, hash, size, have, &s, tr)
		if err != nil {
			return err
		}
		have = from
		if _, err := f.Seek(have, io.SeekStart); err != nil {
			resp.Body.Close()
			return fmt.Errorf("hub cache: %w", err)
		}
		if err := f.Truncate(have); err != nil {
			resp.Body.Close()
			return fmt.Errorf("hub cache: %w", err)
		}
		rb := h.watchBody(resp.Body)
		n, rerr := copyBody(f, rb, size-have, tr)
		rb.Close()
		have += n
		h.stats.bytes.Add(n)
		var werr *writeError
		if errors.As(rerr, &werr) {
			return fmt.Errorf("hub cache: %w", werr.err)
		}
		if rerr == nil && have < size {
			rerr = io.ErrUnexpectedEOF
		}
		if rerr != nil {
			h.log.Debug("hub: download interrupted, resuming", "file", e.Path, "at", have, "error", rerr)
			if err := s.retryBody(ctx, rerr); err != nil {
				return err
			}
			continue
		}
		break
	}
	return nil
}

// getFrom sends one GET of e's file from byte have on (the retry state
// made at the first call) and checks the answer: a partial content
// starting at have, or the whole file (have is then 0, returned as
// from), from the expected origin. The caller closes the body.
func (h *Hub) getFrom(ctx context.Context, e treeEntry, hash string, size, have int64, s **retryState, tr *tracker) (resp *http.Response, from int64, err error) {
	ri := &redirectInfo{}
	rctx := context.WithValue(ctx, redirectKey{}, ri)
	req, err := h.newRequest(rctx, http.MethodGet, h.resolvePath(e.Path), "")
	if err != nil {
		return nil, 0, err
	}
	if *s == nil {
		*s = h.newState(http.MethodGet, req.URL)
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err = h.do(rctx, *s, req)
	if err != nil {
		return nil, 0, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if tr != nil && have > 0 {
			tr.grow(have) // the resume was refused: the whole file comes again
		}
		have = 0
	case http.StatusPartialContent:
		start, _, _, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != have {
			resp.Body.Close()
			return nil, 0, fmt.Errorf("GET %s: bad Content-Range %q for a resume at %d", req.URL.Redacted(), shorten(resp.Header.Get("Content-Range"), 80), have)
		}
	default:
		err := (*s).statusError(resp)
		resp.Body.Close()
		return nil, 0, err
	}
	if err := h.checkOrigin(resp, ri, hash, size); err != nil {
		resp.Body.Close()
		return nil, 0, fmt.Errorf("GET %s: %w", req.URL.Redacted(), err)
	}
	return resp, have, nil
}

type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

// copyBody copies at most limit bytes of body to w (one byte more is
// read to detect an overlong body, which is an error).
func copyBody(w io.Writer, body io.Reader, limit int64, tr *tracker) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		m, err := body.Read(buf)
		if m > 0 {
			if n+int64(m) > limit {
				return n, fmt.Errorf("%w: the server sent more bytes than the file's size", ErrHashMismatch)
			}
			if _, werr := w.Write(buf[:m]); werr != nil {
				return n, &writeError{werr}
			}
			n += int64(m)
			if tr != nil {
				tr.add(int64(m))
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// parseContentRange parses "bytes START-END/TOTAL" (TOTAL may be "*",
// returned as -1). Numbers are plain decimal digits; START <= END, and
// END < TOTAL when TOTAL is known.
func parseContentRange(v string) (start, end, total int64, ok bool) {
	v = strings.TrimSpace(v)
	rest, found := strings.CutPrefix(v, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	if start, ok = parseDigits(a); !ok {
		return 0, 0, 0, false
	}
	if end, ok = parseDigits(b); !ok || end < start {
		return 0, 0, 0, false
	}
	total = -1
	if tot != "*" {
		if total, ok = parseDigits(tot); !ok || end >= total {
			return 0, 0, 0, false
		}
	}
	return start, end, total, true
}

// parseDigits parses a non-empty run of decimal digits (no sign, no
// spaces) that fits an int64.
func parseDigits(s string) (int64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
