package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
)

// remoteFile streams a file with HTTP range requests (CacheNone). Reads
// are served, in this order, from the whole file (when the server ignored
// Range once), from prefetched or footer spans kept in memory, or by one
// range request for exactly the bytes asked.
type remoteFile struct {
	h    *Hub
	name string
	size int64
	hash string

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex
	spans  []*span // oldest first
	held   int64   // bytes in spans
	tail   *span
	closed bool

	wholeMu sync.Mutex
	whole   []byte // set once if the server ignores Range
}

// directURL is the CDN URL the Hub last redirected this file to. Range
// requests go there directly (saving a rate-limited resolve request and
// a round trip each) until it is refused, e.g. when its signature
// expires; then the Hub is asked again. It is kept per Hub, so files
// opened again (one Open per row group) reuse it.
func (f *remoteFile) directURL() *url.URL {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	return f.h.direct[f.name]
}

// setDirect sets the CDN URL, or clears it if it is still old.
func (f *remoteFile) setDirect(u, old *url.URL) {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	if u != nil {
		f.h.direct[f.name] = u
	} else if f.h.direct[f.name] == old {
		delete(f.h.direct, f.name)
	}
}

// span is one fetched (or being fetched) byte range [off, end).
type span struct {
	off, end int64
	done     chan struct{}
	data     []byte
	err      error
}

func (h *Hub) newRemoteFile(ctx context.Context, e treeEntry) *remoteFile {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &remoteFile{h: h, name: e.Path, size: e.size(), hash: e.blobHash(), ctx: fctx, cancel: cancel}
}

// Size is the file's length in bytes.
func (f *remoteFile) Size() int64 { return f.size }

// Name is the file's path in the repo.
func (f *remoteFile) Name() string { return f.name }

// Close drops the buffered bytes and cancels requests in flight.
func (f *remoteFile) Close() error {
	f.cancel()
	f.mu.Lock()
	f.closed = true
	f.spans, f.tail, f.held = nil, nil, 0
	f.mu.Unlock()
	f.wholeMu.Lock()
	f.whole = nil
	f.wholeMu.Unlock()
	return nil
}

func (f *remoteFile) wholeData() []byte {
	f.wholeMu.Lock()
	defer f.wholeMu.Unlock()
	return f.whole
}

// ReadAt reads len(p) bytes at off (fewer, with io.EOF, at the end).
func (f *remoteFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s: negative offset %d", f.name, off)
	}
	if off >= f.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := int64(len(p))
	if n > f.size-off {
		n = f.size - off
	}
	end := off + n
	data, err := f.read(off, end)
	if err != nil {
		return 0, f.h.scrub(fmt.Errorf("read %s in %s@%s [%d,%d): %w", f.name, f.h.id, shortSHA(f.h.sha), off, end, err))
	}
	copy(p, data)
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

func (f *remoteFile) read(off, end int64) ([]byte, error) {
	if w := f.wholeData(); w != nil {
		return w[off:end], nil
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errors.New("file is closed")
	}
	parts := f.coverLocked(off, end)
	tailStart := max(f.size-f.h.opts.FooterSize, 0)
	var fetchTail *span
	if parts == nil && off >= tailStart {
		// A read in the last FooterSize bytes (a parquet footer and its
		// length) fetches the whole tail in one request.
		if f.tail == nil { // (a failed tail span is dropped by fill)
			f.tail = &span{off: tailStart, end: f.size, done: make(chan struct{})}
			fetchTail = f.tail
			f.addLocked(f.tail)
		}
		parts = []*span{f.tail}
	}
	f.mu.Unlock()
	if fetchTail != nil {
		f.fill(f.ctx, fetchTail)
	}
	if parts != nil {
		if out, ok, err := f.assemble(parts, off, end); err != nil || ok {
			return out, err
		}
		// A failed prefetch falls back to a direct read.
	}
	return f.fetch(f.ctx, off, end)
}

// coverLocked returns spans that together cover [off, end), or nil.
// f.mu is held.
func (f *remoteFile) coverLocked(off, end int64) []*span {
	var parts []*span
	for pos := off; pos < end; {
		var best *span
		for _, s := range f.spans {
			if s.off <= pos && pos < s.end && (best == nil || s.end > best.end) {
				best = s
			}
		}
		if best == nil {
			return nil
		}
		parts = append(parts, best)
		pos = best.end
	}
	return parts
}

// assemble waits for the spans and copies [off, end) out of them; ok is
// false if one of them failed.
func (f *remoteFile) assemble(parts []*span, off, end int64) (out []byte, ok bool, err error) {
	for _, s := range parts {
		select {
		case <-s.done:
		case <-f.ctx.Done():
			return nil, false, f.ctx.Err()
		}
		if s.err != nil {
			if errors.Is(s.err, ErrHashMismatch) {
				// Content that failed its hash is not read again
				// piecewise (the pieces cannot be verified).
				return nil, false, s.err
			}
			return nil, false, nil
		}
	}
	if w := f.wholeData(); w != nil {
		return w[off:end], true, nil
	}
	if len(parts) == 1 && parts[0].data != nil {
		s := parts[0]
		return s.data[off-s.off : end-s.off], true, nil
	}
	out = make([]byte, 0, end-off)
	for _, s := range parts {
		if s.data == nil {
			return nil, false, nil
		}
		lo, hi := max(off, s.off), min(end, s.end)
		out = append(out, s.data[lo-s.off:hi-s.off]...)
	}
	return out, true, nil
}

