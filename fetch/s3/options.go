package s3

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/lrstream/lrstream/fetch"
)

// Addressing styles (Options.AddressingStyle).
const (
	// StyleAuto: path-style for a custom endpoint (S3-compatible stores
	// rarely have wildcard DNS), virtual-hosted for AWS.
	StyleAuto = "auto"
	// StylePath: https://ENDPOINT/BUCKET/KEY.
	StylePath = "path"
	// StyleVirtual: https://BUCKET.ENDPOINT/KEY.
	StyleVirtual = "virtual"
)

// Options configures a Source. OptionsFromEnv fills it the way the AWS CLI
// and boto3 read their environment; the credential chain itself (keys,
// AWS_PROFILE with ~/.aws/credentials and ~/.aws/config, SSO, assume-role,
// web identity, credential_process, container and instance roles) is
// aws-sdk-go-v2's, which reads the process environment.
type Options struct {
	// Endpoint is the store's base URL (AWS_ENDPOINT_URL_S3, else
	// AWS_ENDPOINT_URL, else the profile's endpoint_url); "" means AWS S3.
	// Requests are signed for this endpoint only and never follow
	// redirects.
	Endpoint string
	// Region (AWS_REGION, AWS_DEFAULT_REGION, else the profile's region;
	// us-east-1 when none is configured).
	Region string
	// Profile selects a profile of the shared files (AWS_PROFILE).
	Profile string
	// AddressingStyle is StyleAuto (default), StylePath or StyleVirtual
	// (LRSTREAM_S3_ADDRESSING_STYLE, else the profile's s3
	// addressing_style in ~/.aws/config).
	AddressingStyle string
	// Anonymous sends unsigned requests (public buckets;
	// AWS_NO_SIGN_REQUEST=YES, as GDAL reads it). Without it, a chain that
	// finds no credentials at all also falls back to unsigned requests.
	Anonymous bool
	// Credentials overrides the credential chain (nil: the chain).
	// OptionsFromEnv sets it from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
	// and AWS_SESSION_TOKEN when both keys are set (the chain's first
	// step), so the environment given to the CLI is the one used.
	Credentials aws.CredentialsProvider
	// NoIMDS keeps the credential chain from asking an EC2 instance
	// metadata service (AWS_EC2_METADATA_DISABLED=true).
	NoIMDS bool
	// ConfigFile and CredentialsFile replace ~/.aws/config and
	// ~/.aws/credentials (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE).
	ConfigFile, CredentialsFile string
	// CacheDir is the node-local cache root (--cache-dir; default
	// $XDG_CACHE_HOME/lrstream/s3, else ~/.cache/lrstream/s3).
	CacheDir string
	// Cache: fetch.CacheFull (default) downloads every opened file whole
	// into the cache; fetch.CacheNone streams data shards (data/, videos/)
	// with range requests. Metadata files are always cached.
	Cache fetch.CacheMode
	// Offline serves everything from the cache, without any request
	// (HF_HUB_OFFLINE, lrstream's one offline switch).
	Offline bool
	// Logger receives debug logs and warnings (nil: slog.Default()).
	// Credentials and signed headers are never logged.
	Logger *slog.Logger
	// Retry bounds retries of each request and mid-body resumes of each
	// transfer; zero fields take fetch.DefaultRetryPolicy's values.
	Retry fetch.RetryPolicy
	// StallTimeout is the progress deadline of response bodies (default
	// fetch.DefaultStallTimeout).
	StallTimeout time.Duration
	// HeaderTimeout bounds the wait for response headers (default 60s).
	HeaderTimeout time.Duration
	// Range tunes streamed files (prefetch merging, footer size).
	Range fetch.RangeOptions
	// Transport is the HTTP transport (nil: a clone of
	// http.DefaultTransport).
	Transport http.RoundTripper
}

