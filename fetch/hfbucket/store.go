package hfbucket

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/fetch/objstore"
)

// DefaultCacheDir is the cache root of bucket datasets:
// $XDG_CACHE_HOME/lrstream/hf-buckets, else ~/.cache/lrstream/hf-buckets.
func DefaultCacheDir(getenv func(string) string) string {
	root := getenv("XDG_CACHE_HOME")
	if root == "" {
		home := getenv("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		root = filepath.Join(home, ".cache")
	}
	return filepath.Join(fetch.ExpandPath(root, getenv), "lrstream", "hf-buckets")
}

// Store is a Storage Bucket prefix as an objstore.Store.
type Store struct {
	id, prefix string
	endpoint   *url.URL
	token      string
	client     *retryablehttp.Client
	log        *slog.Logger
	requests   atomic.Int64
	retries    atomic.Int64

	mu     sync.Mutex
	direct map[string]*url.URL // file → CDN URL of its last redirect
}

// parseSpec parses spec (hf://buckets/NS/NAME[/PREFIX]) and hub's endpoint
// (set to fetch.DefaultEndpoint when empty), which must be http(s) without
// credentials.
func parseSpec(spec string, hub *fetch.HubOptions) (id, prefix string, ep *url.URL, err error) {
	if id, prefix, err = ParseURL(spec); err != nil {
		return "", "", nil, err
	}
	if hub.Endpoint == "" {
		hub.Endpoint = fetch.DefaultEndpoint
	}
	ep, err = url.Parse(strings.TrimRight(hub.Endpoint, "/"))
	if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" || ep.User != nil {
		return "", "", nil, fmt.Errorf("%s: HF_ENDPOINT: want http(s)://HOST[:PORT] without credentials", spec)
	}
	return id, prefix, ep, nil
}

// Open lists the files under spec (hf://buckets/NS/NAME[/PREFIX]) and pins
// their xet hashes. hub gives the endpoint, token, offline switch, retry
// policy, stall timeout, range tuning, download mode and logger, as for a
// Hub dataset; cacheDir is the cache root (DefaultCacheDir).
func Open(ctx context.Context, spec string, hub fetch.HubOptions, cacheDir string) (*objstore.Source, error) {
	id, prefix, ep, err := parseSpec(spec, &hub)
	if err != nil {
		return nil, err
	}
	log := hub.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Store{id: id, prefix: prefix, endpoint: ep, token: hub.Token, log: log, direct: map[string]*url.URL{}}
	s.client = s.newClient(hub)
	oo := objstore.Options{
		Dir:   filepath.Join(cacheDir, sanitize(ep.Scheme+"-"+ep.Host+ep.Path), strings.ReplaceAll(id, "/", "--")),
		Cache: hub.Cache, Offline: hub.Offline, Logger: log, Retry: hub.Retry, StallTimeout: hub.StallTimeout,
		Range: fetch.RangeOptions{Gap: hub.PrefetchGap, MaxSpan: hub.PrefetchMaxSpan, Concurrency: hub.PrefetchConcurrency,
			Memory: hub.PrefetchMemory, FooterSize: hub.FooterSize},
		Secrets: []string{hub.Token},
	}
	return objstore.Open(ctx, s, oo)
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	return strings.Trim(string(b), ".")
}

// newClient is an HTTP client with the Hub's retry policy (go-retryablehttp:
// 429, 5xx but 501, connection errors; Retry-After honoured) that follows
// redirects (to the CDN) without the token on another origin.
func (s *Store) newClient(hub fetch.HubOptions) *retryablehttp.Client {
	pol := hub.Retry.WithDefaults()
	tr := hub.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = 60_000_000_000 // 60s
		tr = t
	}
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: &counting{rt: tr, n: &s.requests}, CheckRedirect: s.checkRedirect}
	rc.Logger = nil
	rc.RetryMax = pol.MaxAttempts - 1
	rc.RetryWaitMin, rc.RetryWaitMax = pol.MinBackoff, pol.MaxBackoff
	rc.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		retry, cerr := retryablehttp.DefaultRetryPolicy(ctx, resp, err)
		if retry {
			s.retries.Add(1)
		}
		return retry, cerr
	}
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return rc
}

