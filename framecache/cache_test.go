package framecache

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	zeros := make([]byte, 460_800)
	noise := payload("noise", 0, 1000)
	for i := range noise {
		noise[i] ^= byte(i * 7919 >> 3)
	}
	cases := []struct {
		name string
		recs []record
	}{
		{"frames", makeRecords("a.mp4", 1.5, 12, 460_800)},
		{"zeros", []record{{0, zeros}, {0.05, zeros}}},
		{"empty payloads", []record{{-1, nil}, {-0.5, []byte{}}, {2, []byte{1}}}},
		{"incompressible", []record{{3, noise}}},
		{"mixed sizes", []record{{0, make([]byte, 10)}, {1, payload("x", 1, 921_600)}, {2, make([]byte, 3)}}},
		{"no records", nil},
		// Records ending on, before and after the direct writer's blocks (direct.go),
		// and one larger than a chunk.
		{"block edges", []record{{0, make([]byte, dioAlign-recHeader)}, {1, payload("b", 1, dioAlign)},
			{2, payload("c", 2, dioAlign+1)}, {3, []byte{9}}, {4, payload("d", 4, chunkBytes+5)}, {5, payload("e", 5, 2*dioAlign-1)}}},
	}
	// Writers: synchronous (Add writes, Commit publishes), the default (Add writes, the
	// background writer publishes), and the background writer writing too, with
	// O_DIRECT and through the page cache.
	writers := []struct {
		name       string
		pending    int64
		direct     bool
		background bool
	}{{"sync", -1, false, false}, {"inline", DefaultMaxPending, false, false}, {"direct", DefaultMaxPending, true, false}, {"buffered", DefaultMaxPending, false, true}}
	for _, codec := range []string{"s2", "zstd", "none", ""} {
		for _, wr := range writers {
			for _, tc := range cases {
				t.Run(codec+"/"+wr.name+"/"+tc.name, func(t *testing.T) {
					dir := t.TempDir()
					c, h := openTest(t, Options{Dir: dir, Codec: codec, Budget: 1 << 30, MaxPending: wr.pending, Direct: wr.direct, Background: wr.background})
					start, covered := -2.0, 10.0
					meta := []byte("meta " + tc.name)
					put(t, c, "group", "file", start, covered, meta, tc.recs)
					c.Flush()
					wantDirect := int64(0)
					if wr.name == "direct" {
						wantDirect = 1
						if !directWorks(t, dir) {
							t.Skipf("the file system of %s refuses O_DIRECT: the direct writer cannot be tested here", dir)
						}
					}
					if got := c.Stats().Direct; got != wantDirect {
						t.Fatalf("%d entries written with O_DIRECT, want %d", got, wantDirect)
					}
					r, err := c.Lookup("group", "file", 0)
					if err != nil || r == nil {
						t.Fatalf("Lookup = %v, %v; want a hit", r, err)
					}
					if r.Start() != start || r.Covered() != covered || !bytes.Equal(r.Meta(), meta) || r.Len() != len(tc.recs) {
						t.Fatalf("entry [%v, %v] meta %q len %d", r.Start(), r.Covered(), r.Meta(), r.Len())
					}
					for i, want := range tc.recs {
						if r.PTS(i) != want.pts {
							t.Fatalf("PTS(%d) = %v, want %v", i, r.PTS(i), want.pts)
						}
					}
					got, err := readAll(r)
					if err != nil {
						t.Fatal(err)
					}
					if tc.recs == nil {
						tc.recs = []record{}
					}
					sameRecords(t, got, tc.recs)
					st := c.Stats()
					var raw int64
					for _, rec := range tc.recs {
						raw += int64(len(rec.payload))
					}
					if st.Hits != 1 || st.EntriesWritten != 1 || st.FramesWritten != int64(len(tc.recs)) ||
						st.FramesRead != int64(len(tc.recs)) || st.RawBytesWritten != raw || st.BytesWritten <= 0 {
						t.Fatalf("stats %+v", st)
					}
					if w := h.warnings(); len(w) != 0 {
						t.Fatalf("warnings: %q", w)
					}
					// The same through NextInto.
					if r, _ = c.Lookup("group", "file", 0); r == nil {
						t.Fatal("no hit the second time")
					}
					if got, err = readAllInto(r); err != nil {
						t.Fatal(err)
					}
					sameRecords(t, got, tc.recs)
					assertModes(t, dir)
				})
			}
		}
	}
}

