package s3

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lrstream/lrstream/fetch"
)

// Pin is one object as listed when the source was opened: every read asks
// for this ETag.
type Pin struct {
	Size int64  `json:"size"`
	ETag string `json:"etag"`
}

// Stats counts a source's work.
type Stats struct {
	// Requests is the number of HTTP requests sent (retries included).
	Requests int64
	// Retries is the number of retried requests and resumed bodies.
	Retries int64
	// BytesFetched is the number of object bytes received.
	BytesFetched int64
	// CacheHits counts files served from the node-local cache.
	CacheHits int64
	// SideHits counts footers read from the side cache.
	SideHits int64
}

type counters struct {
	requests, retries, bytes, cacheHits, sideHits atomic.Int64
}

// Source is a fetch.Source over the objects under s3://BUCKET/PREFIX.
type Source struct {
	opts   Options
	bucket string
	prefix string // no slashes around; "" for the bucket root
	client *awss3.Client
	cache  *cache
	log    *slog.Logger

	pins    map[string]Pin // relative path → pin
	names   []string       // sorted
	digest  string
	secrets []string // scrubbed from every error
	stats   counters
}

// Open lists the objects under spec (s3://BUCKET[/PREFIX]) and pins their
// ETags; offline, the listing comes from the cache.
func Open(ctx context.Context, spec string, opts Options) (*Source, error) {
	bucket, prefix, err := ParseURL(spec)
	if err != nil {
		return nil, err
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	s := &Source{opts: opts, bucket: bucket, prefix: prefix, log: opts.Logger}
	// Loading the configuration makes no request: credentials are
	// resolved below, when they are needed.
	cfg, hc, err := s.loadConfig(ctx)
	if err != nil {
		return nil, s.scrub(fmt.Errorf("%s: %w", s.ID(), err))
	}
	s.cache = newCache(filepath.Join(s.opts.CacheDir, s.opts.storeFolder(), bucket))
	if opts.Offline {
		pins, err := s.cache.readListing(prefix)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.ID(), err)
		}
		s.setPins(pins)
		return s, nil
	}
	if !opts.Anonymous {
		if err := s.checkCredentials(ctx, &cfg); err != nil {
			return nil, s.scrub(fmt.Errorf("%s: %w", s.ID(), err))
		}
	}
	s.client = s.newClient(cfg, hc)
	pins, err := s.list(ctx)
	if err != nil {
		return nil, s.scrub(err)
	}
	s.setPins(pins)
	if err := s.cache.writeListing(prefix, pins); err != nil {
		s.log.Debug("s3: listing not cached", "dataset", s.ID(), "err", err)
	}
	return s, nil
}

