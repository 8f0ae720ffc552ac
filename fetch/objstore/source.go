package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lrstream/lrstream/fetch"
)

// Stats counts a source's work.
type Stats struct {
	// Requests is the number of HTTP requests sent (retries included).
	Requests int64
	// Retries counts retried requests and resumed bodies.
	Retries int64
	// BytesFetched is the number of object bytes received.
	BytesFetched int64
	// CacheHits counts files served from the node-local cache.
	CacheHits int64
	// SideHits counts footers read from the side cache.
	SideHits int64
}

type counters struct {
	resumes, bytes, cacheHits, sideHits atomic.Int64
}

// Source is a fetch.Source over the objects of a Store, pinned at Open.
type Source struct {
	store  Store
	opts   Options
	cache  *cache
	log    *slog.Logger
	pins   map[string]Pin
	names  []string // sorted
	digest string
	stats  counters
	// fellBack: the store was unreachable at Open; the cache serves the run.
	fellBack bool
}

// Open lists the store's objects and pins them (offline: the listing of
// the last online run, from the cache).
func Open(ctx context.Context, store Store, opts Options) (*Source, error) {
	opts = opts.withDefaults()
	s := &Source{store: store, opts: opts, cache: &cache{root: opts.Dir}, log: opts.Logger}
	if opts.Offline {
		pins, err := s.cache.readListing(store.ID())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", store.ID(), err)
		}
		s.setPins(pins)
		return s, nil
	}
	pins, err := store.List(ctx)
	if err != nil {
		return s.fallback(err)
	}
	for name := range pins {
		if err := ValidKey(name); err != nil {
			return nil, fmt.Errorf("list %s: %w: %w", store.ID(), fetch.ErrUnsafePath, err)
		}
	}
	if len(pins) == 0 {
		return nil, fmt.Errorf("%s: no objects under this prefix: %w", store.ID(), fs.ErrNotExist)
	}
	s.setPins(pins)
	if err := s.cache.writeListing(store.ID(), pins); err != nil {
		s.log.Debug("objstore: listing not cached", "dataset", store.ID(), "err", err)
	}
	return s, nil
}

// fallback is Open's answer to a failed listing: when the store could not
// be reached at all (no connection, DNS failure, within the store's retry
// budget) and the cache holds a listing of the dataset, the source serves
// that cached version, from the cache only, for the whole run — as the Hub
// source falls back to its cached snapshot — and says so in a warning.
// Any answer of the store (403, 404, 5xx) is reported instead.
func (s *Source) fallback(err error) (*Source, error) {
	if !unreachable(err) {
		return nil, s.scrub(err)
	}
	pins, cerr := s.cache.readListing(s.store.ID())
	if cerr != nil {
		return nil, s.scrub(fmt.Errorf("%w (and no usable listing in the cache: %v)", err, cerr))
	}
	s.log.Warn("objstore: the store is unreachable; using the cached listing and the cache only for this run",
		"dataset", s.store.ID(), "revision", PinDigest(pins), "err", s.scrub(err))
	s.opts.Offline, s.fellBack = true, true
	s.setPins(pins)
	return s, nil
}

// unreachable reports whether err is a failure to reach the store at all.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}

// UsingCachedListing reports whether the store was unreachable at Open and
// the source serves the cached listing from the cache.
func (s *Source) UsingCachedListing() bool { return s.fellBack }

func (s *Source) setPins(pins map[string]Pin) {
	s.pins = pins
	s.names = make([]string, 0, len(pins))
	for n := range pins {
		s.names = append(s.names, n)
	}
	sort.Strings(s.names)
	s.digest = PinDigest(pins)
}

// PinDigest is the SHA-256 (40 hex digits, the length of a commit) of the
// sorted pins: "path\x00size\x00etag\n" per object.
func PinDigest(pins map[string]Pin) string {
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

// ID names the dataset (the store's ID).
func (s *Source) ID() string { return s.store.ID() }

// Revision is the digest of the pins (40 hex digits): it changes whenever
// any object changes.
func (s *Source) Revision() string { return s.digest }

// Pins returns a copy of the pinned objects (relative path → pin).
func (s *Source) Pins() map[string]Pin {
	out := make(map[string]Pin, len(s.pins))
	for k, v := range s.pins {
		out[k] = v
	}
	return out
}

// CacheDir is the store's cache folder.
func (s *Source) CacheDir() string { return s.cache.root }

// Stats returns counters of the work done so far.
func (s *Source) Stats() Stats {
	st := Stats{Retries: s.stats.resumes.Load(), BytesFetched: s.stats.bytes.Load(),
		CacheHits: s.stats.cacheHits.Load(), SideHits: s.stats.sideHits.Load()}
	if c, ok := s.store.(Counter); ok {
		st.Requests, st.Retries = c.Requests(), st.Retries+c.Retries()
	}
	return st
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
		wrap := func(err error) error { return s.scrub(fmt.Errorf("%s: %w", s.ID(), err)) }
		get := func(ctx context.Context, off, end int64) ([]byte, error) {
			return s.getRange(ctx, name, p, off, end)
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

// Close does nothing: files opened stay usable.
func (s *Source) Close() error { return nil }

// scrub removes the secrets from an error's message.
func (s *Source) scrub(err error) error { return fetch.Scrub(err, s.opts.Secrets...) }

func backoff(p fetch.RetryPolicy, attempt int) time.Duration {
	d := p.MinBackoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	half := d / 2
	return half + rand.N(half+1)
}

var (
	_ fetch.Source       = (*Source)(nil)
	_ fetch.SideCache    = (*Source)(nil)
	_ fetch.Materializer = (*Source)(nil)
)