// directWorks reports whether the file system of dir takes O_DIRECT.
func directWorks(t *testing.T, dir string) bool {
	f, err := os.CreateTemp(dir, "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	return setDirect(f)
}

// assertModes checks that the cache's directories are 0700 and its files 0600.
func assertModes(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(filepath.Join(dir, layoutVersion), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		info, _ := d.Info()
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, info.Mode().Perm(), want)
		}
		return nil
	})
}

func TestSkipTo(t *testing.T) {
	c, _ := openTest(t, Options{Dir: t.TempDir()})
	recs := makeRecords("f", 0, 10, 100)
	put(t, c, "g", "f", 0, 0.9, nil, recs)
	for _, tc := range []struct {
		t     float64
		first int // index of the first record Next returns; len(recs) for EOF
	}{{-1, 0}, {0, 0}, {0.05, 1}, {0.1, 1}, {0.85, 9}, {0.9, 9}, {0.95, 10}, {5, 10}} {
		r, _ := c.Lookup("g", "f", 0.5)
		r.SkipTo(tc.t)
		got, err := readAll(r)
		if err != nil {
			t.Fatal(err)
		}
		sameRecords(t, got, recs[tc.first:])
	}
}

func TestLookupCoverage(t *testing.T) {
	c, _ := openTest(t, Options{Dir: t.TempDir()})
	entries := []struct{ start, covered float64 }{{0, 1}, {1, 2}, {0.5, 3}, {10, 10}}
	for _, e := range entries {
		put(t, c, "g", "f", e.start, e.covered, []byte{byte(e.start * 10), byte(e.covered * 10)}, nil)
	}
	put(t, c, "g", "other", 0, 100, []byte("other"), nil)
	put(t, c, "g2", "f", 0, 100, []byte("g2"), nil)
	for _, tc := range []struct {
		group, file string
		t           float64
		want        []float64 // [start, covered]; nil: miss
	}{
		{"g", "f", 0, []float64{0, 1}},     // exact start
		{"g", "f", 1, []float64{0.5, 3}},   // three cover it: the largest Covered
		{"g", "f", 0.25, []float64{0, 1}},  // inside one
		{"g", "f", 0.5, []float64{0.5, 3}}, // two: the larger Covered
		{"g", "f", 3, []float64{0.5, 3}},   // exact covered
		{"g", "f", 3.01, nil},              // after every entry
		{"g", "f", -0.01, nil},             // before every entry
		{"g", "f", 10, []float64{10, 10}},  // a single instant
		{"g", "f", math.NaN(), nil},
		{"g", "nope", 0.5, nil},
		{"nope", "f", 0.5, nil},
		{"g", "other", 50, []float64{0, 100}},
		{"g2", "f", 50, []float64{0, 100}},
	} {
		if got := c.Holds(tc.group, tc.file, tc.t); got != (tc.want != nil) {
			t.Fatalf("Holds(%q, %q, %v) = %v, want %v", tc.group, tc.file, tc.t, got, tc.want != nil)
		}
		r, err := c.Lookup(tc.group, tc.file, tc.t)
		if err != nil {
			t.Fatal(err)
		}
		if (r == nil) != (tc.want == nil) {
			t.Fatalf("Lookup(%q, %q, %v) hit %v, want hit %v", tc.group, tc.file, tc.t, r != nil, tc.want != nil)
		}
		if r == nil {
			continue
		}
		if r.Start() != tc.want[0] || r.Covered() != tc.want[1] {
			t.Errorf("Lookup(%q, %q, %v) = [%v, %v], want %v", tc.group, tc.file, tc.t, r.Start(), r.Covered(), tc.want)
		}
		if tc.group == "g" && tc.file == "f" && !bytes.Equal(r.Meta(), []byte{byte(r.Start() * 10), byte(r.Covered() * 10)}) {
			t.Errorf("meta %v of [%v, %v]", r.Meta(), r.Start(), r.Covered())
		}
		r.Close()
	}
	st := c.Stats()
	if st.Hits != 8 || st.Misses != 5 { // Holds counts neither
		t.Fatalf("hits %d misses %d, want 8 and 5", st.Hits, st.Misses)
	}
	if (*Cache)(nil).Holds("g", "f", 0) {
		t.Fatal("a nil cache holds an entry")
	}
}

