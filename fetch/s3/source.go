package s3

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/fetch/objstore"
)

// Pin is an object's pinned version (its ETag) and size.
type Pin = objstore.Pin

// Store is an S3 bucket prefix as an objstore.Store.
type Store struct {
	opts     Options
	bucket   string
	prefix   string // no slashes around; "" for the bucket root
	client   *awss3.Client
	log      *slog.Logger
	secrets  []string
	requests atomic.Int64
	retries  atomic.Int64
}

// Open lists the objects under spec (s3://BUCKET[/PREFIX]) and pins their
// ETags; offline, the listing comes from the cache.
func Open(ctx context.Context, spec string, opts Options) (*objstore.Source, error) {
	s, oo, err := dial(ctx, spec, opts)
	if err != nil {
		return nil, err
	}
	return objstore.Open(ctx, s, oo)
}

// dial checks spec and opts and returns the store (with its client,
// unless offline) and the objstore options of its cache.
func dial(ctx context.Context, spec string, opts Options) (*Store, objstore.Options, error) {
	var oo objstore.Options
	bucket, prefix, err := ParseURL(spec)
	if err != nil {
		return nil, oo, err
	}
	if err := opts.check(); err != nil {
		return nil, oo, err
	}
	opts = opts.withDefaults()
	s := &Store{opts: opts, bucket: bucket, prefix: prefix, log: opts.Logger}
	// Loading the configuration makes no request: credentials are
	// resolved below, when they are needed.
	cfg, hc, err := s.loadConfig(ctx)
	if err != nil {
		return nil, oo, s.scrub(fmt.Errorf("%s: %w", s.ID(), err))
	}
	oo = objstore.Options{
		Dir:   filepath.Join(s.opts.CacheDir, s.opts.storeFolder(), bucket),
		Cache: opts.Cache, Offline: opts.Offline, Logger: opts.Logger, Retry: opts.Retry,
		StallTimeout: opts.StallTimeout, Range: opts.Range,
	}
	if !opts.Offline {
		if !opts.Anonymous {
			if err := s.checkCredentials(ctx, &cfg); err != nil {
				return nil, oo, s.scrub(fmt.Errorf("%s: %w", s.ID(), err))
			}
		}
		s.client = s.newClient(cfg, hc)
	}
	oo.Secrets = s.secrets
	return s, oo, nil
}

// loadConfig loads the AWS configuration (the environment, the shared
// files, the profile) with lrstream's retry policy, and settles the
// endpoint (Options', else the profile's endpoint_url). The HTTP client it
// returns counts requests and never follows redirects.
func (s *Store) loadConfig(ctx context.Context) (aws.Config, *http.Client, error) {
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
	if o.NoIMDS {
		lo = append(lo, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
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
		Transport: &countingTransport{rt: tr, n: &s.requests},
		// A signed request is never replayed to another URL.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return cfg, hc, nil
}

// newClient is the S3 client of cfg on the settled endpoint.
func (s *Store) newClient(cfg aws.Config, hc *http.Client) *awss3.Client {
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
func (s *Store) checkCredentials(ctx context.Context, cfg *aws.Config) error {
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
func (s *Store) retryer() aws.Retryer {
	p := s.opts.Retry
	return retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = p.MaxAttempts
		so.MaxBackoff = p.MaxBackoff
		so.RateLimiter = ratelimit.None
		so.Backoff = retry.BackoffDelayerFunc(func(attempt int, err error) (time.Duration, error) {
			s.retries.Add(1)
			s.log.Debug("s3: retrying", "attempt", attempt, "err", s.scrub(err))
			return backoff(p, attempt), nil
		})
		so.Retryables = append(so.Retryables, retry.RetryableHTTPStatusCode{Codes: map[int]struct{}{http.StatusRequestTimeout: {}, http.StatusTooManyRequests: {}}})
	})
}

// list lists the objects under the prefix and pins them.
func (s *Store) List(ctx context.Context) (map[string]Pin, error) {
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
			if err := objstore.ValidKey(rel); err != nil {
				return nil, fmt.Errorf("list %s: object %q: %w: %w", s.ID(), key, fetch.ErrUnsafePath, err)
			}
			etag := normalizeETag(aws.ToString(obj.ETag))
			if etag == "" {
				return nil, fmt.Errorf("list %s: object %q has no ETag to pin", s.ID(), key)
			}
			pins[rel] = Pin{Size: size, ETag: etag}
		}
	}
	return pins, nil
}

// normalizeETag strips quotes and a weak prefix.
func normalizeETag(v string) string {
	v = strings.TrimSpace(v)
	v = strings.TrimPrefix(v, "W/")
	return strings.Trim(v, `"`)
}

// ID is s3://BUCKET[/PREFIX].
func (s *Store) ID() string { return URL(s.bucket, s.prefix) }

// Key is the object key of a dataset path.
func (s *Store) Key(name string) string {
	if s.prefix == "" {
		return name
	}
	return s.prefix + "/" + name
}

// Requests is the number of HTTP requests sent (retries included).
func (s *Store) Requests() int64 { return s.requests.Load() }

// Retries is the number of retried requests.
func (s *Store) Retries() int64 { return s.retries.Load() }

// scrub removes the credentials from an error's message.
func (s *Store) scrub(err error) error { return fetch.Scrub(err, s.secrets...) }

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
	_ objstore.Store    = (*Store)(nil)
	_ objstore.Verifier = (*Store)(nil)
	_ objstore.Counter  = (*Store)(nil)
)
