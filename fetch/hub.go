package fetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultEndpoint is the public Hugging Face Hub.
const DefaultEndpoint = "https://huggingface.co"

// CacheMode says which files a Hub source keeps in the local cache.
type CacheMode string

const (
	// CacheFull downloads every opened file whole into the cache (the
	// huggingface_hub behaviour) and reads it locally.
	CacheFull CacheMode = "full"
	// CacheNone caches metadata files whole but streams data shards
	// (paths under data/ and videos/) with HTTP range requests, keeping
	// nothing on disk.
	CacheNone CacheMode = "none"
)

// ParseCacheMode parses "full" or "none" ("" means full).
func ParseCacheMode(s string) (CacheMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "full":
		return CacheFull, nil
	case "none":
		return CacheNone, nil
	}
	return "", fmt.Errorf("cache mode %q: want full or none", s)
}

// HubOptions configures a Hub source. HubOptionsFromEnv fills it the way
// huggingface_hub reads its environment; zero values take defaults.
type HubOptions struct {
	// Endpoint is the Hub base URL (HF_ENDPOINT), default DefaultEndpoint.
	Endpoint string
	// Token is the access token (HF_TOKEN or the token file); "" for
	// anonymous access. It is only ever sent to the endpoint's host.
	Token string
	// CacheDir is the huggingface_hub cache (HF_HUB_CACHE), default
	// ~/.cache/huggingface/hub.
	CacheDir string
	// Offline (HF_HUB_OFFLINE=1) serves everything from the cache and
	// never touches the network.
	Offline bool
	// Cache is the caching mode for data shards (default CacheFull).
	// Metadata files are always cached whole.
	Cache CacheMode
	// Progress receives download progress lines (bytes, rate, ETA); nil
	// disables progress. Set it only when it is a terminal.
	Progress io.Writer
	// Logger receives debug logs (requests, retries, cache hits) and
	// warnings (falling back to the cache when the Hub is unreachable); nil
	// means slog.Default(), whose default level shows the warnings on
	// stderr and hides the debug records. Tokens and headers are never
	// logged.
	Logger *slog.Logger
	// Retry bounds retries of each request; zero fields take
	// DefaultRetryPolicy's values.
	Retry RetryPolicy
	// ConnectFailFast ends the first request (the revision lookup) at
	// once, without spending the retry budget, when the Hub cannot be
	// connected to at all (the name does not resolve, the connection is
	// refused, no route): offline, an id that was meant as a local path
	// fails in a moment. Failures after connecting are still retried.
	ConnectFailFast bool
	// Transport is the HTTP transport (nil: a pooled clone of
	// http.DefaultTransport).
	Transport http.RoundTripper
	// PrefetchGap: ranges passed to Prefetch that are at most this many
	// bytes apart are fetched as one request (default 64 KiB; negative
	// means only touching ranges are merged).
	PrefetchGap int64
	// PrefetchMaxSpan splits merged ranges larger than this into several
	// requests so they download in parallel (default 8 MiB).
	PrefetchMaxSpan int64
	// PrefetchConcurrency bounds the range requests in flight for one
	// Prefetch call (default 6).
	PrefetchConcurrency int
	// PrefetchMemory bounds the prefetched bytes one streamed file keeps
	// in memory; the oldest ranges are dropped first (default 256 MiB).
	PrefetchMemory int64
	// FooterSize is how many trailing bytes a streamed file fetches in one
	// request when a read touches its end, so a parquet footer costs one
	// request (default 64 KiB).
	FooterSize int64
	// StallTimeout is the progress deadline of response bodies: a body
	// that delivers no byte for this long fails with ErrStalled and is
	// retried (resumed with a Range request) within the retry budget
	// (default DownloadTimeout).
	StallTimeout time.Duration
	// ETagTimeout bounds each attempt of an API request (revision, tree
	// listing) from connecting to its response headers
	// (HF_HUB_ETAG_TIMEOUT; default DefaultETagTimeout, 10s). When the
	// requested revision is cached, a revision request that times out
	// falls back to the cache at once.
	ETagTimeout time.Duration
	// DownloadTimeout bounds each attempt of a file request (download,
	// range read) from connecting to its response headers
	// (HF_HUB_DOWNLOAD_TIMEOUT; default DefaultDownloadTimeout, 10s), and
	// is the default StallTimeout.
	DownloadTimeout time.Duration
}

