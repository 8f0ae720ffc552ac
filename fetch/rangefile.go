package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// RangeOptions tunes a RangeFile: the same knobs, with the same defaults,
// as HubOptions' Prefetch* and FooterSize (docs/hub.md, "Cache modes").
type RangeOptions struct {
	// Gap: prefetched ranges at most this many bytes apart are fetched as
	// one request (default 64 KiB; negative: only touching ranges merge).
	Gap int64
	// MaxSpan splits merged ranges larger than this (default 8 MiB).
	MaxSpan int64
	// Concurrency bounds the requests in flight of one Prefetch (default 6).
	Concurrency int
	// Memory bounds the prefetched bytes kept per file (default 256 MiB).
	Memory int64
	// FooterSize: a read in the last FooterSize bytes fetches them all in
	// one request, so a parquet footer costs one request (default 64 KiB).
	FooterSize int64
}

// WithDefaults fills zero fields with the defaults.
func (o RangeOptions) WithDefaults() RangeOptions {
	if o.Gap == 0 {
		o.Gap = 64 << 10
	}
	if o.Gap < 0 {
		o.Gap = 0
	}
	if o.MaxSpan <= 0 {
		o.MaxSpan = 8 << 20
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 6
	}
	if o.Memory <= 0 {
		o.Memory = 256 << 20
	}
	if o.FooterSize <= 0 {
		o.FooterSize = 64 << 10
	}
	return o
}

// RangeFetch reads exactly the bytes [off, end) of a remote file (retries,
// resumes and checks of the answer are its business).
type RangeFetch func(ctx context.Context, off, end int64) ([]byte, error)

// NewRangeFile returns a File of the given name and size whose bytes come
// from fetch: the range machinery of the Hub's streamed shards for any
// store that serves byte ranges (S3-compatible object stores). It
// implements Prefetcher: prefetched ranges are merged, split and fetched
// concurrently, kept in memory (bounded) for the following reads; a read
// in the file's tail fetches the whole tail once (the parquet footer).
// wrap adds context (the file and the store) to errors; nil keeps them.
func NewRangeFile(name string, size int64, fetch RangeFetch, opts RangeOptions, wrap func(error) error) File {
	if wrap == nil {
		wrap = func(err error) error { return err }
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &rangeFile{name: name, size: size, fetchFn: fetch, opts: opts.WithDefaults(), wrap: wrap, ctx: ctx, cancel: cancel}
}

// rangeFile is NewRangeFile's File: spans fetched (or being fetched) are
// kept oldest first; reads are served from spans covering them, or by one
// fetch of exactly the bytes asked.
type rangeFile struct {
	name    string
	size    int64
	fetchFn RangeFetch
	opts    RangeOptions
	wrap    func(error) error

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex
	spans  []*span
	held   int64
	tail   *span
	closed bool
}

func (f *rangeFile) Size() int64  { return f.size }
func (f *rangeFile) Name() string { return f.name }

// Close drops the buffered bytes and cancels fetches in flight.
func (f *rangeFile) Close() error {
	f.cancel()
	f.mu.Lock()
	f.closed = true
	f.spans, f.tail, f.held = nil, nil, 0
	f.mu.Unlock()
	return nil
}

// ReadAt reads len(p) bytes at off (fewer, with io.EOF, at the end).
func (f *rangeFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, f.wrap(fmt.Errorf("read %s: negative offset %d", f.name, off))
	}
	if off >= f.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := min(int64(len(p)), f.size-off)
	data, err := f.read(off, off+n)
	if err != nil {
		return 0, f.wrap(fmt.Errorf("read %s [%d,%d): %w", f.name, off, off+n, err))
	}
	copy(p, data)
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

func (f *rangeFile) read(off, end int64) ([]byte, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errors.New("file is closed")
	}
	parts := f.coverLocked(off, end)
	tailStart := max(f.size-f.opts.FooterSize, 0)
	var fetchTail *span
	if parts == nil && off >= tailStart {
		if f.tail == nil {
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

// fetch calls fetchFn and checks it returned the bytes asked for.
func (f *rangeFile) fetch(ctx context.Context, off, end int64) ([]byte, error) {
	data, err := f.fetchFn(ctx, off, end)
	if err == nil && int64(len(data)) != end-off {
		err = fmt.Errorf("got %d bytes for the range [%d,%d)", len(data), off, end)
	}
	return data, err
}

// coverLocked returns spans that together cover [off, end), or nil.
func (f *rangeFile) coverLocked(off, end int64) []*span {
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
func (f *rangeFile) assemble(parts []*span, off, end int64) (out []byte, ok bool, err error) {
	for _, s := range parts {
		select {
		case <-s.done:
		case <-f.ctx.Done():
			return nil, false, f.ctx.Err()
		}
		if s.err != nil && errors.Is(s.err, ErrHashMismatch) {
			// Content that failed its hash is not read again piecewise
			// (the pieces cannot be verified).
			return nil, false, s.err
		}
		if s.err != nil || s.data == nil {
			return nil, false, nil
		}
	}
	if len(parts) == 1 {
		s := parts[0]
		return s.data[off-s.off : end-s.off], true, nil
	}
	out = make([]byte, 0, end-off)
	for _, s := range parts {
		lo, hi := max(off, s.off), min(end, s.end)
		out = append(out, s.data[lo-s.off:hi-s.off]...)
	}
	return out, true, nil
}

// addLocked records a span and evicts the oldest finished spans over the
// memory budget.
func (f *rangeFile) addLocked(s *span) {
	f.spans = append(f.spans, s)
	f.held += s.end - s.off
	for f.held > f.opts.Memory && len(f.spans) > 1 {
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

func (f *rangeFile) dropLocked(s *span) {
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
func (f *rangeFile) fill(ctx context.Context, s *span) {
	s.data, s.err = f.fetch(ctx, s.off, s.end)
	if s.err != nil {
		f.mu.Lock()
		f.dropLocked(s)
		f.mu.Unlock()
	}
	close(s.done)
}

// Prefetch fetches ranges (merged, split, concurrently) and keeps them for
// the following reads; ranges already in memory are skipped. ReadAt calls
// for ranges being prefetched wait for them.
func (f *rangeFile) Prefetch(ctx context.Context, ranges []Range) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return f.wrap(fmt.Errorf("prefetch %s: file is closed", f.name))
	}
	var rs []Range
	for _, r := range ranges {
		off, end := max(r.Off, 0), min(r.Off+r.Len, f.size)
		if r.Len <= 0 || off >= end {
			continue
		}
		if f.coverLocked(off, end) == nil {
			rs = append(rs, Range{Off: off, Len: end - off})
		}
	}
	merged := coalesce(rs, f.opts.Gap, f.opts.MaxSpan)
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
	sem := make(chan struct{}, f.opts.Concurrency)
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
			return f.wrap(fmt.Errorf("prefetch %s: %w", f.name, s.err))
		}
	}
	return nil
}

var _ Prefetcher = (*rangeFile)(nil)

// span is one fetched (or being fetched) byte range [off, end).
type span struct {
	off, end int64
	done     chan struct{}
	data     []byte
	err      error
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

// NewStallReader wraps a response body with a progress deadline: when no
// byte arrives for timeout (DefaultStallTimeout when 0), the body is
// closed and the pending read fails with an error matching ErrStalled,
// which callers retry like a dropped connection.
func NewStallReader(body io.ReadCloser, timeout time.Duration) io.ReadCloser {
	if timeout <= 0 {
		timeout = DefaultStallTimeout
	}
	return newStallReader(body, timeout)
}
