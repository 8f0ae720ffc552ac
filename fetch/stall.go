package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// ErrStalled reports a response body that made no progress for
// HubOptions.StallTimeout: the server sent headers, then stopped sending.
// It is retryable; once the retry budget is spent the final *HTTPError
// wraps it and names the URL.
var ErrStalled = errors.New("transfer stalled")

// DefaultStallTimeout is HubOptions.StallTimeout's default.
const DefaultStallTimeout = 30 * time.Second

func stallTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultStallTimeout
	}
	return d
}

// stallBody is a response body whose reads must make progress: a timer,
// reset by every read that returns bytes, cancels the request's context
// when it fires, which unblocks the pending Read; that Read then reports
// ErrStalled instead of the cancellation. Close stops the timer and
// releases the context.
type stallBody struct {
	r      io.ReadCloser
	d      time.Duration
	t      *time.Timer
	cancel context.CancelFunc
	fired  atomic.Bool
}

func newStallBody(r io.ReadCloser, d time.Duration, cancel context.CancelFunc) *stallBody {
	b := &stallBody{r: r, d: d, cancel: cancel}
	b.t = time.AfterFunc(d, func() {
		b.fired.Store(true)
		cancel()
	})
	return b
}

// Read reads from the body; a read that returns data restarts the clock.
func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 && !b.fired.Load() {
		b.t.Reset(b.d)
	}
	if err != nil && err != io.EOF && b.fired.Load() {
		err = fmt.Errorf("%w: no data for %v", ErrStalled, b.d)
	}
	return n, err
}

// Close closes the body and releases the request's context.
func (b *stallBody) Close() error {
	b.t.Stop()
	err := b.r.Close()
	b.cancel()
	return err
}
