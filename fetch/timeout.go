package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Default answer timeouts: huggingface_hub's DEFAULT_ETAG_TIMEOUT and
// DEFAULT_DOWNLOAD_TIMEOUT (constants.py), 10 s each.
const (
	DefaultETagTimeout     = 10 * time.Second
	DefaultDownloadTimeout = 10 * time.Second
)

// ErrNoAnswer is matched (errors.Is) by errors of a request whose server
// accepted it (or never accepted the connection) but sent no response
// headers within the answer timeout (HubOptions.ETagTimeout for API
// requests, DownloadTimeout for file requests).
var ErrNoAnswer = errors.New("no answer from the server")

// noAnswerError is the transport error of one attempt that timed out
// before the response headers.
type noAnswerError struct{ after time.Duration }

func (e *noAnswerError) Error() string {
	return fmt.Sprintf("%v within %v", ErrNoAnswer, e.after)
}
func (e *noAnswerError) Unwrap() error { return ErrNoAnswer }

// Timeout makes it a net.Error timeout, as net/http's own are.
func (e *noAnswerError) Timeout() bool   { return true }
func (e *noAnswerError) Temporary() bool { return true }

// parseTimeoutEnv reads HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT as
// huggingface_hub does (constants.py: int(value) or the default): a whole
// number of seconds, 0 or unset meaning the default. A value Python's
// int() refuses (1.5, ten) is an error here too (huggingface_hub fails to
// import with it); so is a negative one.
func parseTimeoutEnv(name, v string, def time.Duration) (time.Duration, error) {
	s := strings.TrimSpace(v)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
		return 0, fmt.Errorf("hub options: %s=%q: want a whole number of seconds", name, shorten(v, 40))
	}
	if n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("hub options: %s=%d: want 0 (the default, %v) to %d seconds", name, n, def, 1<<20)
	}
	if n == 0 {
		return def, nil
	}
	return time.Duration(n) * time.Second, nil
}

// answerTimeoutKey carries a request's answer timeout in its context.
type answerTimeoutKey struct{}

// withAnswerTimeout sets the answer timeout of the requests made with ctx.
func withAnswerTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, answerTimeoutKey{}, d)
}

// answerTransport bounds each HTTP round trip (connection, TLS, request,
// response headers) by the request's answer timeout: a server that
// accepts connections and never answers costs that long per attempt, not
// the operating system's TCP timeouts. The body is not bounded here: the
// stall deadline (HubOptions.StallTimeout) watches its progress.
type answerTransport struct {
	base http.RoundTripper
	def  time.Duration
}

func (t *answerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	d := t.def
	if v, ok := r.Context().Value(answerTimeoutKey{}).(time.Duration); ok && v > 0 {
		d = v
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	timer := time.AfterFunc(d, func() { cancel(&noAnswerError{after: d}) })
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	if !timer.Stop() {
		// The deadline passed: whatever came back is too late.
		if err == nil {
			resp.Body.Close()
		}
		cancel(nil)
		return nil, &noAnswerError{after: d}
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose releases a round trip's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}
