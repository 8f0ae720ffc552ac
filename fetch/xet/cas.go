package xet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// Token is a CAS access token as the Hub hands it out
// (GET /api/buckets/NS/NAME/xet-write-token): the CAS URL it is for, the
// token and its expiry.
type Token struct {
	CASURL      string
	AccessToken string
	Expires     time.Time
}

// TokenSource fetches a fresh token.
type TokenSource func(ctx context.Context) (Token, error)

// RetryPolicy bounds the attempts of one CAS request (429, 5xx but 501,
// connection errors and resets are retried with exponential backoff;
// Retry-After is honoured). Zero fields take lrstream's Hub defaults: 8
// attempts, backoff from 500 ms doubling up to 20 s.
type RetryPolicy struct {
	MaxAttempts            int
	MinBackoff, MaxBackoff time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 8
	}
	if p.MinBackoff <= 0 {
		p.MinBackoff = 500 * time.Millisecond
	}
	if p.MaxBackoff < p.MinBackoff {
		p.MaxBackoff = max(20*time.Second, p.MinBackoff)
	}
	return p
}

// CAS is a client of a Xet CAS server's upload API. The access token goes
// to the CAS URL the Hub gave with it and nowhere else: the client follows
// no redirects. Errors never contain the token.
type CAS struct {
	source   TokenSource
	client   *retryablehttp.Client
	log      *slog.Logger
	attempts int

	mu  sync.Mutex
	tok Token
	cas *url.URL
}

// refreshMargin is how long before its expiry a token is replaced.
const refreshMargin = 30 * time.Second

// NewCAS is a CAS client whose tokens come from source. transport may be
// nil (http.DefaultTransport's settings with a 60 s header timeout).
func NewCAS(source TokenSource, policy RetryPolicy, transport http.RoundTripper, log *slog.Logger) *CAS {
	if log == nil {
		log = slog.Default()
	}
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = 60 * time.Second
		transport = t
	}
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return errors.New("the CAS answered with a redirect: not followed (the token goes to the CAS URL only)")
	}}
	rc.Logger = nil
	policy = policy.withDefaults()
	rc.RetryMax = policy.MaxAttempts - 1
	rc.RetryWaitMin, rc.RetryWaitMax = policy.MinBackoff, policy.MaxBackoff
	rc.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		retry, cerr := retryablehttp.DefaultRetryPolicy(ctx, resp, err)
		if retry {
			log.Debug("xet: retrying a CAS request", "status", status(resp), "err", err)
		}
		return retry, cerr
	}
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return &CAS{source: source, client: rc, log: log, attempts: policy.MaxAttempts}
}

func status(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}

// token returns a valid token (fetched again when expired or force).
func (c *CAS) token(ctx context.Context, force bool) (Token, *url.URL, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !force && c.cas != nil && time.Until(c.tok.Expires) > refreshMargin {
		return c.tok, c.cas, nil
	}
	t, err := c.source(ctx)
	if err != nil {
		return Token{}, nil, err
	}
	u, err := url.Parse(strings.TrimRight(t.CASURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return Token{}, nil, fmt.Errorf("xet: the Hub gave an unusable CAS URL %q", redactURL(t.CASURL))
	}
	c.tok, c.cas = t, u
	return t, u, nil
}

// post sends body to path of the CAS and decodes a JSON answer into out.
// A 401 fetches a new token and tries once more.
func (c *CAS) post(ctx context.Context, path string, body []byte, out any) error {
	for attempt := 0; ; attempt++ {
		tok, base, err := c.token(ctx, attempt > 0)
		if err != nil {
			return err
		}
		u := base.JoinPath(path)
		req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
		if err != nil {
			return fmt.Errorf("xet: POST %s: %w", u.Redacted(), err)
		}
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := c.client.Do(req)
		if err != nil {
			return fmt.Errorf("xet: POST %s: %w", u.Redacted(), scrub(err, tok.AccessToken))
		}
		data, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized && attempt == 0 {
			c.log.Debug("xet: CAS token refused; fetching a new one", "url", u.Redacted())
			continue
		}
		if resp.StatusCode/100 != 2 {
			budget := ""
			if resp.StatusCode == http.StatusTooManyRequests || (resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented) {
				budget = fmt.Sprintf(" (giving up after %d attempts)", c.attempts)
			}
			return fmt.Errorf("xet: POST %s: status %s%s: %s", u.Redacted(), resp.Status, budget,
				strings.ReplaceAll(shorten(string(data), 300), tok.AccessToken, "[token]"))
		}
		if rerr != nil {
			return fmt.Errorf("xet: POST %s: reading the answer: %w", u.Redacted(), rerr)
		}
		if out != nil {
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("xet: POST %s: answer %q: %w", u.Redacted(), shorten(string(data), 200), err)
			}
		}
		return nil
	}
}

// UploadXorb uploads a serialized xorb named h; it reports whether the CAS
// did not have it yet.
func (c *CAS) UploadXorb(ctx context.Context, h Hash, data []byte) (bool, error) {
	var r struct {
		WasInserted bool `json:"was_inserted"`
	}
	if err := c.post(ctx, "v1/xorbs/default/"+h.String(), data, &r); err != nil {
		return false, fmt.Errorf("uploading xorb %s (%d bytes): %w", h, len(data), err)
	}
	return r.WasInserted, nil
}

// UploadShard uploads a shard (the files' reconstructions and the xorbs
// they use, uploaded before).
func (c *CAS) UploadShard(ctx context.Context, data []byte) error {
	var r struct {
		Result *int `json:"result"`
	}
	if err := c.post(ctx, "v1/shards", data, &r); err != nil {
		return fmt.Errorf("uploading a shard (%d bytes): %w", len(data), err)
	}
	if r.Result == nil {
		return errors.New("uploading a shard: the CAS answer has no result")
	}
	return nil
}

func shorten(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// scrub replaces a secret in an error's text.
func scrub(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &scrubbed{err: err, msg: strings.ReplaceAll(err.Error(), secret, "[token]")}
}

type scrubbed struct {
	err error
	msg string
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	u.RawQuery = ""
	return u.Redacted()
}
