package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// RetryPolicy bounds how hard a Hub source retries one logical request (one
// API call, one range, one file download). Zero fields take the defaults of
// DefaultRetryPolicy.
type RetryPolicy struct {
	// MaxAttempts is the total number of HTTP attempts, first try included.
	MaxAttempts int
	// MinBackoff is the first backoff delay; it doubles per retry.
	MinBackoff time.Duration
	// MaxBackoff caps a single computed backoff delay (not a delay the
	// server asks for with Retry-After or RateLimit).
	MaxBackoff time.Duration
	// MaxWait caps the total time spent sleeping between attempts. A
	// server asking for a longer wait than what is left ends the retries.
	MaxWait time.Duration
	// MaxNoAnswer ends the retries after this many attempts got no
	// response headers within the answer timeout (ErrNoAnswer): a server
	// that accepts connections and never answers costs about
	// MaxNoAnswer answer timeouts, not MaxAttempts of them.
	MaxNoAnswer int
}

// DefaultRetryPolicy is used for zero fields of HubOptions.Retry: 8
// attempts, backoff from 500ms doubling up to 20s, at most 2 minutes of
// waiting in total.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 8, MinBackoff: 500 * time.Millisecond, MaxBackoff: 20 * time.Second, MaxWait: 2 * time.Minute, MaxNoAnswer: 3}
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.MinBackoff <= 0 {
		p.MinBackoff = d.MinBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = d.MaxBackoff
	}
	if p.MaxBackoff < p.MinBackoff {
		p.MaxBackoff = p.MinBackoff
	}
	if p.MaxWait <= 0 {
		p.MaxWait = d.MaxWait
	}
	if p.MaxNoAnswer <= 0 {
		p.MaxNoAnswer = d.MaxNoAnswer
	}
	return p
}

// ErrRetryBudget is matched (errors.Is) by errors returned after the retry
// budget of a request ran out.
var ErrRetryBudget = errors.New("retry budget exhausted")

// HTTPError describes a failed Hub request. It never contains the token:
// URLs are built without credentials and printed redacted.
type HTTPError struct {
	// Method and URL of the request (URL redacted of any userinfo).
	Method, URL string
	// StatusCode and Status of the last response; 0 and "" when the last
	// attempt failed without a response.
	StatusCode int
	Status     string
	// Attempts is the number of HTTP attempts made.
	Attempts int
	// Message is the Hub's X-Error-Code and X-Error-Message, if any
	// (shortened), or why the retry budget ended early.
	Message string
	// Budget is true when the retry budget ran out.
	Budget bool
	// Err is the last transport error, if any.
	Err error
}

// Error describes the request, its last status and why it failed.
func (e *HTTPError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: ", e.Method, e.URL)
	if e.Budget {
		fmt.Fprintf(&b, "giving up after %s (%v)", plural(e.Attempts, "attempt"), ErrRetryBudget)
		if e.StatusCode != 0 {
			fmt.Fprintf(&b, ", last status %s", e.statusText())
		}
		if e.Err != nil {
			fmt.Fprintf(&b, ", last error: %v", e.Err)
		}
	} else if e.StatusCode != 0 {
		fmt.Fprintf(&b, "status %s", e.statusText())
		if e.Attempts > 1 {
			fmt.Fprintf(&b, " after %s", plural(e.Attempts, "attempt"))
		}
		switch e.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			b.WriteString(" (the dataset may be private or gated: set HF_TOKEN or log in with `hf auth login`)")
		}
	} else if e.Err != nil {
		fmt.Fprintf(&b, "%v", e.Err)
	} else {
		b.WriteString("request failed")
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

func (e *HTTPError) statusText() string {
	if e.Status != "" {
		return e.Status
	}
	return strconv.Itoa(e.StatusCode) + " " + http.StatusText(e.StatusCode)
}

// Unwrap exposes the transport error, ErrRetryBudget when the budget ran
// out, and fs.ErrNotExist for a 404.
func (e *HTTPError) Unwrap() []error {
	var errs []error
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Budget {
		errs = append(errs, ErrRetryBudget)
	}
	if e.StatusCode == http.StatusNotFound {
		errs = append(errs, fs.ErrNotExist)
	}
	return errs
}

// retryState is the budget of one logical request. It is shared by the
// retryablehttp loop (status codes, connection errors) and by the body
// readers (a connection dropped mid-body resumes the request), so both
// count against the same attempts and waiting time.
type retryState struct {
	policy   RetryPolicy
	method   string
	url      string // redacted, for errors
	attempts int
	noAnswer int // attempts that timed out before the response headers
	waited   time.Duration
	nextWait time.Duration
	lastResp int
	lastText string
	lastErr  error
	why      string // why the budget ended, for the error
	retries  func() // counts a retry in the Hub stats (may be nil)
	// fastFail, when set, ends the retries at once for transport errors
	// it matches (used when a cached fallback exists).
	fastFail func(error) bool
	log      *slog.Logger
}

func newRetryState(p RetryPolicy, method string, u *url.URL, log *slog.Logger, retries func()) *retryState {
	return &retryState{policy: p, method: method, url: u.Redacted(), log: log, retries: retries}
}

// retryable reports whether a status code is worth another attempt.
func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests ||
		(code >= 500 && code <= 599 && code != http.StatusNotImplemented && code != http.StatusHTTPVersionNotSupported)
}

