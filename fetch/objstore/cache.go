package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/lrstream/lrstream/fetch"
)

// cache is the node-local cache of one bucket of one store:
//
//	<root>/blobs/<id><ext>              an object's content; id is the SHA-256 of
//	                                    (key, ETag, size), ext the key's extension
//	<root>/blobs/<id><ext>.incomplete   a download in progress (resumed)
//	<root>/locks/<id>.lock              flock held while downloading
//	<root>/listings/<sha256(ID)>.json   the pins of the last listing (offline)
//	<root>/lrstream-<kind>/…            side cache entries (parquet footers)
//
// No object key reaches a file name: every name is a hash (plus a checked
// extension).
type cache struct {
	root string
}

// blobID names the blob of an object version.
func (s *Source) blobID(name string, p Pin) string {
	h := sha256.Sum256([]byte(s.store.Key(name) + "\x00" + p.ETag + "\x00" + strconv.FormatInt(p.Size, 10)))
	return hex.EncodeToString(h[:]) + safeExt(name)
}

// safeExt is name's extension when it is short and plain (FFmpeg uses it
// as a format hint), else "".
func safeExt(name string) string {
	ext := path.Ext(name)
	if len(ext) < 2 || len(ext) > 16 {
		return ""
	}
	for _, c := range ext[1:] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return ""
		}
	}
	return ext
}

func (c *cache) blobPath(id string) string { return filepath.Join(c.root, "blobs", id) }

