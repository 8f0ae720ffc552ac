package framecache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// DefaultDir is $LRSTREAM_FRAME_CACHE_DIR if set, else lrstream/frames under the user's
// cache directory (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on Linux, so
// ~/.cache/lrstream/frames, next to ~/.cache/huggingface).
func DefaultDir() (string, error) {
	if d := os.Getenv("LRSTREAM_FRAME_CACHE_DIR"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("frame cache directory: %w (set LRSTREAM_FRAME_CACHE_DIR)", err)
	}
	return filepath.Join(base, "lrstream", "frames"), nil
}

const (
	gib           = int64(1) << 30
	maxDefault    = 100 * gib
	minDefault    = gib
	defaultShareD = 4 // the default budget is 1/4 of what the cache could use
)

// DefaultBudget is the budget Open uses when Options.Budget is 0, from the filesystem
// holding dir (or its nearest existing parent): a quarter of what the cache could use —
// the space free to the user plus what the cache's entries already take there — at most
// 100 GiB; when that is under 1 GiB, 1 GiB if the cache could use that much, else all it
// could use. Where the free space is unknown, 1 GiB.
func DefaultBudget(dir string) int64 {
	root := filepath.Join(dir, layoutVersion)
	free, err := freeBytes(nearestDir(root))
	if err != nil {
		return minDefault
	}
	entries, _ := walk(root, time.Time{})
	return defaultBudget(free, sumSizes(entries))
}

func defaultBudget(free, used int64) int64 {
	if free <= 0 && used == 0 {
		return minDefault // unknown (or a full disk, where nothing is written anyway)
	}
	usable := free + used
	return max(min(maxDefault, usable/defaultShareD), min(minDefault, usable))
}

// diskEntry is an entry file found by a walk.
type diskEntry struct {
	path  string
	size  int64
	mtime time.Time
}

func sumSizes(entries []diskEntry) int64 {
	var n int64
	for _, e := range entries {
		n += e.size
	}
	return n
}

// isTemp tells a temporary file (an entry, label, statistics or probe being written).
func isTemp(name string) bool { return strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") }

// walk lists the entry files under root (root/<group>/<file>/<entry>) and removes the
// temporary files last modified before staleBefore (none when it is zero). A missing
// root holds nothing.
func walk(root string, staleBefore time.Time) ([]diskEntry, error) {
	groups, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing %s: %w", root, err)
	}
	var out []diskEntry
	var first error
	for _, g := range groups {
		gp := filepath.Join(root, g.Name())
		if !g.IsDir() {
			removeStale(gp, g, staleBefore)
			continue
		}
		files, err := os.ReadDir(gp)
		if err != nil && first == nil {
			first = fmt.Errorf("listing %s: %w", gp, err)
		}
		for _, f := range files {
			fp := filepath.Join(gp, f.Name())
			if !f.IsDir() {
				removeStale(fp, f, staleBefore)
				continue
			}
			out, err = walkFileDir(out, fp, staleBefore)
			if err != nil && first == nil {
				first = err
			}
		}
	}
	return out, first
}

// walkFileDir appends the entries of one file's directory to out.
func walkFileDir(out []diskEntry, dir string, staleBefore time.Time) ([]diskEntry, error) {
	names, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return out, nil
		}
		return out, fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, n := range names {
		p := filepath.Join(dir, n.Name())
		if _, _, ok := parseEntryName(n.Name()); !ok || !n.Type().IsRegular() {
			removeStale(p, n, staleBefore)
			continue
		}
		info, err := n.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, diskEntry{path: p, size: info.Size(), mtime: info.ModTime()})
	}
	return out, nil
}

// removeStale removes a temporary file last modified before staleBefore.
func removeStale(p string, d fs.DirEntry, staleBefore time.Time) {
	if staleBefore.IsZero() || !isTemp(d.Name()) {
		return
	}
	if info, err := d.Info(); err == nil && info.ModTime().Before(staleBefore) {
		os.Remove(p)
	}
}