// errNoRetry marks errors that must not be retried (redirect policy
// violations, bad responses).
type errNoRetry struct{ err error }

func (e *errNoRetry) Error() string { return e.err.Error() }
func (e *errNoRetry) Unwrap() error { return e.err }

// decide is the retry decision after one attempt: either a wait before the
// next attempt (stored in s.nextWait) or the end of the budget.
func (s *retryState) decide(ctx context.Context, resp *http.Response, err error) (bool, error) {
	s.attempts++
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	var hint time.Duration
	if err != nil {
		redactURLError(err)
		var nr *errNoRetry
		if errors.As(err, &nr) {
			return false, err
		}
		if ok, _ := retryablehttp.DefaultRetryPolicy(ctx, nil, err); !ok {
			return false, err
		}
		s.lastErr = err
		if s.fastFail != nil && s.fastFail(err) {
			s.log.Debug("hub: cannot connect, not retrying (a cached fallback exists)", "url", s.url, "error", err)
			return false, err
		}
		if errors.Is(err, ErrNoAnswer) {
			if s.noAnswer++; s.noAnswer >= s.policy.MaxNoAnswer {
				s.why = fmt.Sprintf("the server did not answer %s", plural(s.noAnswer, "attempt"))
				return false, ErrRetryBudget
			}
		}
	} else if resp != nil {
		s.lastResp, s.lastText = resp.StatusCode, resp.Status
		if !retryableStatus(resp.StatusCode) {
			return false, nil
		}
		s.lastErr = nil
		hint = serverWait(resp.Header, time.Now())
	}
	if s.attempts >= s.policy.MaxAttempts {
		s.why = ""
		return false, ErrRetryBudget
	}
	wait := hint
	if wait <= 0 {
		wait = backoff(s.policy, s.attempts-1)
	}
	if s.waited+wait > s.policy.MaxWait {
		s.why = fmt.Sprintf("waiting %v more would exceed the %v wait budget", wait.Round(time.Millisecond), s.policy.MaxWait)
		return false, ErrRetryBudget
	}
	s.waited += wait
	s.nextWait = wait
	if s.retries != nil {
		s.retries()
	}
	s.log.Debug("hub: retrying request", "method", s.method, "url", s.url, "status", s.lastResp, "error", errString(err), "wait", wait, "attempt", s.attempts)
	return true, nil
}

// retryBody decides whether a response body that failed mid-read may be
// requested again; if so it sleeps the backoff and returns nil.
func (s *retryState) retryBody(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.lastErr = err
	ok, derr := s.decideAfterBody(ctx, err)
	if !ok {
		if derr == nil {
			derr = err
		}
		return s.failure(derr)
	}
	t := time.NewTimer(s.nextWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// decideAfterBody is decide for a body error: the attempt was already
// counted when its response arrived.
func (s *retryState) decideAfterBody(ctx context.Context, err error) (bool, error) {
	s.attempts--
	s.lastResp, s.lastText = 0, ""
	return s.decide(ctx, nil, err)
}

// redactURLError removes the query (signed CDN URLs carry credentials
// there), fragment and userinfo from the URL net/http puts in its
// errors.
func redactURLError(err error) {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			u.RawQuery, u.Fragment, u.User = "", "", nil
			ue.URL = u.String()
		} else {
			ue.URL = "(unparsable URL)"
		}
	}
}

// failure builds the final error for this request.
func (s *retryState) failure(err error) error {
	redactURLError(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s %s: %w", s.method, s.url, err)
	}
	he := &HTTPError{Method: s.method, URL: s.url, StatusCode: s.lastResp, Status: s.lastText, Attempts: s.attempts, Err: s.lastErr}
	if errors.Is(err, ErrRetryBudget) {
		he.Budget = true
		if s.why != "" {
			he.Message = s.why
		}
	} else if he.Err == nil && err != nil {
		he.Err = err
	}
	return he
}