// HubOptionsFromEnv reads the huggingface_hub environment variables exactly
// as huggingface_hub (1.x: constants.py, utils/_auth.py, utils/_headers.py)
// does; getenv is usually os.Getenv:
//
//   - HF_ENDPOINT (default DefaultEndpoint), trailing slashes removed.
//   - HF_HOME: default $XDG_CACHE_HOME/huggingface, else
//     ~/.cache/huggingface; then ~ and $VAR/${VAR} are expanded.
//   - HF_HUB_CACHE, else the legacy HUGGINGFACE_HUB_CACHE, else
//     $HF_HOME/hub; expanded the same way.
//   - HF_HUB_OFFLINE, or TRANSFORMERS_OFFLINE when HF_HUB_OFFLINE is unset:
//     true for 1/ON/YES/TRUE in any case (no surrounding spaces).
//   - The token: HF_TOKEN, or HUGGING_FACE_HUB_TOKEN when HF_TOKEN is unset
//     or empty, cleaned (every CR and LF removed, surrounding whitespace
//     trimmed); when that leaves nothing, the token file HF_TOKEN_PATH
//     (default $HF_HOME/token, expanded), cleaned the same way. A missing
//     file means no token; an unreadable one is an error.
//   - HF_HUB_DISABLE_IMPLICIT_TOKEN (true as above): no token at all is
//     used implicitly, neither from the environment nor from the file
//     (huggingface_hub then only sends a token passed explicitly).
//
// Not supported: the OIDC token exchange (HF_OIDC_RESOURCE), the Google
// Colab secret and the refresh of browser-login OAuth tokens.
func HubOptionsFromEnv(getenv func(string) string) (HubOptions, error) {
	var o HubOptions
	o.Endpoint = strings.TrimRight(getenv("HF_ENDPOINT"), "/")
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
	}
	home := getenv("HF_HOME")
	if home == "" {
		cache := getenv("XDG_CACHE_HOME")
		if cache == "" {
			uh := getenv("HOME")
			if uh == "" {
				var err error
				if uh, err = os.UserHomeDir(); err != nil {
					return o, fmt.Errorf("hub options: no HF_HOME and no home directory: %w", err)
				}
			}
			cache = filepath.Join(uh, ".cache")
		}
		home = filepath.Join(cache, "huggingface")
	}
	home = expandPath(home, getenv)
	o.CacheDir = getenv("HF_HUB_CACHE")
	if o.CacheDir == "" {
		o.CacheDir = getenv("HUGGINGFACE_HUB_CACHE") // legacy name
	}
	if o.CacheDir == "" {
		o.CacheDir = filepath.Join(home, "hub")
	}
	o.CacheDir = expandPath(o.CacheDir, getenv)
	offline := getenv("HF_HUB_OFFLINE")
	if offline == "" {
		offline = getenv("TRANSFORMERS_OFFLINE")
	}
	o.Offline = envTrue(offline)
	var err error
	if o.ETagTimeout, err = parseTimeoutEnv("HF_HUB_ETAG_TIMEOUT", getenv("HF_HUB_ETAG_TIMEOUT"), DefaultETagTimeout); err != nil {
		return o, err
	}
	if o.DownloadTimeout, err = parseTimeoutEnv("HF_HUB_DOWNLOAD_TIMEOUT", getenv("HF_HUB_DOWNLOAD_TIMEOUT"), DefaultDownloadTimeout); err != nil {
		return o, err
	}
	if envTrue(getenv("HF_HUB_DISABLE_IMPLICIT_TOKEN")) {
		return o, nil
	}
	env := getenv("HF_TOKEN")
	if env == "" {
		env = getenv("HUGGING_FACE_HUB_TOKEN")
	}
	o.Token = cleanToken(env)
	if o.Token == "" {
		tp := getenv("HF_TOKEN_PATH")
		if tp == "" {
			tp = filepath.Join(home, "token")
		}
		tp = expandPath(tp, getenv)
		b, err := os.ReadFile(tp)
		switch {
		case err == nil:
			o.Token = cleanToken(string(b))
		case errors.Is(err, fs.ErrNotExist):
		default:
			// The path is fine to print; the file's content is not read.
			return o, fmt.Errorf("hub options: read token file: %w", err)
		}
	}
	return o, nil
}

// cleanToken is huggingface_hub's _clean_token: every CR and LF removed,
// then surrounding whitespace.
func cleanToken(t string) string {
	t = strings.NewReplacer("\r", "", "\n", "").Replace(t)
	return strings.TrimSpace(t)
}

// expandPath is Python's os.path.expandvars(os.path.expanduser(p)): a
// leading ~ becomes $HOME, then $NAME and ${NAME} are replaced by set,
// non-empty variables (others are left as written).
func expandPath(p string, getenv func(string) string) string {
	p = expandHome(p, getenv)
	if !strings.Contains(p, "$") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); {
		if p[i] != '$' {
			b.WriteByte(p[i])
			i++
			continue
		}
		name, end := "", i+1
		if end < len(p) && p[end] == '{' {
			if j := strings.IndexByte(p[end:], '}'); j > 0 {
				name, end = p[end+1:end+j], end+j+1
			}
		} else {
			for end < len(p) && isVarByte(p[end]) {
				end++
			}
			name = p[i+1 : end]
		}
		if name != "" && !strings.ContainsAny(name, "{}$") {
			if v := getenv(name); v != "" {
				b.WriteString(v)
				i = end
				continue
			}
		}
		b.WriteByte('$')
		i++
	}
	return b.String()
}

func isVarByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func expandHome(p string, getenv func(string) string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		h := getenv("HOME")
		if h == "" {
			h, _ = os.UserHomeDir()
		}
		if h != "" {
			return filepath.Join(h, p[1:])
		}
	}
	return p
}