// addLocked records a new span and evicts the oldest finished spans over
// the memory budget. f.mu is held.
func (f *remoteFile) addLocked(s *span) {
	f.spans = append(f.spans, s)
	f.held += s.end - s.off
	for f.held > f.h.opts.PrefetchMemory && len(f.spans) > 1 {
		old := f.spans[0]
		select {
		case <-old.done:
		default:
			return // still in flight: keep it
		}
		f.spans = f.spans[1:]
		f.held -= old.end - old.off
		if old == f.tail {
			f.tail = nil
		}
	}
}

func (f *remoteFile) dropLocked(s *span) {
	if f.tail == s {
		f.tail = nil
	}
	for i, x := range f.spans {
		if x == s {
			f.spans = append(f.spans[:i], f.spans[i+1:]...)
			f.held -= s.end - s.off
			break
		}
	}
}

// fill fetches a registered span and publishes the result.
func (f *remoteFile) fill(ctx context.Context, s *span) {
	data, err := f.fetch(ctx, s.off, s.end)
	if err == nil && f.wholeData() != nil {
		data = nil // the whole file is in memory: no second copy
	}
	s.data, s.err = data, err
	if err != nil {
		f.mu.Lock()
		f.dropLocked(s)
		f.mu.Unlock()
	}
	close(s.done)
}

// Prefetch fetches the given ranges, merging ranges closer than
// HubOptions.PrefetchGap, splitting merged ranges larger than
// PrefetchMaxSpan, with at most PrefetchConcurrency requests in flight,
// and keeps them in memory for the following ReadAt calls. Ranges already
// in memory are skipped. ReadAt calls for ranges being prefetched wait
// for them, so Prefetch may run in another goroutine.
func (f *remoteFile) Prefetch(ctx context.Context, ranges []Range) error {
	if f.wholeData() != nil {
		return nil
	}
	opts := f.h.opts
	var rs []Range
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return fmt.Errorf("prefetch %s: file is closed", f.name)
	}
	for _, r := range ranges {
		off, end := max(r.Off, 0), min(r.Off+r.Len, f.size)
		if r.Len <= 0 || off >= end {
			continue
		}
		if f.coverLocked(off, end) == nil {
			rs = append(rs, Range{Off: off, Len: end - off})
		}
	}
	merged := coalesce(rs, opts.PrefetchGap, opts.PrefetchMaxSpan)
	spans := make([]*span, len(merged))
	for i, r := range merged {
		spans[i] = &span{off: r.Off, end: r.Off + r.Len, done: make(chan struct{})}
		f.addLocked(spans[i])
	}
	f.mu.Unlock()
	if len(spans) == 0 {
		return nil
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(f.ctx, cancel)
	defer stop()
	sem := make(chan struct{}, opts.PrefetchConcurrency)
	var wg sync.WaitGroup
	for _, s := range spans {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f.fill(pctx, s)
		}()
	}
	wg.Wait()
	for _, s := range spans {
		if s.err != nil {
			return f.h.scrub(fmt.Errorf("prefetch %s in %s@%s: %w", f.name, f.h.id, shortSHA(f.h.sha), s.err))
		}
	}
	return nil
}

// coalesce sorts ranges, merges those at most gap bytes apart, and splits
// the results into pieces of at most maxSpan bytes.
func coalesce(rs []Range, gap, maxSpan int64) []Range {
	if len(rs) == 0 {
		return nil
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Off < rs[j].Off })
	var merged []Range
	cur := rs[0]
	for _, r := range rs[1:] {
		if r.Off <= cur.Off+cur.Len+gap {
			if e := r.Off + r.Len; e > cur.Off+cur.Len {
				cur.Len = e - cur.Off
			}
			continue
		}
		merged = append(merged, cur)
		cur = r
	}
	merged = append(merged, cur)
	if maxSpan <= 0 {
		return merged
	}
	var out []Range
	for _, r := range merged {
		pieces := (r.Len + maxSpan - 1) / maxSpan
		step := (r.Len + pieces - 1) / pieces
		for off := r.Off; off < r.Off+r.Len; off += step {
			out = append(out, Range{Off: off, Len: min(step, r.Off+r.Len-off)})
		}
	}
	return out
}