// TestLookupCollision: an entry whose header names another group or file (as a hash
// collision of the paths would) is not served and not removed.
func TestLookupCollision(t *testing.T) {
	dir := t.TempDir()
	c, _ := openTest(t, Options{Dir: dir})
	put(t, c, "g", "f", 0, 1, nil, makeRecords("f", 0, 2, 10))
	files := entryFiles(t, dir)
	other := c.fileDir("g", "impostor")
	os.MkdirAll(other, 0o700)
	if err := os.Rename(files[0], filepath.Join(other, filepath.Base(files[0]))); err != nil {
		t.Fatal(err)
	}
	if r, _ := c.Lookup("g", "impostor", 0.5); r != nil {
		t.Fatal("served an entry of another file")
	}
	if len(entryFiles(t, dir)) != 1 {
		t.Fatal("the other file's entry was removed")
	}
}

func TestDamaged(t *testing.T) {
	recs := makeRecords("f", 0, 4, 20_000)
	type damage func(t *testing.T, b []byte) []byte
	flip := func(at func(b []byte) int) damage {
		return func(t *testing.T, b []byte) []byte { b[at(b)] ^= 0x40; return b }
	}
	// recordAt is the offset of record i's header in an entry of the records above.
	recordAt := func(b []byte, i int) int {
		e, err := readEntry(bytes.NewReader(b), int64(len(b)), nil)
		if err != nil {
			t.Fatal(err)
		}
		return int(e.off[i])
	}
	cases := []struct {
		name     string
		damage   damage
		lookup   bool // Lookup still hits (the damage is in a record)
		readable int  // records read before ErrCorrupt
	}{
		{"truncated to the header", func(_ *testing.T, b []byte) []byte { return b[:fixedHeader+3] }, false, 0},
		{"truncated mid-record", func(_ *testing.T, b []byte) []byte { return b[:len(b)/2] }, false, 0},
		{"truncated by one byte", func(_ *testing.T, b []byte) []byte { return b[:len(b)-1] }, false, 0},
		{"empty file", func(_ *testing.T, b []byte) []byte { return nil }, false, 0},
		{"payload byte of record 2", flip(func(b []byte) int { return recordAt(b, 2) + recHeader + 100 }), true, 2},
		{"pts of record 0", flip(func(b []byte) int { return recordAt(b, 0) + 9 }), true, 0},
		{"raw length of record 3", flip(func(b []byte) int { return recordAt(b, 3) + 5 }), true, 3},
		{"kind of record 1", flip(func(b []byte) int { return recordAt(b, 1) + 16 }), true, 1},
		{"checksum of record 1", flip(func(b []byte) int { return recordAt(b, 1) + 21 }), true, 1},
		{"footer count", flip(func(b []byte) int { return len(b) - footerSize }), false, 0},
		{"footer covered", flip(func(b []byte) int { return len(b) - footerSize + 17 }), false, 0},
		{"footer raw bytes", flip(func(b []byte) int { return len(b) - footerSize + 33 }), false, 0},
		{"footer checksum", flip(func(b []byte) int { return len(b) - 7 }), false, 0},
		{"end magic", flip(func(b []byte) int { return len(b) - 1 }), false, 0},
		{"index", flip(func(b []byte) int { return len(b) - footerSize - 3 }), false, 0},
		{"header magic", flip(func([]byte) int { return 0 }), false, 0},
		{"header meta", flip(func([]byte) int { return fixedHeader + 2 }), false, 0},
		{"header start", flip(func([]byte) int { return 10 }), false, 0},
		{"footer with a garbage tail", func(_ *testing.T, b []byte) []byte { return append(b, 0) }, false, 0},
	}
	readers := map[string]func(*Reader) ([]record, error){"Next": readAll, "NextInto": readAllInto}
	for _, codec := range []string{"s2", "zstd", "none"} {
		for rname, read := range readers {
			for _, tc := range cases {
				t.Run(codec+"/"+rname+"/"+tc.name, func(t *testing.T) {
					dir := t.TempDir()
					c, h := openTest(t, Options{Dir: dir, Codec: codec})
					put(t, c, "g", "f", 0, 1, []byte("meta"), recs)
					files := entryFiles(t, dir)
					b, _ := os.ReadFile(files[0])
					if err := os.WriteFile(files[0], tc.damage(t, b), 0o600); err != nil {
						t.Fatal(err)
					}
					r, err := c.Lookup("g", "f", 0.5)
					if err != nil {
						t.Fatal(err)
					}
					if (r != nil) != tc.lookup {
						t.Fatalf("Lookup hit %v, want %v", r != nil, tc.lookup)
					}
					if r != nil {
						got, err := read(r)
						if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), files[0]) {
							t.Fatalf("read error %v, want ErrCorrupt naming %s", err, files[0])
						}
						sameRecords(t, got, recs[:tc.readable])
					}
					if left := entryFiles(t, dir); len(left) != 0 {
						t.Fatalf("damaged entry not removed: %v", left)
					}
					if st := c.Stats(); st.Corrupt != 1 {
						t.Fatalf("Corrupt = %d, want 1", st.Corrupt)
					}
					if w := h.warnings(); len(w) != 1 || !strings.Contains(w[0], "damaged") {
						t.Fatalf("warnings %q, want one about the damaged entry", w)
					}
					if r, _ := c.Lookup("g", "f", 0.5); r != nil {
						t.Fatal("hit after removal")
					}
				})
			}
		}
	}
}