// envTrue is huggingface_hub's _is_true: 1, ON, YES or TRUE in any case,
// nothing else (not even with surrounding spaces).
func envTrue(v string) bool {
	switch strings.ToUpper(v) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

// ErrOffline is matched (errors.Is) by errors for data that offline mode
// (HF_HUB_OFFLINE=1) cannot find in the cache.
var ErrOffline = errors.New("not in the local cache and offline mode (HF_HUB_OFFLINE=1) forbids network access")

// HubStats counts a Hub source's work.
type HubStats struct {
	// Requests is the number of HTTP requests sent (retries and redirect
	// hops included).
	Requests int64
	// Retries is the number of retried attempts.
	Retries int64
	// BytesFetched is the number of response body bytes read.
	BytesFetched int64
	// CacheHits is the number of files opened from the local cache.
	CacheHits int64
	// SideHits is the number of side cache entries (parquet footers) read
	// from the local cache instead of the files (SideCache).
	SideHits int64
}

type hubStats struct {
	requests, retries, bytes, cacheHits, sideHits atomic.Int64
}

// Hub is a Source reading a dataset repository on the Hugging Face Hub,
// pinned to one commit, through a huggingface_hub-compatible cache.
type Hub struct {
	id        string // org/name
	requested string // the revision as asked for
	sha       string
	opts      HubOptions
	endpoint  *url.URL
	httpc     *http.Client
	cache     *repoCache
	log       *slog.Logger
	retryLog  any
	prog      *progress
	stats     hubStats

	listMu  sync.Mutex // serialises stat's directory listings
	mu      sync.Mutex
	entries map[string]treeEntry // by path
	listed  map[string]bool      // directories whose direct children are in entries
	deep    map[string]bool      // directories whose whole subtree is in entries
	direct  map[string]*url.URL  // file -> CDN URL of its last redirect
	refDone bool
	// pinnedCached is set when the requested commit's snapshot was in the
	// cache and no request resolved it: cached files are then checked
	// only against listings made anyway (see cachedStale).
	pinnedCached bool
	// noSizeCheck is set once a listing made only to check a cached
	// file's size failed: later cache hits are served unchecked instead
	// of asking a failing Hub again for every file.
	noSizeCheck atomic.Bool

	// unreachable is set when the Hub could not be reached at OpenHub and
	// the cached snapshot of the requested revision is used instead: the
	// source then reads the cache only, like offline mode.
	unreachable error
}

// cacheOnly reports whether the source reads the cache only (offline
// mode, or the Hub was unreachable at OpenHub).
func (h *Hub) cacheOnly() bool { return h.opts.Offline || h.unreachable != nil }

// cacheOnlyErr is the error for a file missing from the cache when the
// source reads the cache only.
func (h *Hub) cacheOnlyErr() error {
	if h.unreachable != nil {
		return fmt.Errorf("%w: not in the cached snapshot %s, and the Hub was unreachable when the dataset was opened (%v)", ErrUnreachable, h.cache.snapshotDir(h.sha), h.unreachable)
	}
	return fmt.Errorf("%w (cache %s)", ErrOffline, h.cache.root)
}

// ErrUnreachable is matched (errors.Is) by errors of a Hub source that
// could not reach the Hub: at OpenHub when the cache holds no snapshot of
// the requested revision, later for files missing from the cached
// snapshot it fell back to.
var ErrUnreachable = errors.New("the Hub is unreachable")

// UsingCachedSnapshot reports whether the Hub was unreachable at OpenHub
// and the source serves the cached snapshot of the requested revision.
func (h *Hub) UsingCachedSnapshot() bool { return h.unreachable != nil }

var (
	repoPartRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	shaRE      = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// ParseRepoSpec splits "ORG/NAME[@REVISION]" (optionally prefixed by
// "hf://datasets/" or "datasets/") into the repo id and revision
// (default "main").
func ParseRepoSpec(spec string) (id, revision string, err error) {
	s := strings.TrimPrefix(strings.TrimPrefix(spec, "hf://"), "datasets/")
	id, revision, _ = strings.Cut(s, "@")
	if revision == "" {
		revision = "main"
	}
	org, name, ok := strings.Cut(id, "/")
	if !ok || !repoPartRE.MatchString(org) || !repoPartRE.MatchString(name) ||
		strings.Contains(id, "--") || strings.Contains(id, "..") || len(id) > 96 {
		return "", "", fmt.Errorf("dataset %q: want ORG/NAME[@REVISION] with letters, digits, '-', '_' and '.'", spec)
	}
	if err := validRevision(revision); err != nil {
		return "", "", fmt.Errorf("dataset %q: %w", spec, err)
	}
	return id, revision, nil
}

func validRevision(rev string) error {
	if len(rev) > 255 || strings.ContainsAny(rev, "\\\x00 ~^:?*[") || strings.HasPrefix(rev, "/") ||
		strings.HasSuffix(rev, "/") || strings.Contains(rev, "//") || strings.Contains(rev, "..") || rev == "." {
		return fmt.Errorf("invalid revision %q", rev)
	}
	for _, r := range rev {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("invalid revision %q", rev)
		}
	}
	// git's ref rules: no component starting with '.', none ending with
	// ".lock", no "@{". (This also keeps refs/<rev> inside the cache.)
	if strings.Contains(rev, "@{") || strings.HasSuffix(rev, ".") {
		return fmt.Errorf("invalid revision %q", rev)
	}
	for _, seg := range strings.Split(rev, "/") {
		if seg == "" || strings.HasPrefix(seg, ".") || strings.HasSuffix(seg, ".lock") {
			return fmt.Errorf("invalid revision %q", rev)
		}
	}
	return nil
}

// OpenHub opens the dataset repoSpec ("ORG/NAME[@REVISION]") on the Hub and
// resolves its revision to a commit SHA once; every later request is
// pinned to that SHA. Offline, the revision is resolved from the cache
// (refs/<branch> or a snapshots/<sha> directory).
func OpenHub(ctx context.Context, repoSpec string, opts HubOptions) (*Hub, error) {
	id, rev, err := ParseRepoSpec(repoSpec)
	if err != nil {
		return nil, err
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	ep, err := url.Parse(strings.TrimRight(opts.Endpoint, "/"))
	if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" {
		return nil, fmt.Errorf("hub endpoint %q: want an http(s) URL", opts.Endpoint)
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	h := &Hub{
		id:        id,
		requested: rev,
		opts:      opts,
		endpoint:  ep,
		log:       log,
		entries:   map[string]treeEntry{},
		listed:    map[string]bool{},
		deep:      map[string]bool{},
		direct:    map[string]*url.URL{},
	}
	if opts.Logger != nil {
		h.retryLog = slogRetryLogger{log}
	}
	if opts.Progress != nil {
		h.prog = newProgress(opts.Progress)
	}
	h.cache, err = newRepoCache(opts.CacheDir, id)
	if err != nil {
		return nil, err
	}
	h.httpc = h.newHTTPClient(opts.Transport)
	if opts.Token != "" && ep.Scheme == "http" && !isLoopback(ep.Hostname()) {
		h.log.Warn("hub: HF_ENDPOINT is plain http: the token travels unencrypted", "endpoint", ep.Redacted())
	}
	if err := h.resolveRevision(ctx); err != nil {
		return nil, h.scrub(err)
	}
	h.log.Debug("hub: dataset opened", "dataset", id, "revision", rev, "sha", h.sha, "offline", opts.Offline, "cache", string(opts.Cache))
	return h, nil
}

// setDefaults fills in the options left zero: the cache directory (from
// the environment's defaults), full caching, the retry policy, the
// prefetch, timeout and footer sizes.
func (opts *HubOptions) setDefaults() error {
	if opts.CacheDir == "" {
		o, err := HubOptionsFromEnv(func(string) string { return "" })
		if err != nil {
			return err
		}
		opts.CacheDir = o.CacheDir
	}
	if opts.Cache == "" {
		opts.Cache = CacheFull
	}
	if opts.Cache != CacheFull && opts.Cache != CacheNone {
		return fmt.Errorf("hub: cache mode %q: want full or none", opts.Cache)
	}
	opts.Retry = opts.Retry.withDefaults()
	if opts.ETagTimeout <= 0 {
		opts.ETagTimeout = DefaultETagTimeout
	}
	if opts.DownloadTimeout <= 0 {
		opts.DownloadTimeout = DefaultDownloadTimeout
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = opts.DownloadTimeout
	}
	return nil
}

// newHTTPClient returns the hub's HTTP client over transport (a clone of
// http.DefaultTransport when nil): requests counted, each attempt's
// response headers bounded by the download timeout, redirects checked.
func (h *Hub) newHTTPClient(transport http.RoundTripper) *http.Client {
	base := transport
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 16
		base = t
	}
	return &http.Client{
		Transport:     &answerTransport{base: &countingTransport{base: base, n: &h.stats.requests}, def: h.opts.DownloadTimeout},
		CheckRedirect: h.checkRedirect,
	}
}

// ID returns the repo id, ORG/NAME.
func (h *Hub) ID() string { return h.id }

// Revision returns the commit SHA every request is pinned to.
func (h *Hub) Revision() string { return h.sha }

// RequestedRevision returns the revision as given (branch, tag or SHA).
func (h *Hub) RequestedRevision() string { return h.requested }

// Stats returns counters of the work done so far.
func (h *Hub) Stats() HubStats {
	return HubStats{
		Requests:     h.stats.requests.Load(),
		Retries:      h.stats.retries.Load(),
		BytesFetched: h.stats.bytes.Load(),
		CacheHits:    h.stats.cacheHits.Load(),
		SideHits:     h.stats.sideHits.Load(),
	}
}

// Close releases idle HTTP connections. Files opened from the Hub stay
// usable.
func (h *Hub) Close() error {
	h.httpc.CloseIdleConnections()
	return nil
}

// SnapshotDir is the cache directory holding this commit's files
// (symlinks into blobs/), as huggingface_hub lays it out.
func (h *Hub) SnapshotDir() string { return h.cache.snapshotDir(h.sha) }

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// countingTransport counts requests (each retry and redirect hop).
type countingTransport struct {
	base http.RoundTripper
	n    *atomic.Int64
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.base.RoundTrip(r)
}

// redirectInfo collects what a request learns from the redirects it
// follows: the Hub sends X-Linked-Etag / X-Linked-Size / X-Repo-Commit on
// the redirect of an LFS file to its CDN.
type redirectInfo struct {
	linkedEtag, linkedSize, repoCommit string
	redirected                         bool
}

type redirectKey struct{}

// checkRedirect follows redirects (at most 10), records the Hub's linked
// headers, and strips the Authorization header whenever the next hop is
// not on the endpoint's scheme+host, so the token never reaches a CDN.
func (h *Hub) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return &errNoRetry{errors.New("stopped after 10 redirects")}
	}
	if req.URL.Scheme != "https" && req.URL.Scheme != "http" {
		return &errNoRetry{fmt.Errorf("redirect to unsupported scheme %q", req.URL.Scheme)}
	}
	if ri, ok := req.Context().Value(redirectKey{}).(*redirectInfo); ok {
		ri.redirected = true
		if r := req.Response; r != nil {
			if v := r.Header.Get("X-Linked-Etag"); v != "" {
				ri.linkedEtag = v
			}
			if v := r.Header.Get("X-Linked-Size"); v != "" {
				ri.linkedSize = v
			}
			if v := r.Header.Get("X-Repo-Commit"); v != "" {
				ri.repoCommit = v
			}
		}
	}
	if !h.sameOrigin(req.URL) {
		req.Header.Del("Authorization")
		req.Header.Del("Cookie")
	}
	return nil
}

