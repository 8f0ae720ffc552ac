package fetch

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// DefaultStallTimeout is how long a Hub response body may deliver no byte
// before the transfer counts as stalled (HubOptions.StallTimeout) when
// neither StallTimeout nor DownloadTimeout is set: huggingface_hub's read
// timeout of downloads (HF_HUB_DOWNLOAD_TIMEOUT's default).
const DefaultStallTimeout = DefaultDownloadTimeout

// ErrStalled is matched (errors.Is) by errors of a response body that
// made no progress for HubOptions.StallTimeout. A stall is retried like a
// dropped connection: the transfer resumes with a Range request from the
// last byte received, within the request's retry budget.
var ErrStalled = errors.New("transfer stalled")

// stallReader is a response body with a progress deadline: when no byte
// arrives for timeout, the body is closed, which unblocks the pending
// Read (HTTP/1 closes the connection, HTTP/2 resets the stream), and the
// read fails with ErrStalled.
type stallReader struct {
	body    io.ReadCloser
	timeout time.Duration
	timer   *time.Timer
	stalled atomic.Bool
}

// watchBody wraps a response body with the stall deadline of the Hub.
func (h *Hub) watchBody(body io.ReadCloser) io.ReadCloser {
	return newStallReader(body, h.opts.StallTimeout)
}

func newStallReader(body io.ReadCloser, timeout time.Duration) *stallReader {
	s := &stallReader{body: body, timeout: timeout}
	s.timer = time.AfterFunc(timeout, func() {
		s.stalled.Store(true)
		body.Close()
	})
	return s
}

// Read reads from the body and pushes the deadline back on progress.
func (s *stallReader) Read(p []byte) (int, error) {
	if s.stalled.Load() {
		return 0, s.stallErr()
	}
	n, err := s.body.Read(p)
	if n > 0 && err == nil {
		s.timer.Reset(s.timeout)
	}
	if err != nil && err != io.EOF && s.stalled.Load() {
		return n, s.stallErr()
	}
	return n, err
}

func (s *stallReader) stallErr() error {
	return fmt.Errorf("%w: no data received for %v", ErrStalled, s.timeout)
}

// Close stops the deadline and closes the body.
func (s *stallReader) Close() error {
	s.timer.Stop()
	return s.body.Close()
}
