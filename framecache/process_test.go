//go:build linux

package framecache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lrstream/lrstream/internal/testtmpfs"
	"golang.org/x/sys/unix"
)

// The tests re-execute the test binary as a child process with these variables set.
const (
	childEnv   = "FRAMECACHE_TEST_CHILD" // the child's job
	childDir   = "FRAMECACHE_TEST_DIR"
	childID    = "FRAMECACHE_TEST_ID"
	childReady = "FRAMECACHE_TEST_READY" // a file the child creates when it is ready to be killed
)

func TestMain(m *testing.M) {
	switch job := os.Getenv(childEnv); job {
	case "":
		os.Exit(m.Run())
	case "readwrite":
		id, _ := strconv.Atoi(os.Getenv(childID))
		c, err := Open(Options{Dir: os.Getenv(childDir), Budget: rwBudget})
		if err == nil {
			_, err = exercise(c, id, rwIters)
		}
		exitChild(err)
	case "slowwrite":
		exitChild(slowWrite(os.Getenv(childDir), os.Getenv(childReady)))
	case "diskfull":
		signal.Ignore(syscall.SIGXFSZ) // writes past the limit then fail with EFBIG
		lim := &unix.Rlimit{Cur: 600 << 10, Max: 600 << 10}
		err := unix.Setrlimit(unix.RLIMIT_FSIZE, lim)
		if err == nil {
			err = diskFull(os.Getenv(childDir))
		}
		exitChild(err)
	default:
		exitChild(fmt.Errorf("unknown child job %q", job))
	}
}

func exitChild(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// child starts the test binary as a child doing job in dir.
func child(t *testing.T, job, dir string, env ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, childEnv+"="+job, childDir+"="+dir)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stderr
}

const (
	rwFiles    = 3
	rwSegments = 4
	rwRecords  = 8
	rwSize     = 40_000
	rwBudget   = 1 << 20 // a few entries: evictions happen under the readers
	rwIters    = 40
)

// exercise looks up random segments of a few files and checks every byte of each hit;
// on a miss it writes the segment. It returns the number of hits.
func exercise(c *Cache, id, iters int) (int, error) {
	rng := rand.New(rand.NewPCG(uint64(id), 7))
	hits := 0
	for range iters {
		file := fmt.Sprintf("file%d", rng.IntN(rwFiles))
		k := float64(rng.IntN(rwSegments))
		r, err := c.Lookup("group", file, k+0.35)
		if err != nil {
			return hits, err
		}
		if r == nil {
			w := c.Create("group", file, k, []byte(file))
			for _, rec := range makeRecords(file, k, rwRecords, rwSize) {
				w.Add(rec.pts, rec.payload)
			}
			if err := w.Commit(k + 0.9); err != nil {
				return hits, err
			}
			continue
		}
		hits++
		if err := checkSegment(r, file, k); err != nil {
			return hits, err
		}
	}
	if !c.Writable() {
		return hits, errors.New("the cache degraded to read-only")
	}
	return hits, c.Close()
}

// checkSegment reads a segment written by exercise and checks every record.
func checkSegment(r *Reader, file string, k float64) error {
	defer r.Close()
	if r.Start() != k || r.Covered() != k+0.9 || string(r.Meta()) != file || r.Len() != rwRecords {
		return fmt.Errorf("%s: entry [%v, %v] meta %q len %d, want [%v, %v]", file, r.Start(), r.Covered(), r.Meta(), r.Len(), k, k+0.9)
	}
	for i := 0; ; i++ {
		pts, p, err := r.Next()
		if errors.Is(err, io.EOF) {
			if i != rwRecords {
				return fmt.Errorf("%s [%v]: %d records", file, k, i)
			}
			return nil
		}
		if err != nil {
			return err
		}
		want := k + float64(i)/10
		if pts != want || !bytes.Equal(p, payload(file, want, rwSize)) {
			return fmt.Errorf("%s [%v] record %d: pts %v, payload differs: %v", file, k, i, pts, !bytes.Equal(p, payload(file, want, rwSize)))
		}
	}
}