// sameOrigin reports whether u is on the endpoint's scheme and host:port.
func (h *Hub) sameOrigin(u *url.URL) bool {
	return strings.EqualFold(u.Scheme, h.endpoint.Scheme) && strings.EqualFold(hostPort(u), hostPort(h.endpoint))
}

func hostPort(u *url.URL) string {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return net.JoinHostPort(host, port)
}

// newRequest builds a GET/HEAD for the endpoint path p (already escaped)
// with the token attached.
func (h *Hub) newRequest(ctx context.Context, method, escapedPath, rawQuery string) (*http.Request, error) {
	u := *h.endpoint
	u.User = nil
	u.RawPath = strings.TrimRight(h.endpoint.EscapedPath(), "/") + escapedPath
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return nil, fmt.Errorf("hub: bad request path %q: %w", escapedPath, err)
	}
	u.Path = p
	u.RawQuery = rawQuery
	return h.newRequestURL(ctx, method, &u)
}

func (h *Hub) newRequestURL(ctx context.Context, method string, u *url.URL) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("hub: %s %s: %w", method, u.Redacted(), err)
	}
	req.Header.Set("User-Agent", "lrstream (huggingface_hub-compatible)")
	// Byte-exact bodies: no transparent gzip, so sizes, ranges and
	// hashes refer to the file itself (huggingface_hub does the same).
	req.Header.Set("Accept-Encoding", "identity")
	if h.opts.Token != "" && h.sameOrigin(u) {
		req.Header.Set("Authorization", "Bearer "+h.opts.Token)
	}
	if u.User != nil {
		// Never send endpoint credentials embedded in the URL.
		req.URL.User = nil
	}
	return req, nil
}