type counting struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// hopsKey carries the xet hash announced on a redirect hop.
type hopsKey struct{}

type hops struct{ xetHash string }

// checkRedirect follows at most 10 redirects, remembers the X-Xet-Hash of
// the Hub's answer, and drops the token (and cookies) on any hop to another
// scheme, host or port than the endpoint's.
func (s *Store) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if h, ok := req.Context().Value(hopsKey{}).(*hops); ok && req.Response != nil {
		if x := req.Response.Header.Get("X-Xet-Hash"); x != "" {
			h.xetHash = x
		}
	}
	if !s.sameOrigin(req.URL) {
		req.Header.Del("Authorization")
		req.Header.Del("Cookie")
	}
	return nil
}

func (s *Store) sameOrigin(u *url.URL) bool {
	return u.Scheme == s.endpoint.Scheme && hostPort(u) == hostPort(s.endpoint)
}

func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return strings.ToLower(u.Hostname()) + ":" + port
}

// newRequest is a GET of an endpoint path (escaped) with the token.
func (s *Store) newRequest(ctx context.Context, escapedPath, rawQuery string) (*retryablehttp.Request, error) {
	u := *s.endpoint
	u.RawPath = strings.TrimRight(s.endpoint.EscapedPath(), "/") + escapedPath
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return nil, err
	}
	u.Path, u.RawQuery = p, rawQuery
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	return req, nil
}

// ID is hf://buckets/NS/NAME[/PREFIX].
func (s *Store) ID() string { return URL(s.id, s.prefix) }

// HashName says that a bucket file's pin is its Xet content hash
// (objstore.HashNamer).
func (s *Store) HashName() string { return "xet" }

// Key is the bucket path of a dataset path.
func (s *Store) Key(name string) string {
	if s.prefix == "" {
		return name
	}
	return s.prefix + "/" + name
}

// Requests is the number of HTTP requests sent (retries and redirect hops
// included).
func (s *Store) Requests() int64 { return s.requests.Load() }

// Retries is the number of retried requests.
func (s *Store) Retries() int64 { return s.retries.Load() }

// treeEntry is one entry of the bucket tree API.
type treeEntry struct {
	Type    string `json:"type"`
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	XetHash string `json:"xetHash"`
}

// List lists the files under the prefix (recursive tree API, every page).
func (s *Store) List(ctx context.Context) (map[string]objstore.Pin, error) {
	path := "/api/buckets/" + escapeID(s.id) + "/tree"
	if s.prefix != "" {
		path += "/" + url.PathEscape(s.prefix) // one segment: "/" escaped, as huggingface_hub does
	}
	req, err := s.newRequest(ctx, path, "recursive=true")
	if err != nil {
		return nil, err
	}
	pins := map[string]objstore.Pin{}
	for page := 0; req != nil; page++ {
		entries, next, err := s.listPage(req)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.Type != "file" {
				continue
			}
			rel, ok := strings.CutPrefix(e.Path, s.prefix+"/")
			if s.prefix == "" {
				rel, ok = e.Path, true
			}
			if !ok {
				continue // another prefix that starts with the same characters
			}
			if e.XetHash == "" || e.Size < 0 {
				return nil, fmt.Errorf("list %s: %s: no xet hash or a negative size", s.ID(), e.Path)
			}
			pins[rel] = objstore.Pin{Size: e.Size, ETag: e.XetHash}
		}
		req = next
	}
	return pins, nil
}