// TestDamagedKeepsReplacement: a damaged entry is removed only if it is still the file
// the reader opened: a writer may have published a good one under its name since.
func TestDamagedKeepsReplacement(t *testing.T) {
	dir := t.TempDir()
	c, _ := openTest(t, Options{Dir: dir, Codec: "none"})
	recs := makeRecords("f", 0, 3, 1000)
	put(t, c, "g", "f", 0, 1, nil, recs)
	p := entryFiles(t, dir)[0]
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o600)
	r, _ := c.Lookup("g", "f", 0)
	put(t, c, "g", "f", 0, 1, nil, recs) // replaces the damaged file by rename
	if _, err := readAll(r); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v, want ErrCorrupt", err)
	}
	r, _ = c.Lookup("g", "f", 0)
	if r == nil {
		t.Fatal("the good replacement was removed")
	}
	got, err := readAll(r)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, recs)
}

func TestWriterMisuse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		add     []float64
		covered float64
		err     string // "": commits
	}{
		{"ascending", []float64{1, 2, 3}, 3, ""},
		{"equal pts", []float64{1, 1}, 3, "ascending"},
		{"descending", []float64{1, 2, 1.5}, 3, "ascending"},
		{"NaN pts", []float64{math.NaN()}, 3, "ascending"},
		{"covered before start", nil, 0.5, "empty"},
		{"covered before a record", []float64{1, 2}, 1.5, "before the last record"},
		{"covered NaN", []float64{1}, math.NaN(), "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c, _ := openTest(t, Options{Dir: dir})
			w := c.Create("g", "f", 1, nil)
			for _, p := range tc.add {
				w.Add(p, []byte{1, 2, 3})
			}
			err := w.Commit(tc.covered)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Commit = %v, want error containing %q", err, tc.err)
			}
			if err2 := w.Commit(tc.covered); (err2 == nil) != (err == nil) {
				t.Fatalf("second Commit = %v, first %v", err2, err)
			}
			if n := len(entryFiles(t, dir)); (n == 1) != (tc.err == "") {
				t.Fatalf("%d entries published", n)
			}
			if tmp := tempFiles(t, dir); len(tmp) != 0 {
				t.Fatalf("temporary files left: %v", tmp)
			}
		})
	}
}