// escapeRepoPath escapes a slash-separated path segment by segment.
func escapeRepoPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

func (h *Hub) apiPrefix() string { return "/api/datasets/" + escapeRepoPath(h.id) }

func (h *Hub) resolvePath(name string) string {
	return "/datasets/" + escapeRepoPath(h.id) + "/resolve/" + h.sha + "/" + escapeRepoPath(name)
}

func (h *Hub) newState(method string, u *url.URL) *retryState {
	return newRetryState(h.opts.Retry, method, u, h.log, func() { h.stats.retries.Add(1) })
}

// getJSON GETs an API URL and decodes its JSON body into v. It returns the
// response headers (for pagination).
func (h *Hub) getJSON(ctx context.Context, req *http.Request, v any) (http.Header, error) {
	return h.getJSONState(ctx, h.newState(req.Method, req.URL), req, v)
}

func (h *Hub) getJSONState(ctx context.Context, s *retryState, req *http.Request, v any) (http.Header, error) {
	ctx = withAnswerTimeout(ctx, h.opts.ETagTimeout)
	for {
		resp, err := h.do(ctx, s, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			err := s.statusError(resp)
			resp.Body.Close()
			return nil, err
		}
		rb := h.watchBody(resp.Body)
		body, err := io.ReadAll(io.LimitReader(rb, 256<<20))
		rb.Close()
		h.stats.bytes.Add(int64(len(body)))
		if err != nil {
			if rerr := s.retryBody(ctx, err); rerr != nil {
				return nil, rerr
			}
			continue
		}
		if err := json.Unmarshal(body, v); err != nil {
			return nil, fmt.Errorf("%s %s: decode JSON: %w", req.Method, req.URL.Redacted(), err)
		}
		return resp.Header, nil
	}
}