// statusError is the error for a final, non-retryable response status.
func (s *retryState) statusError(resp *http.Response) error {
	he := &HTTPError{Method: s.method, URL: s.url, StatusCode: resp.StatusCode, Status: resp.Status, Attempts: s.attempts}
	msg := resp.Header.Get("X-Error-Message")
	if code := resp.Header.Get("X-Error-Code"); code != "" {
		if msg != "" {
			msg = code + ": " + msg
		} else {
			msg = code
		}
	}
	he.Message = shorten(msg, 200)
	return he
}

func shorten(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// backoff is exponential backoff with "equal jitter": half the delay is
// fixed, half random, so retries of concurrent requests spread out.
func backoff(p RetryPolicy, retry int) time.Duration {
	d := p.MinBackoff
	for i := 0; i < retry && d < p.MaxBackoff; i++ {
		d *= 2
	}
	if d > p.MaxBackoff {
		d = p.MaxBackoff
	}
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// serverWait is the delay the server asks for: Retry-After (seconds or an
// HTTP date) or the Hub's RateLimit header (`"api";r=0;t=55`, t = seconds
// until the quota window resets, used when no requests remain). The larger
// wins; 0 means no hint.
func serverWait(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	if ra := strings.TrimSpace(h.Get("Retry-After")); ra != "" {
		if secs, err := strconv.ParseFloat(ra, 64); err == nil && secs >= 0 {
			d = secondsDuration(secs)
		} else if t, err := http.ParseTime(ra); err == nil {
			if w := t.Sub(now); w > 0 {
				d = min(w, maxServerWait)
			}
		}
	}
	if w := rateLimitWait(h.Get("RateLimit")); w > d {
		d = w
	}
	return d
}

// rateLimitWait parses the IETF draft RateLimit header the Hub sends
// (`"api";r=0;t=55`). It returns t when r is 0 (or absent), else 0.
func rateLimitWait(v string) time.Duration {
	if v == "" {
		return 0
	}
	remaining, reset := -1, -1
	for _, part := range strings.Split(v, ";") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 0 {
			continue
		}
		switch strings.TrimSpace(k) {
		case "r":
			remaining = n
		case "t":
			reset = n
		}
	}
	if reset < 0 || remaining > 0 {
		return 0
	}
	return secondsDuration(float64(reset))
}

// maxServerWait caps a wait asked by a server (a week: far beyond any
// retry budget, so such a wait ends the retries) and keeps absurd values
// (1e300, +Inf) from overflowing time.Duration.
const maxServerWait = 7 * 24 * time.Hour

func secondsDuration(secs float64) time.Duration {
	if !(secs >= 0) {
		return 0
	}
	if secs >= maxServerWait.Seconds() {
		return maxServerWait
	}
	return time.Duration(secs * float64(time.Second))
}

// slogRetryLogger adapts slog to retryablehttp's LeveledLogger at debug
// level. retryablehttp only logs method, redacted URL, status and errors
// (never headers), so the token cannot leak through it.
type slogRetryLogger struct{ l *slog.Logger }

func (s slogRetryLogger) Error(msg string, kv ...any) { s.l.Debug("hub: retryablehttp: "+msg, kv...) }
func (s slogRetryLogger) Info(msg string, kv ...any)  { s.l.Debug("hub: retryablehttp: "+msg, kv...) }
func (s slogRetryLogger) Debug(msg string, kv ...any) { s.l.Debug("hub: retryablehttp: "+msg, kv...) }
func (s slogRetryLogger) Warn(msg string, kv ...any)  { s.l.Debug("hub: retryablehttp: "+msg, kv...) }

// do runs one request through go-retryablehttp with the budget s. A
// non-nil response has a status < 300 or a non-retryable status (the
// caller decides); budget exhaustion and transport errors come back as
// *HTTPError.
func (h *Hub) do(ctx context.Context, s *retryState, req *http.Request) (*http.Response, error) {
	rreq, err := retryablehttp.FromRequest(req.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", s.method, s.url, err)
	}
	c := &retryablehttp.Client{
		HTTPClient:   h.httpc,
		RetryWaitMin: s.policy.MinBackoff,
		RetryWaitMax: s.policy.MaxBackoff,
		// Our CheckRetry ends the loop first; this is only a backstop.
		RetryMax:   s.policy.MaxAttempts + 1,
		CheckRetry: s.decide,
		Backoff: func(_, _ time.Duration, _ int, _ *http.Response) time.Duration {
			return s.nextWait
		},
		ErrorHandler: func(resp *http.Response, err error, _ int) (*http.Response, error) {
			if resp != nil {
				io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
				resp.Body.Close()
			}
			return nil, s.failure(err)
		},
	}
	if h.retryLog != nil {
		c.Logger = h.retryLog
	}
	resp, err := c.Do(rreq)
	if err != nil {
		return nil, err
	}
	return resp, nil
}