func TestWriterNilAndAbort(t *testing.T) {
	var w *Writer
	w.Add(1, []byte{1})
	if err := w.Commit(1); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	w.Abort()

	dir := t.TempDir()
	c, _ := openTest(t, Options{Dir: dir})
	w = c.Create("g", "f", 0, nil)
	w.Add(0, []byte{1})
	if len(tempFiles(t, dir)) != 1 {
		t.Fatal("no temporary file while writing")
	}
	w.Abort()
	w.Abort()
	w.Add(1, []byte{2})
	if err := w.Commit(1); err != nil {
		t.Fatal(err)
	}
	if n, tmp := len(entryFiles(t, dir)), tempFiles(t, dir); n != 0 || len(tmp) != 0 {
		t.Fatalf("after Abort: %d entries, temporary files %v", n, tmp)
	}
	if r, _ := c.Lookup("g", "f", 0); r != nil {
		t.Fatal("aborted entry served")
	}
	c.Close()
	c.Close()
	if c.Create("g", "f", 0, nil) != nil {
		t.Fatal("Create after Close")
	}
}

// TestTwoWritersSameEntry: two writers of the same entry both publish; the last wins and
// reads back whole.
func TestTwoWritersSameEntry(t *testing.T) {
	dir := t.TempDir()
	c, _ := openTest(t, Options{Dir: dir})
	a := makeRecords("a", 0, 3, 5000)
	b := makeRecords("b", 0, 3, 5000)
	wa := c.Create("g", "f", 0, []byte("a"))
	wb := c.Create("g", "f", 0, []byte("b"))
	for i := range a {
		wa.Add(a[i].pts, a[i].payload)
		wb.Add(b[i].pts, b[i].payload)
	}
	if err := wa.Commit(1); err != nil {
		t.Fatal(err)
	}
	ra, _ := c.Lookup("g", "f", 0) // opened before b replaces it
	if err := wb.Commit(1); err != nil {
		t.Fatal(err)
	}
	rb, _ := c.Lookup("g", "f", 0)
	if string(ra.Meta()) != "a" || string(rb.Meta()) != "b" {
		t.Fatalf("metas %q %q", ra.Meta(), rb.Meta())
	}
	gotA, errA := readAll(ra)
	gotB, errB := readAll(rb)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	sameRecords(t, gotA, a)
	sameRecords(t, gotB, b)
	if n := len(entryFiles(t, dir)); n != 1 {
		t.Fatalf("%d entries", n)
	}
}