// resolveRevision pins h.sha.
func (h *Hub) resolveRevision(ctx context.Context) error {
	if h.opts.Offline {
		sha, err := h.cache.offlineRevision(h.requested)
		if err != nil {
			return fmt.Errorf("dataset %s@%s: %w", h.id, h.requested, err)
		}
		h.sha = sha
		return nil
	}
	if shaRE.MatchString(h.requested) {
		if st, err := os.Stat(h.cache.snapshotDir(h.requested)); err == nil && st.IsDir() {
			// A commit is immutable: a snapshot already in the cache
			// proves it exists, no need to ask the Hub.
			h.sha, h.pinnedCached = h.requested, true
			return nil
		}
	}
	req, err := h.newRequest(ctx, http.MethodGet, h.apiPrefix()+"/revision/"+url.PathEscape(h.requested), "")
	if err != nil {
		return err
	}
	// A cached snapshot of the requested revision is the fallback when the
	// Hub cannot be reached (huggingface_hub does the same). With one, a
	// failure to connect at all (DNS, refused, unreachable network) falls
	// back at once instead of spending the retry budget.
	cached, _, cacheErr := h.cache.cachedRevision(h.requested)
	s := h.newState(req.Method, req.URL)
	switch {
	case cacheErr == nil:
		// A connection accepted but never answered falls back after one
		// answer timeout too (huggingface_hub does not retry either).
		s.fastFail = func(err error) bool { return connectFailure(err) || errors.Is(err, ErrNoAnswer) }
	case h.opts.ConnectFailFast:
		s.fastFail = connectFailure
	}
	var body json.RawMessage
	if _, err := h.getJSONState(ctx, s, req, &body); err != nil {
		if !unreachable(ctx, err) {
			return fmt.Errorf("dataset %s: resolve revision %s: %w", h.id, h.requested, err)
		}
		if cacheErr == nil {
			h.sha, h.unreachable = cached, err
			h.log.Warn("hub: the Hub is unreachable; using the cached snapshot of the requested revision (set HF_HUB_OFFLINE=1 to skip the network)",
				"dataset", h.id, "revision", h.requested, "commit", cached, "error", h.scrub(err).Error())
			return nil
		}
		return fmt.Errorf("dataset %s@%s: %w, and the cache has no snapshot of this revision (%v)%s: %w",
			h.id, h.requested, ErrUnreachable, cacheErr, h.cachedHint(), err)
	}
	sha, err := parseRevisionInfo(body)
	if err != nil {
		return fmt.Errorf("dataset %s: resolve revision %s: %w", h.id, h.requested, err)
	}
	h.sha = sha
	return nil
}