// open opens a complete blob of the given size.
func (c *cache) open(id, name string, size int64) (fetch.File, bool) {
	f, err := os.Open(c.blobPath(id))
	if err != nil {
		return nil, false
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() != size {
		f.Close()
		return nil, false
	}
	return &localFile{f: f, name: name, size: size}, true
}

type localFile struct {
	f    *os.File
	name string
	size int64
}

func (l *localFile) ReadAt(p []byte, off int64) (int, error) { return l.f.ReadAt(p, off) }
func (l *localFile) Close() error                            { return l.f.Close() }
func (l *localFile) Size() int64                             { return l.size }
func (l *localFile) Name() string                            { return l.name }

// download fetches name whole into the cache, once across processes: the
// blob's lock is held while downloading, and a finished blob found after
// taking it is used as is. An interrupted download is resumed from its
// .incomplete file; the blob appears (renamed) only once its size — and,
// when the ETag is a plain MD5, its MD5 — check out.
func (s *Source) download(ctx context.Context, name string, p Pin) error {
	id := s.blobID(name, p)
	blob := s.cache.blobPath(id)
	release, err := fetch.LockFile(ctx, filepath.Join(s.cache.root, "locks", id+".lock"), func() {
		s.log.Debug("objstore: waiting for another process downloading", "file", name)
	})
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer release()
	if st, err := os.Stat(blob); err == nil && st.Size() == p.Size {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	tmp := blob + ".incomplete"
	if err := s.fetchTo(ctx, name, p, tmp); err != nil {
		if errors.Is(err, ErrObjectChanged) || errors.Is(err, fetch.ErrHashMismatch) {
			os.Remove(tmp)
		}
		return err
	}
	if err := os.Rename(tmp, blob); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

// fetchTo downloads the object into the file p (resuming what p holds),
// synced to disk, and verifies it.
func (s *Source) fetchTo(ctx context.Context, name string, pin Pin, p string) error {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	have := st.Size()
	if have > pin.Size {
		have = 0
	}
	if err := f.Truncate(have); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if have > 0 {
		s.log.Debug("objstore: resuming download", "file", name, "at", have)
	}
	if err := s.stream(ctx, name, pin, have, pin.Size, f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return s.verifyFile(f, name, pin)
}

// verifyFile checks the size, and the content when the store can
// (Verifier).
func (s *Source) verifyFile(f *os.File, name string, p Pin) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("verify %s: %w", name, err)
	}
	if st.Size() != p.Size {
		return fmt.Errorf("verify %s: %w: got %d bytes, want %d", name, fetch.ErrHashMismatch, st.Size(), p.Size)
	}
	if v, ok := s.store.(Verifier); ok {
		if err := v.Verify(name, p, f); err != nil {
			return fmt.Errorf("verify %s: %w: %w", name, fetch.ErrHashMismatch, err)
		}
	}
	return nil
}

// Materialize makes name available at a local path: the cached blob (read
// from the cache or downloaded into it), or, for data shards with
// CacheNone, a private temporary download that release removes.
func (s *Source) Materialize(ctx context.Context, name string) (string, func(), error) {
	noop := func() {}
	p, err := s.pin(name)
	if err != nil {
		return "", nil, err
	}
	id := s.blobID(name, p)
	if st, err := os.Stat(s.cache.blobPath(id)); err == nil && st.Mode().IsRegular() && st.Size() == p.Size {
		s.stats.cacheHits.Add(1)
		return s.cache.blobPath(id), noop, nil
	}
	if s.opts.Offline {
		return "", nil, fmt.Errorf("%s: %s is not in the cache (offline): %w", s.ID(), name, fetch.ErrOffline)
	}
	if s.opts.Cache != fetch.CacheNone || !fetch.IsShard(name) {
		if err := s.download(ctx, name, p); err != nil {
			return "", nil, s.scrub(fmt.Errorf("materialize %s in %s: %w", name, s.ID(), err))
		}
		return s.cache.blobPath(id), noop, nil
	}
	tmp, err := os.CreateTemp("", "lrstream-*"+safeExt(name)) // 0600
	if err != nil {
		return "", nil, err
	}
	tmp.Close()
	done := false
	release := func() {
		if !done {
			done = true
			os.Remove(tmp.Name())
		}
	}
	if err := s.fetchTo(ctx, name, p, tmp.Name()); err != nil {
		release()
		return "", nil, s.scrub(fmt.Errorf("materialize %s in %s: %w", name, s.ID(), err))
	}
	return tmp.Name(), release, nil
}

// listing is the cached result of a listing, for offline use.
type listing struct {
	ID   string         `json:"id"`
	Pins map[string]Pin `json:"pins"`
}

func (c *cache) listingPath(id string) string {
	h := sha256.Sum256([]byte(id))
	return filepath.Join(c.root, "listings", hex.EncodeToString(h[:])+".json")
}

// writeListing keeps pins as the dataset's last listing (offline runs)
// and in its history of listings, named by their digest (a resume refused
// after a change names the objects that changed: Source.PastPins); the
// history keeps the maxListings most recent digests of the dataset.
func (c *cache) writeListing(id string, pins map[string]Pin) error {
	b, err := json.Marshal(listing{ID: id, Pins: pins})
	if err != nil {
		return err
	}
	hist := c.historyPath(id, PinDigest(pins))
	if err := writeAtomic(hist, b); err != nil {
		return err
	}
	c.pruneHistory(id)
	return writeAtomic(c.listingPath(id), b)
}

// maxListings is how many listings of a dataset the history keeps.
const maxListings = 16

// historyPath is the file of the listing of dataset id with digest rev.
func (c *cache) historyPath(id, rev string) string {
	p := c.listingPath(id)
	return strings.TrimSuffix(p, ".json") + "-" + rev + ".json"
}

// history returns the digests of the dataset's listings in the history,
// the most recently written first.
func (c *cache) history(id string) []string {
	base := strings.TrimSuffix(c.listingPath(id), ".json") + "-"
	paths, _ := filepath.Glob(base + "*.json")
	type ent struct {
		rev string
		mod int64
	}
	var ents []ent
	for _, p := range paths {
		rev := strings.TrimSuffix(strings.TrimPrefix(p, base), ".json")
		st, err := os.Stat(p)
		if err != nil || !isDigest(rev) {
			continue
		}
		ents = append(ents, ent{rev, st.ModTime().UnixNano()})
	}
	sort.SliceStable(ents, func(i, j int) bool { return ents[i].mod > ents[j].mod })
	out := make([]string, len(ents))
	for i, e := range ents {
		out[i] = e.rev
	}
	return out
}

// pruneHistory removes all but the maxListings most recent listings.
func (c *cache) pruneHistory(id string) {
	revs := c.history(id)
	for _, rev := range revs[min(len(revs), maxListings):] {
		os.Remove(c.historyPath(id, rev))
	}
}

// isDigest reports whether s looks like a PinDigest (40 lower-case hex).
func isDigest(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// writeAtomic writes b to p through a temporary file and a rename (a
// rewrite of the same content refreshes its modification time).
func writeAtomic(p string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// readListing returns the pins of the last listing of the dataset id.
func (c *cache) readListing(id string) (map[string]Pin, error) {
	p := c.listingPath(id)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no listing in the cache %s (offline): run once with network access: %w", c.root, fetch.ErrOffline)
	}
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	return parseListing(p, id, b)
}

// readPastListing returns the pins of the listing of dataset id whose
// digest is rev, from the history.
func (c *cache) readPastListing(id, rev string) (map[string]Pin, error) {
	if !isDigest(rev) {
		return nil, fmt.Errorf("%q is not a listing digest", rev)
	}
	p := c.historyPath(id, rev)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	pins, err := parseListing(p, id, b)
	if err == nil && PinDigest(pins) != rev {
		err = fmt.Errorf("cache: listing %s has digest %s", p, PinDigest(pins))
	}
	return pins, err
}

// parseListing checks a cached listing (file p) of dataset id.
func parseListing(p, id string, b []byte) (map[string]Pin, error) {
	var l listing
	if err := json.Unmarshal(b, &l); err != nil || l.ID != id || len(l.Pins) == 0 {
		return nil, fmt.Errorf("cache: damaged listing %s (offline): %w", p, fetch.ErrOffline)
	}
	for name, pin := range l.Pins {
		if pin.Size < 0 || pin.ETag == "" {
			return nil, fmt.Errorf("cache: damaged listing %s (offline): %s has no size or ETag: %w", p, name, fetch.ErrOffline)
		}
		if err := ValidKey(name); err != nil {
			return nil, fmt.Errorf("cache: listing %s: %w: %w", p, fetch.ErrUnsafePath, err)
		}
	}
	return l.Pins, nil
}

// ReadSide returns the side cache entry of (kind, name, size) for the
// pinned object, or false.
func (s *Source) ReadSide(kind, name string, size int64) ([]byte, bool) {
	p, ok := s.pins[name]
	if !ok || p.Size != size || fetch.ValidateRemotePath(kind) != nil {
		return nil, false
	}
	data, ok := fetch.ReadSideEntry(filepath.Join(s.cache.root, "lrstream-"+kind), fetch.SideKey(kind, "objstore", s.store.Key(name), size, p.ETag))
	if ok {
		s.stats.sideHits.Add(1)
	}
	return data, ok
}

// WriteSide keeps a side cache entry; failures are only logged.
func (s *Source) WriteSide(kind, name string, size int64, data []byte) {
	p, ok := s.pins[name]
	if !ok || p.Size != size || fetch.ValidateRemotePath(kind) != nil {
		return
	}
	if err := fetch.WriteSideEntry(filepath.Join(s.cache.root, "lrstream-"+kind), fetch.SideKey(kind, "objstore", s.store.Key(name), size, p.ETag), data); err != nil {
		s.log.Debug("objstore: side cache not written", "kind", kind, "file", name, "err", err)
	}
}