// afterCommit counts a published entry of size bytes and evicts when this process's
// estimate passes the budget or it has published a sixteenth of it since its last walk.
func (c *Cache) afterCommit(path string, size int64) {
	u := c.usage.Add(size)
	s := c.sinceWalk.Add(size)
	if u > c.budget || s > c.budget/16 {
		c.evict(path)
	}
}

// evict walks the cache under the flock and, when its entries pass the budget, removes
// the least recently used (oldest mtime) until they take at most 90% of it, never keep.
func (c *Cache) evict(keep string) {
	if !c.evictMu.TryLock() {
		return // another goroutine of this process is at it
	}
	defer c.evictMu.Unlock()
	unlock, err := lockFile(filepath.Join(c.root, ".lock"))
	if err != nil {
		c.log.Debug("frame cache: eviction lock", "err", err)
		return
	}
	defer unlock()
	entries, err := walk(c.root, c.now().Add(-c.staleAfter))
	if err != nil {
		c.log.Debug("frame cache: walking", "dir", c.root, "err", err)
	}
	total := sumSizes(entries)
	if total > c.budget {
		sort.Slice(entries, func(i, j int) bool {
			if !entries[i].mtime.Equal(entries[j].mtime) {
				return entries[i].mtime.Before(entries[j].mtime)
			}
			return entries[i].path < entries[j].path
		})
		target := c.budget / 10 * 9
		for _, e := range entries {
			if total <= target {
				break
			}
			if e.path == keep {
				continue
			}
			if err := os.Remove(e.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				c.log.Debug("frame cache: evicting", "path", e.path, "err", err)
				continue
			}
			total -= e.size
			c.st.evicted.Add(1)
			os.Remove(filepath.Dir(e.path)) // the file's directory, if now empty
		}
	}
	c.usage.Store(total)
	c.sinceWalk.Store(0)
}

// GroupInfo is what the cache holds for one group (dataset).
type GroupInfo struct {
	Group    string
	Entries  int
	Bytes    int64 // on disk
	RawBytes int64 // the payloads' uncompressed size
	LastRun  *RunStats
}

// RunStats is the statistics of the last run over a group, recorded by Close. A run is
// the processes whose uses of the group overlapped in time (the ranks and DataLoader
// workers of one training job, the clients of one serve): each process adds its
// counts when it closes, under the group's lock, to the recorded run if that run was
// still going when the process started using the group, else it starts a new record.
type RunStats struct {
	Start, Time               time.Time // the run's first use of the group, and its last Close
	Processes                 int       // the processes counted
	Hits, Misses              int64
	FramesRead, FramesWritten int64
}

// add merges rs, one process's statistics, into the group's recorded run when the two
// overlapped in time; it returns rs as the run otherwise.
func (last RunStats) add(rs RunStats) RunStats {
	if last.Processes == 0 || last.Time.Before(rs.Start) {
		rs.Processes = 1
		return rs
	}
	last.Processes++
	last.Hits += rs.Hits
	last.Misses += rs.Misses
	last.FramesRead += rs.FramesRead
	last.FramesWritten += rs.FramesWritten
	if rs.Start.Before(last.Start) {
		last.Start = rs.Start
	}
	if rs.Time.After(last.Time) {
		last.Time = rs.Time
	}
	return last
}

const (
	labelFile = "label"
	runFile   = "lastrun.json"
)