// OptionsFromEnv reads the settings lrstream takes from the environment
// (getenv is usually os.Getenv):
//
//   - AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL: the endpoint, unless
//     AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true (as the AWS CLI does);
//   - AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN;
//   - AWS_REGION, else AWS_DEFAULT_REGION; AWS_PROFILE; AWS_CONFIG_FILE,
//     AWS_SHARED_CREDENTIALS_FILE;
//   - AWS_NO_SIGN_REQUEST (true: unsigned requests, for public buckets);
//   - AWS_EC2_METADATA_DISABLED (true: no instance metadata service);
//   - LRSTREAM_S3_ADDRESSING_STYLE: auto, path or virtual; else the
//     profile's nested "s3 = addressing_style = …" in the shared files;
//   - HF_HUB_OFFLINE (offline: the cache only);
//   - the cache root from XDG_CACHE_HOME or HOME.
//
// The rest of the chain (profiles, SSO, roles) is resolved when the source
// is opened.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	var o Options
	if !fetch.EnvTrue(getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")) {
		o.Endpoint = getenv("AWS_ENDPOINT_URL_S3")
		if o.Endpoint == "" {
			o.Endpoint = getenv("AWS_ENDPOINT_URL")
		}
	}
	o.Region = getenv("AWS_REGION")
	if o.Region == "" {
		o.Region = getenv("AWS_DEFAULT_REGION")
	}
	o.Profile = getenv("AWS_PROFILE")
	if id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		o.Credentials = credentials.NewStaticCredentialsProvider(id, secret, getenv("AWS_SESSION_TOKEN"))
	}
	o.NoIMDS = strings.EqualFold(getenv("AWS_EC2_METADATA_DISABLED"), "true")
	if f := getenv("AWS_CONFIG_FILE"); f != "" {
		o.ConfigFile = fetch.ExpandPath(f, getenv)
	}
	if f := getenv("AWS_SHARED_CREDENTIALS_FILE"); f != "" {
		o.CredentialsFile = fetch.ExpandPath(f, getenv)
	}
	o.Anonymous = fetch.EnvTrue(getenv("AWS_NO_SIGN_REQUEST"))
	o.AddressingStyle = strings.ToLower(getenv("LRSTREAM_S3_ADDRESSING_STYLE"))
	// The shared files, for the SDK too (it would look in the process's
	// HOME): the ones whose s3 settings are read here.
	o.ConfigFile, o.CredentialsFile = sharedFiles(&o, getenv)
	if o.AddressingStyle == "" { // the profile's s3 addressing_style (profile.go)
		style, err := profileStyle(o.ConfigFile, o.CredentialsFile, o.Profile)
		if err != nil {
			return o, fmt.Errorf("s3 options: %w", err)
		}
		o.AddressingStyle = style
	}
	o.Offline = fetch.EnvTrue(getenv("HF_HUB_OFFLINE"))
	root := getenv("XDG_CACHE_HOME")
	if root == "" {
		home := getenv("HOME")
		if home == "" {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return o, fmt.Errorf("s3 options: no XDG_CACHE_HOME and no home directory: %w", err)
			}
		}
		root = filepath.Join(home, ".cache")
	}
	o.CacheDir = filepath.Join(fetch.ExpandPath(root, getenv), "lrstream", "s3")
	if err := o.check(); err != nil {
		return o, err
	}
	return o, nil
}

// check validates the endpoint and the addressing style.
func (o *Options) check() error {
	switch o.AddressingStyle {
	case "", StyleAuto, StylePath, StyleVirtual:
	default:
		return fmt.Errorf("s3 addressing style %q: want auto, path or virtual", o.AddressingStyle)
	}
	if o.Endpoint == "" {
		return nil
	}
	u, err := url.Parse(o.Endpoint)
	if err != nil {
		return fmt.Errorf("s3 endpoint: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("s3 endpoint %q: want http(s)://HOST[:PORT][/PATH] without credentials, query or fragment", u.Redacted())
	}
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	return nil
}

// pathStyle says whether bucket names go into the path.
func (o *Options) pathStyle() bool {
	switch o.AddressingStyle {
	case StylePath:
		return true
	case StyleVirtual:
		return false
	}
	return o.Endpoint != ""
}

func (o Options) withDefaults() Options {
	o.Retry = o.Retry.WithDefaults()
	if o.Cache == "" {
		o.Cache = fetch.CacheFull
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = fetch.DefaultStallTimeout
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Range = o.Range.WithDefaults()
	return o
}

// storeFolder names the endpoint's folder in the cache: its host and port
// (and path) with every character outside [A-Za-z0-9.-] replaced, or
// "aws" for AWS S3 (bucket names are global there).
func (o *Options) storeFolder() string {
	if o.Endpoint == "" {
		return "aws"
	}
	u, _ := url.Parse(o.Endpoint) // checked
	return sanitize(u.Scheme + "-" + u.Host + u.Path)
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	out := strings.Trim(string(b), ".")
	if out == "" {
		return "_"
	}
	return out
}