// fetch reads [off, end) with range requests, resuming after dropped
// connections within the retry budget. A 200 answer (Range ignored)
// switches the file to the whole-file fallback.
func (f *remoteFile) fetch(ctx context.Context, off, end int64) ([]byte, error) {
	h := f.h
	buf := make([]byte, end-off)
	var got int64
	var s *retryState
	triedDirect := false
	for got < int64(len(buf)) {
		ri := &redirectInfo{}
		rctx := context.WithValue(ctx, redirectKey{}, ri)
		req, err := h.newRequest(rctx, http.MethodGet, h.resolvePath(f.name), "")
		if err != nil {
			return nil, err
		}
		if s == nil {
			// Errors name the resolve URL, never a signed CDN URL.
			s = h.newState(http.MethodGet, req.URL)
		}
		direct := f.directURL()
		if direct != nil && !triedDirect {
			if req, err = h.newRequestURL(rctx, http.MethodGet, direct); err != nil {
				return nil, err
			}
		} else {
			direct = nil
		}
		from := off + got
		req.Header.Set("Range", "bytes="+strconv.FormatInt(from, 10)+"-"+strconv.FormatInt(end-1, 10))
		resp, err := h.do(rctx, s, req)
		if err != nil {
			return nil, err
		}
		if direct != nil && resp.StatusCode >= 400 && resp.StatusCode < 500 {
			// The signed CDN URL expired (or was refused): ask the Hub
			// for a fresh redirect.
			resp.Body.Close()
			h.log.Debug("hub: CDN URL refused, resolving again", "file", f.name, "status", resp.StatusCode)
			f.setDirect(nil, direct)
			triedDirect = true
			continue
		}
		if direct == nil && ri.redirected && resp.Request != nil && !h.sameOrigin(resp.Request.URL) &&
			(resp.StatusCode == http.StatusPartialContent || resp.StatusCode == http.StatusOK) {
			f.setDirect(resp.Request.URL, nil)
		}
		if direct == nil {
			if err := h.checkOrigin(resp, ri, f.hash, f.size); err != nil {
				resp.Body.Close()
				return nil, fmt.Errorf("GET %s: %w", req.URL.Redacted(), err)
			}
		}
		switch resp.StatusCode {
		case http.StatusPartialContent:
		case http.StatusOK:
			w, err := f.loadWhole(ctx, s, s.url, resp)
			if err != nil {
				return nil, err
			}
			return w[off:end], nil
		default:
			err := s.statusError(resp)
			resp.Body.Close()
			return nil, err
		}
		start, last, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != from || last >= end || (total >= 0 && total != f.size) {
			resp.Body.Close()
			return nil, fmt.Errorf("GET %s: Content-Range %q does not match the requested bytes %d-%d of %d", s.url, shorten(resp.Header.Get("Content-Range"), 80), from, end-1, f.size)
		}
		want := last - start + 1
		rb := h.watchBody(resp.Body)
		n, rerr := io.ReadFull(rb, buf[got:got+want])
		rb.Close()
		got += int64(n)
		h.stats.bytes.Add(int64(n))
		if rerr != nil {
			h.log.Debug("hub: range read interrupted, resuming", "file", f.name, "at", off+got, "error", rerr)
			if err := s.retryBody(ctx, rerr); err != nil {
				return nil, err
			}
		}
	}
	if off == 0 && end == f.size {
		// The whole file came (a file smaller than the footer span, or
		// a read of all of it): verify it as a download would be.
		if err := hashBytes(buf, f.hash); err != nil {
			return nil, fmt.Errorf("GET %s: %w", s.url, err)
		}
	}
	return buf, nil
}

// loadWhole reads the whole file from a 200 response (a server that
// ignores Range), once per file: concurrent callers wait for it. The
// content is verified against the listed hash.
func (f *remoteFile) loadWhole(ctx context.Context, s *retryState, u string, resp *http.Response) ([]byte, error) {
	f.wholeMu.Lock()
	defer f.wholeMu.Unlock()
	if f.whole != nil {
		resp.Body.Close()
		return f.whole, nil
	}
	h := f.h
	h.log.Debug("hub: server ignored Range, reading the whole file once", "file", f.name, "bytes", f.size)
	buf := make([]byte, f.size)
	for {
		rb := h.watchBody(resp.Body)
		n, err := io.ReadFull(rb, buf)
		rb.Close()
		h.stats.bytes.Add(int64(n))
		if err == nil {
			break
		}
		if err := s.retryBody(ctx, err); err != nil {
			return nil, err
		}
		ri := &redirectInfo{}
		rctx := context.WithValue(ctx, redirectKey{}, ri)
		req, err := h.newRequest(rctx, http.MethodGet, h.resolvePath(f.name), "")
		if err != nil {
			return nil, err
		}
		if resp, err = h.do(rctx, s, req); err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			err := s.statusError(resp)
			resp.Body.Close()
			return nil, err
		}
	}
	if err := hashBytes(buf, f.hash); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	f.whole = buf
	f.mu.Lock()
	f.spans, f.tail, f.held = nil, nil, 0
	f.mu.Unlock()
	return buf, nil
}

var _ Prefetcher = (*remoteFile)(nil)
