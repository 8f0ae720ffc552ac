// Package objstore is the domain at the centre of lrstream's object store
// sources: a fetch.Source over any Store (a flat namespace of immutable
// objects read by byte range: S3-compatible stores in fetch/s3, Hugging
// Face Storage Buckets in fetch/hfbucket). Like litestream's replica
// clients, each store is its own package implementing the small Store
// interface; everything else lives here once:
//
//   - pins: the objects are listed once, when the source opens, and each
//     one's ETag (or content hash) is pinned; every read asks the store for
//     that version and fails with ErrObjectChanged otherwise; Revision is
//     the digest of the pins (stream header, resume fingerprint);
//   - reads: data shards streamed through fetch.NewRangeFile (prefetch,
//     footer tail) with cut or stalled bodies resumed within a budget, or
//     downloaded whole into a node-local cache (content-addressed by key,
//     ETag and size, flock between processes, resumed .incomplete files,
//     verified), which also serves offline runs;
//   - fetch.SideCache (footers once per node) and fetch.Materializer.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/lrstream/lrstream/fetch"
)

// Pin is one object as listed when the source was opened.
type Pin struct {
	Size int64  `json:"size"`
	ETag string `json:"etag"`
}

// ErrObjectChanged is matched (errors.Is) by errors for an object that is
// no longer the version pinned when the run started (rewritten or
// deleted): a run never mixes two versions of a dataset.
var ErrObjectChanged = errors.New("object changed since the run started")

// Store is one external object store holding a dataset under a root.
type Store interface {
	// ID names the dataset (s3://BUCKET/PREFIX, hf://buckets/NS/NAME/…).
	ID() string
	// Key is the store's full key of a dataset path (for cache names).
	Key(name string) string
	// List lists every object under the root: path relative to the root
	// (checked with ValidKey) → pin. An empty root is an error.
	List(ctx context.Context) (map[string]Pin, error)
	// Get returns a body of the bytes [off, end) of name, of the version
	// pinned at p (ErrObjectChanged otherwise), after the store's own
	// request retries. A body ending early is resumed by the caller with
	// another Get from where it stopped.
	Get(ctx context.Context, name string, p Pin, off, end int64) (io.ReadCloser, error)
}

// Verifier is implemented by stores that can check a downloaded object
// against its pin (S3: the MD5 of a single-part upload's ETag).
type Verifier interface {
	Verify(name string, p Pin, r io.ReaderAt) error
}

// Counter is implemented by stores that count their HTTP requests and
// retried requests (for Stats).
type Counter interface {
	Requests() int64
	Retries() int64
}

// Options configures a Source.
type Options struct {
	// Dir is the store's cache folder (one per store and bucket).
	Dir string
	// Cache: fetch.CacheFull (default) downloads every opened file whole
	// into the cache; fetch.CacheNone streams data shards (data/, videos/)
	// with range requests. Metadata is always cached.
	Cache fetch.CacheMode
	// Offline serves everything from the cache, without any request.
	Offline bool
	// Logger receives debug logs (nil: slog.Default()).
	Logger *slog.Logger
	// Retry bounds the resumes of one transfer (MaxAttempts bodies, the
	// policy's backoff between them).
	Retry fetch.RetryPolicy
	// StallTimeout is the progress deadline of bodies (default
	// fetch.DefaultStallTimeout).
	StallTimeout time.Duration
	// Range tunes streamed files.
	Range fetch.RangeOptions
	// Secrets are removed from every error leaving the source.
	Secrets []string
}

func (o Options) withDefaults() Options {
	o.Retry = o.Retry.WithDefaults()
	if o.Cache == "" {
		o.Cache = fetch.CacheFull
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = fetch.DefaultStallTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Range = o.Range.WithDefaults()
	return o
}

// ValidKey checks a slash-separated key path (a prefix, or an object path
// relative to the root): no empty, "." or ".." segment, no backslash or
// control character.
func ValidKey(p string) error {
	if p == "" {
		return fmt.Errorf("empty path")
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".", "..":
			return fmt.Errorf("%q: empty, \".\" or \"..\" segment", p)
		}
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return fmt.Errorf("%q: control character or backslash", p)
		}
	}
	if path.Clean(p) != p {
		return fmt.Errorf("%q: not a clean path", p)
	}
	return nil
}

// Backoff is the wait before retry number attempt (1-based): MinBackoff
// doubling up to MaxBackoff, half fixed and half random (equal jitter), as
// the Hub source waits.
func Backoff(p fetch.RetryPolicy, attempt int) time.Duration {
	return backoff(p, attempt)
}