// listPage reads one page of the tree and returns the request of the next
// one (nil at the end). A next link to another origin is refused.
func (s *Store) listPage(req *retryablehttp.Request) ([]treeEntry, *retryablehttp.Request, error) {
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, s.httpError("list", req.URL, nil, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, s.httpError("list", req.URL, resp, nil)
	}
	var entries []treeEntry
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&entries); err != nil {
		return nil, nil, fmt.Errorf("list %s: %s: bad JSON: %w", s.ID(), req.URL.Redacted(), err)
	}
	link := fetch.NextLink(resp.Header.Get("Link"))
	if link == "" {
		return entries, nil, nil
	}
	nu, err := req.URL.Parse(link)
	if err != nil || !s.sameOrigin(nu) {
		return nil, nil, fmt.Errorf("list %s: refusing a pagination link to another host", s.ID())
	}
	next, err := s.newRequest(req.Context(), nu.EscapedPath(), nu.RawQuery)
	return entries, next, err
}

func escapeID(id string) string {
	ns, name, _ := strings.Cut(id, "/")
	return url.PathEscape(ns) + "/" + url.PathEscape(name)
}

// Get returns the body of the bytes [off, end) of name: a ranged GET of
// /buckets/NS/NAME/resolve/PATH, redirected to the CDN — or straight to
// the CDN URL the last resolve of this file was redirected to (no token,
// and one rate-limited Hub request saved per range, as the Hub source does
// for repo files); a CDN URL that is refused (a 4xx: its signature
// expired) is dropped and the file resolved again. A xet hash announced on
// the way that is not the pin, or a vanished file, fails with
// objstore.ErrObjectChanged.
func (s *Store) Get(ctx context.Context, name string, p objstore.Pin, off, end int64) (io.ReadCloser, error) {
	rng := "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(end-1, 10)
	if d := s.directURL(name); d != nil {
		body, refused, err := s.getDirect(ctx, name, d, p, off, end, rng)
		if !refused {
			return body, err
		}
		s.log.Debug("hfbucket: CDN URL refused, resolving again", "file", name)
		s.setDirect(name, nil, d)
	}
	return s.getResolve(ctx, name, p, off, end, rng)
}

// resolvePath is the escaped endpoint path of name's resolve URL.
func (s *Store) resolvePath(name string) string {
	var b strings.Builder
	for i, seg := range strings.Split(s.Key(name), "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(url.PathEscape(seg))
	}
	return "/buckets/" + escapeID(s.id) + "/resolve/" + b.String()
}

// getResolve reads the range through the Hub's resolve URL and remembers
// the CDN URL it was redirected to.
func (s *Store) getResolve(ctx context.Context, name string, p objstore.Pin, off, end int64, rng string) (io.ReadCloser, error) {
	h := &hops{}
	ctx = context.WithValue(ctx, hopsKey{}, h)
	req, err := s.newRequest(ctx, s.resolvePath(name), "")
	if err != nil {
		return nil, err
	}
	req.Header.Set("Range", rng)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, s.httpError("get", req.URL, nil, err)
	}
	if x := resp.Header.Get("X-Xet-Hash"); x != "" {
		h.xetHash = x
	}
	if h.xetHash != "" && h.xetHash != p.ETag {
		resp.Body.Close()
		return nil, fmt.Errorf("get %s/%s: xet hash %s, pinned %s: %w", s.ID(), name, h.xetHash, p.ETag, objstore.ErrObjectChanged)
	}
	if resp.StatusCode == http.StatusNotFound {
		err := s.httpError("get", req.URL, resp, nil)
		resp.Body.Close()
		return nil, fmt.Errorf("%w (pinned xet hash %s when the run started): %w", err, p.ETag, objstore.ErrObjectChanged)
	}
	body, err := s.checkRange(req.URL, resp, name, p, off, end)
	if err == nil && resp.Request != nil && !s.sameOrigin(resp.Request.URL) {
		s.setDirect(name, resp.Request.URL, nil)
	}
	return body, err
}

