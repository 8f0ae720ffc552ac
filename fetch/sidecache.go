package fetch

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// SideCache is implemented by sources that keep small data derived from
// their files — parquet footers — in their on-disk cache, where the other
// processes of the node and later runs find it. An entry is the data of
// one file at the source's pinned revision: the same name, size and
// listed content hash at the same commit is the same content.
type SideCache interface {
	// ReadSide returns the data kept for (kind, name, size), or false when
	// there is none (or it is damaged).
	ReadSide(kind, name string, size int64) ([]byte, bool)
	// WriteSide keeps data for (kind, name, size). It never fails the
	// caller: the side cache is an optimisation, and a cache that cannot be
	// written (read-only, full) is skipped.
	WriteSide(kind, name string, size int64, data []byte)
}

// Side cache bounds: an entry larger than SideEntryMax is not kept, and
// when the kind's entries exceed SideKindMax bytes the oldest are removed.
const (
	SideEntryMax = 64 << 20
	SideKindMax  = 1 << 30
)

// sideMagic starts every side cache entry; the sha256 of the data follows.
const sideMagic = "lrstream-side-1\n"

// sideDir is the directory of a kind's entries: inside the dataset's
// cache folder, beside blobs/ and snapshots/ (huggingface_hub's
// scan_cache_dir ignores it).
func (c *repoCache) sideDir(kind string) string {
	return filepath.Join(c.dir, "lrstream-"+kind)
}

// sideKey is the entry's file name: a hash of its identity (kind, commit,
// path, size, and the listed content hash — the ETag — when the source has
// listed the file), so no remote name can make it escape the directory.
func sideKey(kind, sha, name string, size int64, etag string) string {
	h := sha256.Sum256([]byte(kind + "\x00" + sha + "\x00" + name + "\x00" + strconv.FormatInt(size, 10) + "\x00" + etag))
	return hex.EncodeToString(h[:])
}

// listedHash returns the content hash the listing gave for name, or "".
func (h *Hub) listedHash(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.entries[name]; ok {
		return e.blobHash()
	}
	return ""
}

// ReadSide returns the side cache entry of (kind, name, size) at the
// pinned commit. An entry whose checksum does not match is removed.
func (h *Hub) ReadSide(kind, name string, size int64) ([]byte, bool) {
	if ValidateRemotePath(name) != nil || ValidateRemotePath(kind) != nil {
		return nil, false
	}
	p := filepath.Join(h.cache.sideDir(kind), sideKey(kind, h.sha, name, size, h.listedHash(name)))
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	data, ok := parseSide(b)
	if !ok {
		h.log.Debug("hub: damaged side cache entry removed", "kind", kind, "file", name)
		os.Remove(p)
		return nil, false
	}
	h.stats.sideHits.Add(1)
	return data, true
}

// parseSide checks an entry's magic and checksum and returns its data.
func parseSide(b []byte) ([]byte, bool) {
	if !bytes.HasPrefix(b, []byte(sideMagic)) || len(b) < len(sideMagic)+sha256.Size {
		return nil, false
	}
	sum, data := b[len(sideMagic):len(sideMagic)+sha256.Size], b[len(sideMagic)+sha256.Size:]
	got := sha256.Sum256(data)
	if !bytes.Equal(sum, got[:]) {
		return nil, false
	}
	return data, true
}

// WriteSide keeps data as the side cache entry of (kind, name, size) at the
// pinned commit: written to a temporary file in the same directory and
// renamed, so readers never see a partial entry. When the entry is too
// large or the cache cannot be written, nothing is kept.
func (h *Hub) WriteSide(kind, name string, size int64, data []byte) {
	if len(data) > SideEntryMax || ValidateRemotePath(name) != nil || ValidateRemotePath(kind) != nil {
		return
	}
	if err := h.writeSide(kind, name, size, data); err != nil {
		h.log.Debug("hub: side cache not written", "kind", kind, "file", name, "err", err)
	}
}

func (h *Hub) writeSide(kind, name string, size int64, data []byte) error {
	dir := h.cache.sideDir(kind)
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
		err = os.Rename(tmp.Name(), filepath.Join(dir, sideKey(kind, h.sha, name, size, h.listedHash(name))))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return trimSide(dir, SideKindMax)
}

// trimSide removes the oldest entries of dir (by modification time) until
// they take at most max bytes. Temporary files of running writers are left.
func trimSide(dir string, max int64) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	type entry struct {
		name string
		size int64
		mod  int64
	}
	var es []entry
	var total int64
	for _, e := range ents {
		if !e.Type().IsRegular() || len(e.Name()) != 2*sha256.Size {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		es = append(es, entry{e.Name(), info.Size(), info.ModTime().UnixNano()})
		total += info.Size()
	}
	if total <= max {
		return nil
	}
	sort.Slice(es, func(i, j int) bool { return es[i].mod < es[j].mod })
	for _, e := range es {
		if total <= max {
			break
		}
		if err := os.Remove(filepath.Join(dir, e.name)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("trim side cache: %w", err)
		}
		total -= e.size
	}
	return nil
}