// recordRun adds rs, this process's statistics, to the group's lastrun.json (RunStats),
// under the group's lock, and writes it atomically.
func recordRun(groupDir string, rs RunStats) error {
	unlock, err := lockFile(filepath.Join(groupDir, ".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	var last RunStats
	if b, err := os.ReadFile(filepath.Join(groupDir, runFile)); err == nil {
		_ = json.Unmarshal(b, &last) // unreadable: a new record
	}
	b, err := json.Marshal(last.add(rs))
	if err != nil {
		return fmt.Errorf("run statistics: %w", err)
	}
	return writeAtomic(groupDir, runFile, b)
}

// writeAtomic writes name in dir through a temporary file and a rename.
func writeAtomic(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, "."+name+"-*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// List reports what the cache in dir ("" means DefaultDir()) holds, per group, sorted
// by group. A group whose label is missing is shown by its directory's name.
func List(dir string) ([]GroupInfo, error) {
	root, err := rootOf(dir)
	if err != nil {
		return nil, err
	}
	groups, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("frame cache: listing %s: %w", root, err)
	}
	var out []GroupInfo
	for _, g := range groups {
		if !g.IsDir() || g.Name() == memoDir {
			continue
		}
		gi, err := groupInfo(filepath.Join(root, g.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, gi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// groupInfo sums one group directory's entries, reading each entry's footer for its raw size.
func groupInfo(gdir string) (GroupInfo, error) {
	gi := GroupInfo{Group: "(no label) " + filepath.Base(gdir)}
	if b, err := os.ReadFile(filepath.Join(gdir, labelFile)); err == nil {
		gi.Group = string(b)
	}
	if b, err := os.ReadFile(filepath.Join(gdir, runFile)); err == nil {
		var rs RunStats
		if json.Unmarshal(b, &rs) == nil {
			gi.LastRun = &rs
		}
	}
	entries, err := groupEntries(gdir)
	if err != nil {
		return gi, err
	}
	for _, e := range entries {
		gi.Entries++
		gi.Bytes += e.size
		gi.RawBytes += rawSize(e.path, e.size)
	}
	return gi, nil
}

// groupEntries lists the entries of one group directory.
func groupEntries(gdir string) ([]diskEntry, error) {
	files, err := os.ReadDir(gdir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("frame cache: listing %s: %w", gdir, err)
	}
	var out []diskEntry
	for _, f := range files {
		if !f.IsDir() {
			continue
		}
		if out, err = walkFileDir(out, filepath.Join(gdir, f.Name()), time.Time{}); err != nil {
			return out, fmt.Errorf("frame cache: %w", err)
		}
	}
	return out, nil
}

// rawSize is the raw payload bytes an entry's footer records (0 when unreadable).
func rawSize(path string, size int64) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var b [footerSize]byte
	if size < footerSize {
		return 0
	}
	if _, err := f.ReadAt(b[:], size-footerSize); err != nil {
		return 0
	}
	ft, err := parseFooter(b[:])
	if err != nil {
		return 0
	}
	return int64(ft.raw)
}

// Clear removes the entries of group from the cache in dir ("" means DefaultDir()), or
// every entry when group is "", under the eviction lock, and returns how many entries and
// bytes it removed. Readers that have an entry open keep reading it; a writer publishing
// into the group while it is cleared loses its entry (without an error), and entries
// published after Clear stay.
func Clear(dir, group string) (entries int, bytes int64, err error) {
	root, err := rootOf(dir)
	if err != nil {
		return 0, 0, err
	}
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	unlock, err := lockFile(filepath.Join(root, ".lock"))
	if err != nil {
		return 0, 0, fmt.Errorf("frame cache: %w", err)
	}
	defer unlock()
	var gdirs []string
	if group != "" {
		gdirs = []string{filepath.Join(root, hashHex(group, 16))}
	} else {
		list, err := os.ReadDir(root)
		if err != nil {
			return 0, 0, fmt.Errorf("frame cache: listing %s: %w", root, err)
		}
		for _, g := range list {
			if g.IsDir() {
				gdirs = append(gdirs, filepath.Join(root, g.Name()))
			}
		}
	}
	for _, gd := range gdirs {
		found, _ := groupEntries(gd)
		entries += len(found)
		bytes += sumSizes(found)
		if err := removeAll(gd); err != nil {
			return entries, bytes, fmt.Errorf("frame cache: clearing %s: %w", gd, err)
		}
	}
	return entries, bytes, nil
}

// removeAll removes dir and what it holds, trying again when a writer of another
// process created a file in it meanwhile (the directory is then not empty).
func removeAll(dir string) error {
	var err error
	for range 10 {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("%w (a process keeps writing to it)", err)
}

func rootOf(dir string) (string, error) {
	if dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return "", err
		}
		dir = d
	}
	return filepath.Join(dir, layoutVersion), nil
}
