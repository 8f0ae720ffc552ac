package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lrstream/lrstream/fetch"
)

// getRange reads the bytes [off, end) of name, pinned at p.
func (s *Source) getRange(ctx context.Context, name string, p Pin, off, end int64) ([]byte, error) {
	buf := make([]byte, end-off)
	w := &sliceWriter{buf: buf}
	if err := s.stream(ctx, name, p, off, end, w); err != nil {
		return nil, err
	}
	return buf, nil
}

type sliceWriter struct {
	buf []byte
	n   int
}

func (w *sliceWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.buf)-w.n {
		return 0, errors.New("more bytes than asked for")
	}
	w.n += copy(w.buf[w.n:], p)
	return len(p), nil
}

// errBody marks errors of a body (cut, stalled): resumable.
var errBody = errors.New("response body interrupted")

// stream writes the bytes [off, end) of name to w. The store retries its
// requests; a body cut mid-way or stalled (no byte for StallTimeout) is
// resumed with another Get from the last byte received, at most
// Retry.MaxAttempts bodies in all.
func (s *Source) stream(ctx context.Context, name string, p Pin, off, end int64, w io.Writer) error {
	pol := s.opts.Retry
	for attempt := 1; off < end; attempt++ {
		n, err := s.streamOnce(ctx, name, p, off, end, w)
		off += n
		if err == nil || off >= end {
			return err
		}
		if !errors.Is(err, errBody) {
			return err
		}
		if attempt >= pol.MaxAttempts {
			return &budgetError{name: s.store.Key(name), attempts: attempt, err: err}
		}
		s.stats.resumes.Add(1)
		s.log.Debug("objstore: body interrupted, resuming", "file", name, "at", off, "err", s.scrub(err))
		t := time.NewTimer(backoff(pol, attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// streamOnce is one Get; it returns how many bytes it wrote to w.
func (s *Source) streamOnce(ctx context.Context, name string, p Pin, off, end int64, w io.Writer) (int64, error) {
	body, err := s.store.Get(ctx, name, p, off, end)
	if err != nil {
		return 0, err
	}
	rb := fetch.NewStallReader(body, s.opts.StallTimeout)
	defer rb.Close()
	want := end - off
	cw := &countWriter{w: w, n: &s.stats.bytes}
	n, err := io.Copy(cw, io.LimitReader(rb, want))
	if cw.err != nil {
		return n, cw.err
	}
	if err != nil {
		return n, fmt.Errorf("%w: %w", errBody, err)
	}
	if n < want {
		return n, fmt.Errorf("%w: %w after %d of %d bytes", errBody, io.ErrUnexpectedEOF, n, want)
	}
	return n, nil
}

// countWriter counts the bytes written and remembers a write error (which
// is not resumable).
type countWriter struct {
	w   io.Writer
	n   interface{ Add(int64) int64 }
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	if err != nil {
		c.err = err
	}
	return n, err
}

// budgetError is a transfer whose bodies failed MaxAttempts times.
type budgetError struct {
	name     string
	attempts int
	err      error
}

func (e *budgetError) Error() string {
	return fmt.Sprintf("get %s: giving up after %d bodies (%v), last error: %v", e.name, e.attempts, fetch.ErrRetryBudget, e.err)
}

func (e *budgetError) Unwrap() []error { return []error{fetch.ErrRetryBudget, e.err} }
