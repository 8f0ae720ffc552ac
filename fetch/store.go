package fetch

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Building blocks shared by the sources of other stores (fetch/s3,
// fetch/hfbucket): the Hub's path rules, side cache entries, cache locks and
// error scrubbing, exported so that each store's package reuses them.

// Materializer is implemented by sources that make one of their files
// available at a local path themselves (a cached blob, or a private
// temporary download); Materialize uses it. release must be idempotent.
type Materializer interface {
	Materialize(ctx context.Context, name string) (path string, release func(), err error)
}

// IsShard reports whether a dataset path is a data shard (under data/ or
// videos/), the files CacheNone streams rather than caches.
func IsShard(name string) bool { return isShard(name) }

// SideKey is the side cache entry name of one file's data of a kind: a
// SHA-256 of its identity (the store's pin of the file — commit or ETag —,
// its path and size), so no remote name reaches the file system.
func SideKey(kind, pin, name string, size int64, etag string) string {
	return sideKey(kind, pin, name, size, etag)
}

// ReadSideEntry reads the side cache entry dir/key and checks its
// checksum; a damaged entry is removed and reported as absent.
func ReadSideEntry(dir, key string) ([]byte, bool) {
	p := filepath.Join(dir, key)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	data, ok := parseSide(b)
	if !ok {
		os.Remove(p)
		return nil, false
	}
	return data, true
}

// WriteSideEntry writes the side cache entry dir/key atomically (temporary
// file and rename) and trims dir to SideKindMax. Entries larger than
// SideEntryMax are not kept.
func WriteSideEntry(dir, key string, data []byte) error {
	if len(data) > SideEntryMax {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	_, err = tmp.Write(append(append([]byte(sideMagic), sum[:]...), data...))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, key))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return trimSide(dir, SideKindMax)
}

// LockFile takes an exclusive inter-process lock (flock) on the file p,
// creating it, polling so that ctx can cancel the wait; waiting is called
// once if the lock is held by someone else. The returned function releases
// it.
func LockFile(ctx context.Context, p string, waiting func()) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	delay := 10 * time.Millisecond
	told := false
	for {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		if ok {
			return func() { unlock(f); f.Close() }, nil
		}
		if !told && waiting != nil {
			waiting()
			told = true
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", p, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// Scrub replaces every occurrence of the secrets in err's message with
// "[redacted]", keeping the error chain for errors.Is/As. Empty secrets
// are ignored.
func Scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	if msg == err.Error() {
		return err
	}
	return &scrubbedError{err: err, msg: msg}
}

// ParseContentRange parses a Content-Range header "bytes START-END/TOTAL"
// (TOTAL may be "*", returned as -1); ok is false for anything else.
func ParseContentRange(v string) (start, end, total int64, ok bool) {
	return parseContentRange(v)
}

// EnvTrue is huggingface_hub's boolean rule for environment variables:
// 1, ON, YES or TRUE in any case, nothing else.
func EnvTrue(v string) bool { return envTrue(v) }

// ExpandPath expands a leading ~ and $VAR/${VAR} as Python's
// os.path.expandvars(os.path.expanduser(p)) does.
func ExpandPath(p string, getenv func(string) string) string { return expandPath(p, getenv) }

// WithDefaults fills zero fields with DefaultRetryPolicy's values.
func (p RetryPolicy) WithDefaults() RetryPolicy { return p.withDefaults() }

// NextLink returns the target of the rel="next" link of a Link header, or
// "" (the Hub's pagination).
func NextLink(v string) string { return nextLink(v) }