// loadConfig loads the AWS configuration (the environment, the shared
// files, the profile) with lrstream's retry policy, and settles the
// endpoint (Options', else the profile's endpoint_url). The HTTP client it
// returns counts requests and never follows redirects.
func (s *Source) loadConfig(ctx context.Context) (aws.Config, *http.Client, error) {
	o := s.opts
	// The SDK's buildable client receives the configured CA bundle
	// (AWS_CA_BUNDLE, ca_bundle); its transport is then used by our client.
	bc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.ResponseHeaderTimeout = o.HeaderTimeout
	})
	lo := []func(*config.LoadOptions) error{config.WithHTTPClient(bc), config.WithRetryer(s.retryer)}
	if o.Region != "" {
		lo = append(lo, config.WithRegion(o.Region))
	}
	if o.Profile != "" {
		lo = append(lo, config.WithSharedConfigProfile(o.Profile))
	}
	if o.ConfigFile != "" {
		lo = append(lo, config.WithSharedConfigFiles([]string{o.ConfigFile}))
	}
	if o.CredentialsFile != "" {
		lo = append(lo, config.WithSharedCredentialsFiles([]string{o.CredentialsFile}))
	}
	switch {
	case o.Anonymous:
		lo = append(lo, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	case o.Credentials != nil:
		lo = append(lo, config.WithCredentialsProvider(o.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return cfg, nil, fmt.Errorf("aws configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if s.opts.Endpoint == "" && cfg.BaseEndpoint != nil {
		s.opts.Endpoint = *cfg.BaseEndpoint // the profile's endpoint_url
		if err := s.opts.check(); err != nil {
			return cfg, nil, err
		}
	}
	var tr http.RoundTripper = bc.GetTransport()
	if b, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr = b.GetTransport()
	}
	if o.Transport != nil {
		tr = o.Transport
	}
	hc := &http.Client{
		Transport: &countingTransport{rt: tr, n: &s.stats.requests},
		// A signed request is never replayed to another URL.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return cfg, hc, nil
}

// newClient is the S3 client of cfg on the settled endpoint.
func (s *Source) newClient(cfg aws.Config, hc *http.Client) *awss3.Client {
	return awss3.NewFromConfig(cfg, func(so *awss3.Options) {
		so.HTTPClient = hc
		if s.opts.Endpoint != "" {
			so.BaseEndpoint = aws.String(s.opts.Endpoint)
		}
		so.UsePathStyle = s.opts.pathStyle()
		// Checksums only where S3 requires them: most S3-compatible stores
		// do not know the newer flexible checksums.
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
}

// checkCredentials resolves the credential chain once: keys found are
// remembered (to scrub them from errors); no credentials at all means
// unsigned requests (public buckets), said in a debug log.
func (s *Source) checkCredentials(ctx context.Context, cfg *aws.Config) error {
	if cfg.Credentials == nil {
		cfg.Credentials = aws.AnonymousCredentials{}
		return nil
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		if s.opts.Profile != "" {
			return fmt.Errorf("aws credentials of profile %s: %w", s.opts.Profile, err)
		}
		s.log.Debug("s3: no credentials found; sending unsigned requests (public buckets)", "err", err)
		cfg.Credentials = aws.AnonymousCredentials{}
		return nil
	}
	s.secrets = append(s.secrets, creds.SecretAccessKey, creds.SessionToken, creds.AccessKeyID)
	cfg.Credentials = aws.NewCredentialsCache(cfg.Credentials)
	return nil
}

// retryer is lrstream's retry policy in the SDK's retryer: MaxAttempts
// attempts, equal-jitter exponential backoff, no client-side retry quota
// (a 503 storm must not exhaust a token bucket shared by all requests),
// 408/429/5xx, throttling codes and connection errors retried.
func (s *Source) retryer() aws.Retryer {
	p := s.opts.Retry
	return retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = p.MaxAttempts
		so.MaxBackoff = p.MaxBackoff
		so.RateLimiter = ratelimit.None
		so.Backoff = retry.BackoffDelayerFunc(func(attempt int, err error) (time.Duration, error) {
			s.stats.retries.Add(1)
			s.log.Debug("s3: retrying", "attempt", attempt, "err", s.scrub(err))
			return backoff(p, attempt), nil
		})
		so.Retryables = append(so.Retryables, retry.RetryableHTTPStatusCode{Codes: map[int]struct{}{http.StatusRequestTimeout: {}, http.StatusTooManyRequests: {}}})
	})
}

// list lists the objects under the prefix and pins them.
func (s *Source) list(ctx context.Context) (map[string]Pin, error) {
	in := &awss3.ListObjectsV2Input{Bucket: aws.String(s.bucket)}
	if s.prefix != "" {
		in.Prefix = aws.String(s.prefix + "/")
	}
	pins := map[string]Pin{}
	pg := awss3.NewListObjectsV2Paginator(s.client, in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, s.opError("list", s.ID(), err)
		}
		for _, obj := range page.Contents {
			key := aws.ToString(obj.Key)
			rel := strings.TrimPrefix(key, aws.ToString(in.Prefix))
			size := aws.ToInt64(obj.Size)
			if strings.HasSuffix(rel, "/") && size == 0 {
				continue // a "folder" marker object
			}
			if err := validKeyPath(rel); err != nil {
				return nil, fmt.Errorf("list %s: object %q: %w: %w", s.ID(), key, fetch.ErrUnsafePath, err)
			}
			etag := normalizeETag(aws.ToString(obj.ETag))
			if etag == "" {
				return nil, fmt.Errorf("list %s: object %q has no ETag to pin", s.ID(), key)
			}
			pins[rel] = Pin{Size: size, ETag: etag}
		}
	}
	if len(pins) == 0 {
		return nil, fmt.Errorf("%s: no objects under this prefix: %w", s.ID(), fs.ErrNotExist)
	}
	return pins, nil
}

func (s *Source) setPins(pins map[string]Pin) {
	s.pins = pins
	s.names = make([]string, 0, len(pins))
	for n := range pins {
		s.names = append(s.names, n)
	}
	sort.Strings(s.names)
	s.digest = pinDigest(pins)
}

// pinDigest is the SHA-256 (40 hex digits, the length of a commit) of the
// sorted pins: "path\x00size\x00etag\n" per object.
func pinDigest(pins map[string]Pin) string {
	names := make([]string, 0, len(pins))
	for n := range pins {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		p := pins[n]
		h.Write([]byte(n + "\x00" + strconv.FormatInt(p.Size, 10) + "\x00" + p.ETag + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))[:40]
}

// normalizeETag strips quotes and a weak prefix.
func normalizeETag(v string) string {
	v = strings.TrimSpace(v)
	v = strings.TrimPrefix(v, "W/")
	return strings.Trim(v, `"`)
}

// ID is s3://BUCKET[/PREFIX].
func (s *Source) ID() string { return URL(s.bucket, s.prefix) }

// Revision is the digest of the ETags pinned at Open (40 hex digits): it
// changes whenever any object under the prefix does.
func (s *Source) Revision() string { return s.digest }

// Pins returns a copy of the pinned objects (relative path → size, ETag).
func (s *Source) Pins() map[string]Pin {
	out := make(map[string]Pin, len(s.pins))
	for k, v := range s.pins {
		out[k] = v
	}
	return out
}

// Stats returns counters of the work done so far.
func (s *Source) Stats() Stats {
	return Stats{
		Requests: s.stats.requests.Load(), Retries: s.stats.retries.Load(), BytesFetched: s.stats.bytes.Load(),
		CacheHits: s.stats.cacheHits.Load(), SideHits: s.stats.sideHits.Load(),
	}
}

// List returns the pinned paths under dir ("" for all), sorted.
func (s *Source) List(_ context.Context, dir string) ([]string, error) {
	dir = strings.Trim(dir, "/")
	if dir == "" {
		return append([]string(nil), s.names...), nil
	}
	var out []string
	for _, n := range s.names {
		if strings.HasPrefix(n, dir+"/") {
			out = append(out, n)
		}
	}
	return out, nil
}

// key is the object key of a relative path.
func (s *Source) key(name string) string {
	if s.prefix == "" {
		return name
	}
	return s.prefix + "/" + name
}

// pin returns name's pin after checking the name.
func (s *Source) pin(name string) (Pin, error) {
	if err := fetch.ValidateRemotePath(name); err != nil {
		return Pin{}, fmt.Errorf("%w: %w", fetch.ErrUnsafePath, err)
	}
	p, ok := s.pins[name]
	if !ok {
		return Pin{}, fmt.Errorf("%s: no object %s under the prefix (as listed when the run started): %w", s.ID(), name, fs.ErrNotExist)
	}
	return p, nil
}

// Open opens name: from the cache when it is there, else downloaded into
// it (metadata, and every file with CacheFull), else (data shards with
// CacheNone) streamed with range requests.
func (s *Source) Open(ctx context.Context, name string) (fetch.File, error) {
	p, err := s.pin(name)
	if err != nil {
		return nil, err
	}
	if f, ok := s.cache.open(s.blobID(name, p), name, p.Size); ok {
		s.stats.cacheHits.Add(1)
		return f, nil
	}
	if s.opts.Offline {
		return nil, fmt.Errorf("%s: %s is not in the cache (offline): %w", s.ID(), name, fetch.ErrOffline)
	}
	if s.opts.Cache == fetch.CacheNone && fetch.IsShard(name) {
		key := s.key(name)
		wrap := func(err error) error { return s.scrub(fmt.Errorf("%s: %w", s.ID(), err)) }
		get := func(ctx context.Context, off, end int64) ([]byte, error) {
			return s.getRange(ctx, key, p, off, end)
		}
		return fetch.NewRangeFile(name, p.Size, get, s.opts.Range, wrap), nil
	}
	if err := s.download(ctx, name, p); err != nil {
		return nil, s.scrub(fmt.Errorf("%s: %w", s.ID(), err))
	}
	f, ok := s.cache.open(s.blobID(name, p), name, p.Size)
	if !ok {
		return nil, fmt.Errorf("%s: %s: downloaded but not in the cache", s.ID(), name)
	}
	return f, nil
}

// Close releases idle connections.
func (s *Source) Close() error { return nil }

// scrub removes the credentials from an error's message.
func (s *Source) scrub(err error) error { return fetch.Scrub(err, s.secrets...) }

// countingTransport counts requests (each retry).
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.rt.RoundTrip(r)
}

var (
	_ fetch.Source       = (*Source)(nil)
	_ fetch.SideCache    = (*Source)(nil)
	_ fetch.Materializer = (*Source)(nil)
)
