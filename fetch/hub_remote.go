package fetch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
)

// remoteFile is the fetch function of a Hub file streamed with HTTP range
// requests (CacheNone): NewRangeFile keeps, prefetches and assembles the
// ranges (rangefile.go); this side makes the requests — to the CDN URL the
// Hub last redirected the file to when there is one — checks the answers,
// and falls back to reading the whole file once when the server ignores
// Range.
type remoteFile struct {
	h    *Hub
	name string
	size int64
	hash string

	wholeMu sync.Mutex
	whole   []byte // set once if the server ignores Range
}

func (h *Hub) newRemoteFile(_ context.Context, e treeEntry) File {
	f := &remoteFile{h: h, name: e.Path, size: e.size(), hash: e.blobHash()}
	// The prefetch options mean what RangeOptions' do (0: default); their
	// defaults live in RangeOptions.WithDefaults alone.
	o := RangeOptions{Gap: h.opts.PrefetchGap, MaxSpan: h.opts.PrefetchMaxSpan, Concurrency: h.opts.PrefetchConcurrency,
		Memory: h.opts.PrefetchMemory, FooterSize: h.opts.FooterSize}
	wrap := func(err error) error { return h.scrub(fmt.Errorf("%s@%s: %w", h.id, shortSHA(h.sha), err)) }
	return NewRangeFile(e.Path, f.size, f.read, o, wrap)
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

func (f *remoteFile) wholeData() []byte {
	f.wholeMu.Lock()
	defer f.wholeMu.Unlock()
	return f.whole
}

// read returns the bytes [off, end): from the whole file when the server
// ignored Range once, else by range requests.
func (f *remoteFile) read(ctx context.Context, off, end int64) ([]byte, error) {
	if w := f.wholeData(); w != nil {
		return w[off:end], nil
	}
	return f.fetch(ctx, off, end)
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
		n, err := f.readRange(ctx, s, resp, from, end, buf[got:])
		got += n
		if err != nil {
			return nil, err
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

// readRange checks a 206 answer's Content-Range against the bytes asked
// for (from up to end) and reads them into dst. A body cut short returns
// the bytes it gave, and an error only when the retry budget is spent
// (the caller asks for the rest).
func (f *remoteFile) readRange(ctx context.Context, s *retryState, resp *http.Response, from, end int64, dst []byte) (int64, error) {
	h := f.h
	start, last, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
	if !ok || start != from || last >= end || (total >= 0 && total != f.size) {
		resp.Body.Close()
		return 0, fmt.Errorf("GET %s: Content-Range %q does not match the requested bytes %d-%d of %d", s.url, shorten(resp.Header.Get("Content-Range"), 80), from, end-1, f.size)
	}
	want := last - start + 1
	rb := h.watchBody(resp.Body)
	n, rerr := io.ReadFull(rb, dst[:want])
	rb.Close()
	h.stats.bytes.Add(int64(n))
	if rerr != nil {
		h.log.Debug("hub: range read interrupted, resuming", "file", f.name, "at", from+int64(n), "error", rerr)
		if err := s.retryBody(ctx, rerr); err != nil {
			return int64(n), err
		}
	}
	return int64(n), nil
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
	return buf, nil
}