// parseRevisionInfo extracts the commit from the answer of the revision
// API ({"id": ..., "sha": "<40 hex>", ...}).
func parseRevisionInfo(body []byte) (string, error) {
	var info struct {
		SHA string `json:"sha"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return "", fmt.Errorf("decode the Hub's revision JSON: %w", err)
	}
	if !shaRE.MatchString(info.SHA) {
		return "", fmt.Errorf("the Hub answered an invalid commit %q", shorten(info.SHA, 80))
	}
	return info.SHA, nil
}

// treeEntry is one entry of the tree API.
type treeEntry struct {
	Type string `json:"type"` // "file" or "directory"
	Path string `json:"path"`
	Size int64  `json:"size"`
	OID  string `json:"oid"` // git blob sha1
	LFS  *struct {
		OID  string `json:"oid"` // sha256 of the content
		Size int64  `json:"size"`
	} `json:"lfs,omitempty"`
}

// blobHash is the name huggingface_hub gives the blob: the sha256 for LFS
// files (X-Linked-Etag), the git blob sha1 otherwise (ETag).
func (e treeEntry) blobHash() string {
	if e.LFS != nil && e.LFS.OID != "" {
		return strings.ToLower(e.LFS.OID)
	}
	return strings.ToLower(e.OID)
}

func (e treeEntry) size() int64 {
	if e.LFS != nil && e.LFS.Size > 0 {
		return e.LFS.Size
	}
	return e.Size
}

// ValidateRemotePath checks a slash-separated path from a remote listing
// (or a caller): relative, no "." or ".." segments, no empty segments, no
// backslashes, NUL or control characters. Such a path cannot escape the
// directory it is joined to.
func ValidateRemotePath(p string) error {
	if p == "" {
		return errors.New("empty path")
	}
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q is absolute", shorten(p, 200))
	}
	if strings.ContainsRune(p, '\\') {
		return fmt.Errorf("path %q contains a backslash", shorten(p, 200))
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("path %q contains a control character", shorten(p, 200))
		}
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "":
			return fmt.Errorf("path %q has an empty segment", shorten(p, 200))
		case ".", "..":
			return fmt.Errorf("path %q has a %q segment", shorten(p, 200), seg)
		}
	}
	if len(p) >= 2 && p[1] == ':' {
		return fmt.Errorf("path %q looks like a drive path", shorten(p, 200))
	}
	return nil
}

// ErrUnsafePath is matched (errors.Is) by errors for remote paths that
// could escape the dataset or cache directory.
var ErrUnsafePath = errors.New("unsafe remote path")

func cleanDir(dir string) (string, error) {
	dir = strings.Trim(dir, "/")
	if dir == "" || dir == "." {
		return "", nil
	}
	if err := ValidateRemotePath(dir); err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnsafePath, err)
	}
	return dir, nil
}

// listTree lists dir (recursively or not) with the tree API, following
// Link rel="next" pages, validates every path and records the entries.
func (h *Hub) listTree(ctx context.Context, dir string, recursive bool) ([]treeEntry, error) {
	p := h.apiPrefix() + "/tree/" + h.sha
	if dir != "" {
		p += "/" + escapeRepoPath(dir)
	}
	q := ""
	if recursive {
		q = "recursive=true"
	}
	req, err := h.newRequest(ctx, http.MethodGet, p, q)
	if err != nil {
		return nil, err
	}
	var all []treeEntry
	seen := map[string]bool{pageKey(req.URL): true}
	for page := 0; ; page++ {
		if page > 100000 {
			return nil, fmt.Errorf("list %s: too many pages", req.URL.Redacted())
		}
		var body json.RawMessage
		hdr, err := h.getJSON(ctx, req, &body)
		if err != nil {
			return nil, err
		}
		entries, err := parseTreePage(body, dir)
		if err != nil {
			return nil, fmt.Errorf("list %s of dataset %s: %w", displayDir(dir), h.id, err)
		}
		all = append(all, entries...)
		next := nextLink(hdr.Get("Link"))
		if next == "" {
			break
		}
		nu, err := req.URL.Parse(next)
		if err != nil {
			return nil, fmt.Errorf("list %s of dataset %s: bad pagination link: %w", displayDir(dir), h.id, err)
		}
		if !h.sameOrigin(nu) {
			return nil, fmt.Errorf("list %s of dataset %s: pagination link to another host %s refused", displayDir(dir), h.id, nu.Host)
		}
		if k := pageKey(nu); seen[k] {
			return nil, fmt.Errorf("list %s of dataset %s: the Hub's pagination cycles: page %d links back to an earlier page (%s)", displayDir(dir), h.id, page+1, shorten(nu.Redacted(), 200))
		} else {
			seen[k] = true
		}
		if req, err = h.newRequestURL(ctx, http.MethodGet, nu); err != nil {
			return nil, err
		}
	}
	h.mu.Lock()
	for _, e := range all {
		h.entries[e.Path] = e
		if e.Type == "directory" && recursive {
			h.listed[e.Path] = true
			h.deep[e.Path] = true
		}
	}
	h.listed[dir] = true
	if recursive {
		h.deep[dir] = true
	}
	h.mu.Unlock()
	return all, nil
}

// pageKey identifies a listing page for cycle detection: the URL with its
// query parameters in a canonical order (a cursor repeated with its
// parameters reordered is the same page).
func pageKey(u *url.URL) string {
	c := *u
	c.RawQuery = u.Query().Encode()
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// parseTreePage decodes one page of the tree API for the directory dir
// ("" for the root) and validates it: every path is a safe relative path
// inside dir, every file has a 40- or 64-hex blob hash and a non-negative
// size. Entries of other types (submodules) are skipped. One bad entry
// fails the whole page.
func parseTreePage(body []byte, dir string) ([]treeEntry, error) {
	var entries []treeEntry
	if err := json.Unmarshal(body, &entries); err != nil {
		return nil, fmt.Errorf("decode the Hub's tree JSON: %w", err)
	}
	out := entries[:0]
	for _, e := range entries {
		if err := ValidateRemotePath(e.Path); err != nil {
			return nil, fmt.Errorf("the Hub listed an %w: %w", ErrUnsafePath, err)
		}
		if dir != "" && !strings.HasPrefix(e.Path, dir+"/") {
			return nil, fmt.Errorf("the Hub listed %q outside the directory: %w", shorten(e.Path, 200), ErrUnsafePath)
		}
		switch e.Type {
		case "file":
			if bh := e.blobHash(); !hexRE.MatchString(bh) {
				return nil, fmt.Errorf("file %q has an invalid hash %q: %w", e.Path, shorten(bh, 80), ErrUnsafePath)
			}
			if e.size() < 0 || e.Size < 0 {
				return nil, fmt.Errorf("file %q has a negative size", e.Path)
			}
		case "directory":
		default:
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

var hexRE = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

func displayDir(d string) string {
	if d == "" {
		return "/"
	}
	return d
}

// nextLink extracts the rel="next" URL of a Link header.
func nextLink(v string) string {
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if !strings.HasPrefix(part, "<") {
			continue
		}
		end := strings.Index(part, ">")
		if end < 0 {
			continue
		}
		for _, param := range strings.Split(part[end+1:], ";") {
			k, val, _ := strings.Cut(strings.TrimSpace(param), "=")
			if strings.EqualFold(strings.TrimSpace(k), "rel") {
				for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(val), `"`)) {
					if strings.EqualFold(rel, "next") {
						return part[1:end]
					}
				}
			}
		}
	}
	return ""
}