// getDirect reads the range from a remembered CDN URL (without the
// token); refused reports a 4xx answer, after which the caller resolves
// again. Errors name the resolve URL, never the signed CDN URL.
func (s *Store) getDirect(ctx context.Context, name string, d *url.URL, p objstore.Pin, off, end int64, rng string) (io.ReadCloser, bool, error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, d.String(), nil)
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Range", rng)
	req.Header.Set("Accept-Encoding", "identity")
	named, _ := s.newRequest(ctx, s.resolvePath(name), "")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, false, s.httpError("get", named.URL, nil, err)
	}
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		resp.Body.Close()
		return nil, true, nil
	}
	body, err := s.checkRange(named.URL, resp, name, p, off, end)
	return body, false, err
}

// checkRange accepts a 206 whose Content-Range is the range asked for.
func (s *Store) checkRange(u *url.URL, resp *http.Response, name string, p objstore.Pin, off, end int64) (io.ReadCloser, error) {
	if resp.StatusCode != http.StatusPartialContent {
		err := s.httpError("get", u, resp, nil)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			err = fmt.Errorf("get %s/%s: the server ignored Range (200 instead of 206)", s.ID(), name)
		}
		return nil, err
	}
	start, last, total, ok := fetch.ParseContentRange(resp.Header.Get("Content-Range"))
	if !ok || start != off || last != end-1 || (total >= 0 && total != p.Size) {
		resp.Body.Close()
		return nil, fmt.Errorf("get %s/%s: Content-Range %q does not match the requested bytes %d-%d of %d", s.ID(), name, resp.Header.Get("Content-Range"), off, end-1, p.Size)
	}
	return resp.Body, nil
}

// directURL is the CDN URL name was last redirected to, or nil.
func (s *Store) directURL(name string) *url.URL {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.direct[name]
}

// setDirect remembers u for name, or (u nil) forgets old if it is still
// the one remembered.
func (s *Store) setDirect(name string, u, old *url.URL) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u != nil {
		s.direct[name] = u
	} else if s.direct[name] == old {
		delete(s.direct, name)
	}
}

// httpError describes a failed request by its endpoint URL (never a signed
// CDN URL), status and the Hub's error headers, with hints.
func (s *Store) httpError(op string, u *url.URL, resp *http.Response, err error) error {
	e := &Error{Op: op, URL: u.Redacted(), Err: err}
	if resp != nil {
		e.Status = resp.StatusCode
		e.Code = resp.Header.Get("X-Error-Code")
		e.Message = resp.Header.Get("X-Error-Message")
		if e.Status >= 500 || e.Status == http.StatusTooManyRequests {
			e.Budget = true
		}
	} else if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			e.Err = ue.Err // without the URL (a CDN URL carries a signature)
		}
		e.Budget = true
	}
	return e
}

// Error is a failed Hub bucket request.
type Error struct {
	Op, URL       string
	Status        int
	Code, Message string
	Budget        bool // retryable failures until the retry budget ran out
	Err           error
}

func (e *Error) Error() string {
	msg := e.Op + " " + e.URL + ": "
	if e.Budget {
		msg += "giving up (" + fetch.ErrRetryBudget.Error() + "), last "
	}
	if e.Status != 0 {
		msg += fmt.Sprintf("status %d %s", e.Status, http.StatusText(e.Status))
	} else if e.Err != nil {
		msg += "error: " + e.Err.Error()
	}
	if e.Code != "" || e.Message != "" {
		msg += ": " + strings.TrimSpace(e.Code+" "+e.Message)
	}
	switch {
	case (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden) && (e.Op == "xet-write-token" || e.Op == "batch"):
		msg += " (writing to a bucket needs HF_TOKEN set to a token with write access to it)"
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		msg += " (the bucket may be private: set HF_TOKEN or log in with `hf auth login`)"
	case e.Status == http.StatusNotFound && e.Op == "list":
		msg += " (no such bucket, or a private one: check the name and HF_TOKEN)"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches fs.ErrNotExist for 404 and fetch.ErrRetryBudget for retryable
// failures that outlasted the budget.
func (e *Error) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Status == http.StatusNotFound
	case fetch.ErrRetryBudget:
		return e.Budget
	}
	return false
}

var (
	_ objstore.Store   = (*Store)(nil)
	_ objstore.Counter = (*Store)(nil)
)
