package framecache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// warnCounter is a slog handler that records the messages logged at WARN and above.
type warnCounter struct {
	mu   sync.Mutex
	msgs []string
}

func (h *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *warnCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.Key + "=" + a.Value.String()
		return true
	})
	h.msgs = append(h.msgs, msg)
	return nil
}
func (h *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *warnCounter) WithGroup(string) slog.Handler      { return h }

func (h *warnCounter) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}

// openTest opens a cache in dir with a warning counter. Its writers publish when
// committed (MaxPending -1), unless o says otherwise: the tests look entries up right
// after committing them; TestBackground covers background publishing.
func openTest(t testing.TB, o Options) (*Cache, *warnCounter) {
	t.Helper()
	h := &warnCounter{}
	o.Log = slog.New(h)
	if o.MaxPending == 0 {
		o.MaxPending = -1
	}
	c, err := Open(o)
	if err != nil {
		t.Fatalf("Open(%+v): %v", o, err)
	}
	return c, h
}

// payload is the deterministic content of the record at pts of file: a smooth gradient
// with noise, so it compresses somewhat but not to nothing; n bytes.
func payload(file string, pts float64, n int) []byte {
	seed := uint64(len(file))*1_000_003 + uint64(pts*1000)
	for _, b := range []byte(file) {
		seed = seed*131 + uint64(b)
	}
	rng := rand.New(rand.NewPCG(seed, 42))
	b := make([]byte, n)
	var r uint64
	for i := range b {
		if i%21 == 0 {
			r = rng.Uint64()
		}
		b[i] = byte(i/64) + byte(r&7)
		r >>= 3
	}
	return b
}

// record is one record of an entry, for tests.
type record struct {
	pts     float64
	payload []byte
}

// makeRecords makes n records of file from start, one every 0.1 s.
func makeRecords(file string, start float64, n, size int) []record {
	out := make([]record, n)
	for i := range out {
		pts := start + float64(i)/10
		out[i] = record{pts, payload(file, pts, size)}
	}
	return out
}

// put writes and commits an entry.
func put(t testing.TB, c *Cache, group, file string, start, covered float64, meta []byte, recs []record) {
	t.Helper()
	w := c.Create(group, file, start, meta)
	if w == nil {
		t.Fatalf("Create(%q, %q, %v) = nil", group, file, start)
	}
	for _, r := range recs {
		w.Add(r.pts, r.payload)
	}
	if err := w.Commit(covered); err != nil {
		t.Fatalf("Commit(%v): %v", covered, err)
	}
}

// readAll reads every record of r and closes it.
func readAll(r *Reader) ([]record, error) {
	defer r.Close()
	var out []record
	for {
		pts, p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, record{pts, bytes.Clone(p)})
	}
}

// readAllInto reads every record of r with NextInto, each into a buffer that starts
// smaller than most payloads (so that it grows) and is kept, and closes r.
func readAllInto(r *Reader) ([]record, error) {
	defer r.Close()
	var out []record
	for {
		pts, p, err := r.NextInto(make([]byte, 0, 7))
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, record{pts, p})
	}
}

func sameRecords(t testing.TB, got, want []record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].pts != want[i].pts || !bytes.Equal(got[i].payload, want[i].payload) {
			t.Fatalf("record %d: pts %v (%d bytes), want pts %v (%d bytes), equal payload %v",
				i, got[i].pts, len(got[i].payload), want[i].pts, len(want[i].payload), bytes.Equal(got[i].payload, want[i].payload))
		}
	}
}

// holds checks that c serves the records want for (group, file) at time at.
func holds(t testing.TB, c *Cache, group, file string, at float64, want []record) {
	t.Helper()
	r, err := c.Lookup(group, file, at)
	if err != nil || r == nil {
		t.Fatalf("%s: no entry at %v (%v)", file, at, err)
	}
	got, err := readAll(r)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	sameRecords(t, got, want)
}

// entryFiles lists the entry files under dir's cache.
func entryFiles(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := walk(filepath.Join(dir, layoutVersion), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.path)
	}
	return out
}

// tempFiles lists the temporary files under dir's cache.
func tempFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && isTemp(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func slogNew(h slog.Handler) *slog.Logger { return slog.New(h) }