// List returns the sorted paths of all files under dir ("" for the whole
// dataset) at the pinned commit: from the tree API online, from the
// snapshot directory offline. A missing directory lists as empty.
func (h *Hub) List(ctx context.Context, dir string) ([]string, error) {
	d, err := cleanDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", dir, h.id, err)
	}
	if h.cacheOnly() {
		out, err := h.cache.listSnapshot(h.sha, d)
		if err != nil {
			return nil, h.scrub(fmt.Errorf("list %s in %s@%s: %w", displayDir(d), h.id, h.sha, err))
		}
		return out, nil
	}
	if out, ok := h.listKnown(d); ok {
		return out, nil
	}
	entries, err := h.listTree(ctx, d, true)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, h.scrub(fmt.Errorf("list %s in %s@%s: %w", displayDir(d), h.id, h.sha, err))
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		if e.Type == "file" && !seen[e.Path] {
			seen[e.Path] = true
			out = append(out, e.Path)
		}
	}
	sort.Strings(out)
	return out, nil
}

// listKnown answers List from earlier recursive listings of dir or of
// one of its ancestors.
func (h *Hub) listKnown(dir string) ([]string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	known := false
	for d := dir; ; d = path.Dir(d) {
		if d == "." {
			d = ""
		}
		if h.deep[d] {
			known = true
			break
		}
		if d == "" {
			break
		}
	}
	if !known {
		return nil, false
	}
	var out []string
	for p, e := range h.entries {
		if e.Type == "file" && (dir == "" || strings.HasPrefix(p, dir+"/")) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, true
}

// stat finds the tree entry of a file, listing its parent directory (one
// request, which also describes its siblings) when it is not known yet.
func (h *Hub) stat(ctx context.Context, name string) (treeEntry, error) {
	h.mu.Lock()
	e, ok := h.entries[name]
	parent := path.Dir(name)
	if parent == "." {
		parent = ""
	}
	listed := h.listed[parent]
	h.mu.Unlock()
	if !ok && !listed {
		h.listMu.Lock()
		h.mu.Lock()
		listed = h.listed[parent]
		h.mu.Unlock()
		if !listed {
			if _, err := h.listTree(ctx, parent, false); err != nil && !errors.Is(err, fs.ErrNotExist) {
				h.listMu.Unlock()
				return treeEntry{}, err
			}
		}
		h.mu.Lock()
		e, ok = h.entries[name]
		h.listed[parent] = true
		h.mu.Unlock()
		h.listMu.Unlock()
	}
	if !ok {
		return treeEntry{}, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	if e.Type != "file" {
		return treeEntry{}, fmt.Errorf("%s is a directory", name)
	}
	return e, nil
}

// isShard reports whether name is bulk data, streamed under CacheNone:
// paths under data/ and videos/. Everything else is metadata, always
// cached whole.
func isShard(name string) bool {
	return strings.HasPrefix(name, "data/") || strings.HasPrefix(name, "videos/")
}

// Open opens name at the pinned commit. A file already in the cache
// snapshot (downloaded by lrstream or by Python tools) is read locally
// without any request. Otherwise metadata files, and every file under
// CacheFull, are downloaded whole into the cache first; data shards under
// CacheNone are streamed with range requests (the File then implements
// Prefetcher).
func (h *Hub) Open(ctx context.Context, name string) (File, error) {
	f, err := h.open(ctx, name)
	if err != nil {
		return nil, h.scrub(fmt.Errorf("open %s in %s@%s: %w", name, h.id, shortSHA(h.sha), err))
	}
	return f, nil
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func (h *Hub) open(ctx context.Context, name string) (File, error) {
	if err := ValidateRemotePath(name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsafePath, err)
	}
	var e treeEntry
	if f, err := h.cache.openSnapshot(h.sha, name); err == nil {
		se, stale := h.cachedStale(ctx, name, f.Size())
		if !stale {
			h.stats.cacheHits.Add(1)
			h.log.Debug("hub: cache hit", "file", name)
			return f, nil
		}
		f.Close()
		e = se
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	} else if h.cacheOnly() {
		return nil, h.cacheOnlyErr()
	} else if e, err = h.stat(ctx, name); err != nil {
		return nil, err
	}
	if h.opts.Cache == CacheNone && isShard(name) {
		return h.newRemoteFile(ctx, e), nil
	}
	if err := h.download(ctx, e); err != nil {
		return nil, err
	}
	return h.cache.openSnapshot(h.sha, name)
}

// scrub makes sure an error message cannot carry the token, whatever
// wrapped error produced it.
func (h *Hub) scrub(err error) error {
	if err == nil || h.opts.Token == "" || !strings.Contains(err.Error(), h.opts.Token) {
		return err
	}
	return &scrubbedError{err: err, msg: strings.ReplaceAll(err.Error(), h.opts.Token, "[token]")}
}

type scrubbedError struct {
	err error
	msg string
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