// TestConcurrentProcesses: three processes and, in this one, three goroutines on each
// of two Caches read and write the same small cache at once, with evictions under the
// readers; every byte read is checked.
func TestConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	var cmds []*exec.Cmd
	var errs []*bytes.Buffer
	for id := range 3 {
		cmd, stderr := child(t, "readwrite", dir, childID+"="+strconv.Itoa(id))
		cmds = append(cmds, cmd)
		errs = append(errs, stderr)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var hits int
	var caches []*Cache
	for ci := range 2 {
		c, _ := openTest(t, Options{Dir: dir, Budget: rwBudget})
		caches = append(caches, c)
		for g := range 3 {
			wg.Go(func() {
				h, err := exercise(c, 100+10*ci+g, rwIters)
				mu.Lock()
				defer mu.Unlock()
				hits += h
				if err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Go(func() { // Clears while the others read and write
		for range 4 {
			time.Sleep(20 * time.Millisecond)
			if _, _, err := Clear(dir, "group"); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child %d: %v: %s", i, err, errs[i])
		}
	}
	var evicted, written int64
	for _, c := range caches {
		evicted += c.Stats().Evicted
		written += c.Stats().EntriesWritten
	}
	if hits == 0 || evicted == 0 || written == 0 {
		t.Fatalf("%d hits, %d entries written, %d evicted in this process: not exercised", hits, written, evicted)
	}
	if tmp := tempFiles(t, dir); len(tmp) != 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}
	c, _ := openTest(t, Options{Dir: dir, Budget: rwBudget})
	c.evict("")
	if u := c.usage.Load(); u > rwBudget {
		t.Fatalf("%d bytes after eviction, budget %d", u, rwBudget)
	}
	t.Logf("this process: %d hits, %d entries written, %d evicted", hits, written, evicted)
}

// slowWrite writes an entry slowly, creating ready after a few records, until killed.
// It writes synchronously (each record to the temporary file as it is added), so that
// the kill lands in the middle of a file; a background writer's entry is in memory
// until committed, and its publication writes the file the same way.
func slowWrite(dir, ready string) error {
	c, err := Open(Options{Dir: dir, MaxPending: -1})
	if err != nil {
		return err
	}
	w := c.Create("group", "file", 0, nil)
	if w == nil {
		return errors.New("cache not writable")
	}
	for i := range 10_000 {
		w.Add(float64(i), payload("file", float64(i), 10_000))
		if i == 3 {
			if err := os.WriteFile(ready, nil, 0o600); err != nil {
				return err
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("not killed")
}

// TestKilledWriter: a writer killed (SIGKILL) mid-entry leaves no entry, only a temporary
// file that a later Open removes once stale.
func TestKilledWriter(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd, stderr := child(t, "slowwrite", dir, childReady+"="+ready)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("child never ready: %s", stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child: %v, want killed", err)
	}
	tmp := tempFiles(t, dir)
	if len(tmp) != 1 {
		t.Fatalf("temporary files %v, want the killed writer's", tmp)
	}
	c, _ := openTest(t, Options{Dir: dir})
	for _, at := range []float64{0, 1, 3} {
		if r, _ := c.Lookup("group", "file", at); r != nil {
			t.Fatalf("Lookup(%v) hit an entry of a killed writer", at)
		}
	}
	if n := len(entryFiles(t, dir)); n != 0 {
		t.Fatalf("%d entries", n)
	}
	if left := tempFiles(t, dir); len(left) != 1 {
		t.Fatalf("a fresh temporary file was removed: %v", left)
	}
	old := time.Now().Add(-staleTemp - time.Minute)
	os.Chtimes(tmp[0], old, old)
	openTest(t, Options{Dir: dir})
	if left := tempFiles(t, dir); len(left) != 0 {
		t.Fatalf("stale temporary files left after Open: %v", left)
	}
}

// diskFull fills the filesystem (or file size limit) holding dir with an entry: the
// cache must degrade with one warning, the writer do nothing, and reads go on.
func diskFull(dir string) error {
	h := &warnCounter{}
	c, err := Open(Options{Dir: dir, Budget: 1 << 30, Log: slogNew(h)})
	if err != nil {
		return err
	}
	if w := h.warnings(); len(w) != 0 || !c.Writable() {
		return fmt.Errorf("warnings before the disk is full: %q", w)
	}
	small := makeRecords("small", 0, 5, 1000)
	ws := c.Create("g", "small", 0, nil)
	for _, r := range small {
		ws.Add(r.pts, r.payload)
	}
	if err := ws.Commit(1); err != nil {
		return err
	}
	c.Flush() // entries are published in the background
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 460_800)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	for _, codec := range []string{"s2", "none"} { // a second Cache finds the disk full at Open
		c2 := c
		if codec != "s2" {
			if c2, err = Open(Options{Dir: dir, Budget: 1 << 30, Codec: codec, Log: slogNew(h)}); err != nil {
				return err
			}
		}
		w := c2.Create("g", "big-"+codec, 0, nil)
		for i := range 5 {
			w.Add(float64(i), big)
		}
		if err := w.Commit(5); err != nil {
			return fmt.Errorf("Commit on a full disk: %w", err)
		}
		c2.Flush()
		if c2.Writable() || c2.Create("g", "other", 0, nil) != nil {
			return errors.New("still writable after a full disk")
		}
	}
	if w := h.warnings(); len(w) != 2 || !strings.Contains(w[0], "cannot be written") {
		return fmt.Errorf("warnings %q, want one per Cache", w)
	}
	r, _ := c.Lookup("g", "small", 0.5)
	if r == nil {
		return errors.New("the entry written before the disk filled is not served")
	}
	got, err := readAll(r)
	if err != nil {
		return err
	}
	if len(got) != len(small) || !bytes.Equal(got[4].payload, small[4].payload) {
		return errors.New("the entry written before the disk filled reads wrong")
	}
	for _, f := range []string{"big-s2", "big-none"} {
		if r, _ := c.Lookup("g", f, 1); r != nil {
			return fmt.Errorf("entry %s of the full disk served", f)
		}
	}
	var tmp []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && isTemp(d.Name()) {
			tmp = append(tmp, p)
		}
		return nil
	})
	if len(tmp) != 0 {
		return fmt.Errorf("temporary files left: %v", tmp)
	}
	return nil
}

// TestDiskFull runs diskFull on a 1 MiB tmpfs (where this process may mount one) and in
// a child process whose file size limit is 600 KiB.
func TestDiskFull(t *testing.T) {
	t.Run("tmpfs", func(t *testing.T) {
		dir := t.TempDir()
		testtmpfs.Mount(t, dir, "size=1m", "covered by the other cases only")
		if err := diskFull(dir); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("file size limit", func(t *testing.T) {
		cmd, stderr := child(t, "diskfull", t.TempDir())
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v: %s", err, stderr)
		}
	})
}

// TestUnwritable: a cache directory that cannot be created, or a read-only filesystem,
// gives a read-only Cache with one warning that still serves what it holds.
func TestUnwritable(t *testing.T) {
	t.Run("under a regular file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		os.WriteFile(file, nil, 0o600)
		c, h := openTest(t, Options{Dir: filepath.Join(file, "cache")})
		if w := h.warnings(); len(w) != 1 || !strings.Contains(w[0], "cannot be written") || c.Writable() {
			t.Fatalf("warnings %q", w)
		}
		if c.Create("g", "f", 0, nil) != nil {
			t.Fatal("Create on an unwritable cache")
		}
		if r, err := c.Lookup("g", "f", 0); r != nil || err != nil {
			t.Fatalf("Lookup = %v, %v", r, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if len(h.warnings()) != 1 {
			t.Fatalf("warnings %q", h.warnings())
		}
	})
	t.Run("read-only filesystem", func(t *testing.T) {
		dir := t.TempDir()
		testtmpfs.Mount(t, dir, "size=4m", "covered by the other cases only")
		c, _ := openTest(t, Options{Dir: dir})
		recs := makeRecords("f", 0, 3, 1000)
		put(t, c, "g", "f", 0, 1, nil, recs)
		put(t, c, "g", "bad", 0, 1, nil, recs)
		c.Close()
		// Damage the second entry's footer: it cannot be removed once read-only.
		bad := c.fileDir("g", "bad")
		names, err := os.ReadDir(bad)
		if err != nil || len(names) != 1 {
			t.Fatalf("entries of bad: %v %v", names, err)
		}
		badPath := filepath.Join(bad, names[0].Name())
		b, err := os.ReadFile(badPath)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-12] ^= 0x40
		if err := os.WriteFile(badPath, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			t.Fatal(err)
		}
		c, h := openTest(t, Options{Dir: dir})
		if w := h.warnings(); len(w) != 1 || c.Writable() {
			t.Fatalf("warnings %q", w)
		}
		r, _ := c.Lookup("g", "f", 0.5)
		if r == nil {
			t.Fatal("a read-only cache does not serve its entries")
		}
		got, err := readAll(r)
		if err != nil {
			t.Fatal(err)
		}
		sameRecords(t, got, recs)
		if c.Create("g", "f2", 0, nil) != nil {
			t.Fatal("Create on a read-only filesystem")
		}
		// The damaged entry: not served, one warning however often it is looked up.
		for range 3 {
			if r, _ := c.Lookup("g", "bad", 0.5); r != nil {
				t.Fatal("a damaged entry was served")
			}
		}
		if _, err := os.Stat(badPath); err != nil {
			t.Fatalf("the damaged entry was removed from a read-only filesystem: %v", err)
		}
		c.Close()
		if w := h.warnings(); len(w) != 2 || !strings.Contains(w[1], "damaged") {
			t.Fatalf("warnings %q: want the read-only one and one for the damaged entry", w)
		}
		if st := c.Stats(); st.Corrupt != 1 {
			t.Fatalf("%d damaged entries counted, want 1", st.Corrupt)
		}
	})
}