func TestOpenInvalid(t *testing.T) {
	for _, o := range []Options{{Dir: t.TempDir(), Codec: "lz4"}, {Dir: t.TempDir(), Budget: -1}, {Dir: t.TempDir(), RawEstimate: -1}} {
		if _, err := Open(o); err == nil {
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("LRSTREAM_FRAME_CACHE_DIR", "/some/where")
	if d, err := DefaultDir(); err != nil || d != "/some/where" {
		t.Fatalf("DefaultDir = %q, %v", d, err)
	}
	t.Setenv("LRSTREAM_FRAME_CACHE_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if d, err := DefaultDir(); err != nil || d != "/xdg/lrstream/frames" {
		t.Fatalf("DefaultDir = %q, %v", d, err)
	}
	t.Setenv("LRSTREAM_FRAME_CACHE_DIR", t.TempDir())
	c, _ := openTest(t, Options{})
	if c.Dir() != os.Getenv("LRSTREAM_FRAME_CACHE_DIR") || c.Budget() <= 0 {
		t.Fatalf("Open with defaults: dir %q budget %d", c.Dir(), c.Budget())
	}
}

func TestDefaultBudget(t *testing.T) {
	for _, tc := range []struct{ free, used, want int64 }{
		{1000 * gib, 0, 100 * gib},
		{100 * gib, 0, 25 * gib},
		{80 * gib, 20 * gib, 25 * gib},
		{2 * gib, 0, gib},
		{gib / 2, 0, gib / 2},
		{0, gib / 4, gib / 4},
		{0, 0, gib},
	} {
		if got := defaultBudget(tc.free, tc.used); got != tc.want {
			t.Errorf("defaultBudget(%d, %d) = %d, want %d", tc.free, tc.used, got, tc.want)
		}
	}
	dir := filepath.Join(t.TempDir(), "not", "yet")
	if b := DefaultBudget(dir); b < gib/1024 || b > maxDefault {
		t.Fatalf("DefaultBudget(%s) = %d", dir, b)
	}
}

func TestEntryNames(t *testing.T) {
	for _, v := range [][2]float64{{0, 0}, {1.5, 2.25}, {-3, 7}, {math.SmallestNonzeroFloat64, math.MaxFloat64}} {
		s, c, ok := parseEntryName(entryName(v[0], v[1]))
		if !ok || s != v[0] || c != v[1] {
			t.Errorf("%v: %v %v %v", v, s, c, ok)
		}
	}
	for _, n := range []string{".w-123.tmp", "label", "0000000000000000-0000000000000000.fcx", "000000000000000g-0000000000000000.fc", "00000000000000000000000000000000000"} {
		if _, _, ok := parseEntryName(n); ok {
			t.Errorf("parseEntryName(%q) ok", n)
		}
	}
}

func TestStaleTempRemoved(t *testing.T) {
	dir := t.TempDir()
	c, _ := openTest(t, Options{Dir: dir})
	w := c.Create("g", "f", 0, nil)
	w.Add(0, []byte{1})
	fresh := c.Create("g", "f", 1, nil)
	tmp := tempFiles(t, dir)
	if len(tmp) != 2 {
		t.Fatalf("temporary files %v", tmp)
	}
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(w.e.f.Name(), old, old)
	openTest(t, Options{Dir: dir})
	if left := tempFiles(t, dir); len(left) != 1 || left[0] != fresh.e.f.Name() {
		t.Fatalf("after Open: %v, want only %s", left, fresh.e.f.Name())
	}
	fresh.Abort()
	w.Abort()
}

func TestAutoCodec(t *testing.T) {
	for _, tc := range []struct {
		estimate, budget, mem int64
		want                  string
	}{
		{0, 100 * gib, 64 * gib, "s2"},           // unknown
		{10 * gib, 100 * gib, 64 * gib, "none"},  // fits both
		{90 * gib, 100 * gib, 256 * gib, "none"}, // 90% of the budget
		{91 * gib, 100 * gib, 256 * gib, "s2"},   // over 90% of the budget
		{40 * gib, 100 * gib, 64 * gib, "s2"},    // over half the RAM
		{32 * gib, 100 * gib, 64 * gib, "none"},  // half the RAM
		{10 * gib, 100 * gib, 0, "none"},         // RAM unknown: the budget decides
		{2 * gib, gib, 0, "s2"},                  // over the budget
	} {
		if got := kindNames[autoKind(tc.estimate, tc.budget, tc.mem)]; got != tc.want {
			t.Errorf("autoKind(%d, %d, %d) = %s, want %s", tc.estimate, tc.budget, tc.mem, got, tc.want)
		}
	}
	for _, tc := range []struct {
		codec    string
		estimate int64
		want     string
	}{{"", 0, "s2"}, {"auto", 0, "s2"}, {"", 1 << 20, "none"}, {"auto", 1 << 40, "s2"}, {"zstd", 1 << 20, "zstd"}, {"s2", 1 << 20, "s2"}, {"none", 0, "none"}} {
		c, _ := openTest(t, Options{Dir: t.TempDir(), Budget: 1 << 30, Codec: tc.codec, RawEstimate: tc.estimate})
		if c.Codec() != tc.want {
			t.Errorf("Codec %q, RawEstimate %d: writes %s, want %s", tc.codec, tc.estimate, c.Codec(), tc.want)
		}
	}
}

// TestLookupListing: a lookup reuses its listing of a file's directory while the
// directory is unchanged, and sees entries published or removed since.
func TestLookupListing(t *testing.T) {
	dir := t.TempDir()
	c, _ := openTest(t, Options{Dir: dir})
	writer, _ := openTest(t, Options{Dir: dir}) // another process, as far as c knows
	fdir := c.fileDir("g", "f")
	age := func() {
		old := time.Now().Add(-time.Minute)
		os.Chtimes(fdir, old, old)
	}
	hit := func(at float64) bool {
		r, err := c.Lookup("g", "f", at)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		return r != nil
	}
	put(t, writer, "g", "f", 0, 1, nil, nil)
	if !hit(0.5) || c.lists[fdir] != nil {
		t.Fatal("a directory changed under a second ago was listed for reuse")
	}
	age()
	if !hit(0.5) || c.lists[fdir] == nil {
		t.Fatal("an unchanged directory's listing was not kept")
	}
	if hit(1.5) {
		t.Fatal("hit outside every entry")
	}
	put(t, writer, "g", "f", 1, 2, nil, nil)
	if !hit(1.5) {
		t.Fatal("an entry published after the listing was not seen")
	}
	age()
	hit(1.5)
	if _, _, err := Clear(dir, "g"); err != nil {
		t.Fatal(err)
	}
	if hit(0.5) || hit(1.5) {
		t.Fatal("hit after Clear")
	}
}

// TestCreateLimits: keys or meta too long to store, or a start that is not a finite
// number, give no writer and leave the cache writable without a warning.
func TestCreateLimits(t *testing.T) {
	long := strings.Repeat("x", maxKey+1)
	c, h := openTest(t, Options{Dir: t.TempDir()})
	for _, tc := range []struct {
		name        string
		group, file string
		start       float64
		meta        []byte
	}{
		{"group", long, "f", 0, nil},
		{"file", "g", long, 0, nil},
		{"meta", "g", "f", 0, []byte(long)},
		{"NaN start", "g", "f", math.NaN(), nil},
		{"infinite start", "g", "f", math.Inf(-1), nil},
	} {
		if w := c.Create(tc.group, tc.file, tc.start, tc.meta); w != nil {
			w.Abort()
			t.Errorf("%s: Create gave a writer", tc.name)
		}
	}
	if !c.Writable() || len(h.warnings()) != 0 {
		t.Fatalf("writable %v, warnings %q", c.Writable(), h.warnings())
	}
	put(t, c, "g", "f", 0, 1, []byte(strings.Repeat("m", maxKey)), nil) // the limit itself
}

// TestEmpty: a cache is empty of a group until an entry of the group is published
// (a temporary file is not one; another group's entries do not count); nil is empty.
func TestEmpty(t *testing.T) {
	var nilCache *Cache
	if !nilCache.Empty("g") {
		t.Fatal("a nil cache is not empty")
	}
	c, _ := openTest(t, Options{Dir: t.TempDir()})
	put(t, c, "other", "f", 0, 1, nil, []record{{0, []byte{1}}})
	if !c.Empty("g") {
		t.Fatal("a new cache is not empty of g")
	}
	w := c.Create("g", "f", 0, nil)
	w.Add(0, []byte{1})
	c.Flush()
	if !c.Empty("g") {
		t.Fatal("a writer's temporary file made the cache hold g")
	}
	if err := w.Commit(1); err != nil {
		t.Fatal(err)
	}
	c.Flush()
	if c.Empty("g") || c.Empty("other") {
		t.Fatal("after entries were published the cache is empty of their group")
	}
}
