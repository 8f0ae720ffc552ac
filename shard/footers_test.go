package shard

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
)

// sideSource is a recordingSource (its files take prefetches, like
// remote files) with an in-memory side cache, as the Hub keeps on disk.
type sideSource struct {
	*recordingSource
	mu     sync.Mutex
	side   map[string][]byte
	writes int
}

func (s *sideSource) ReadSide(kind, name string, size int64) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.side[kind+"|"+name]
	return b, ok
}

func (s *sideSource) WriteSide(kind, name string, size int64, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.side[kind+"|"+name] = append([]byte(nil), data...)
	s.writes++
}

// tailReads counts readFooter's first reads (a data file's length and
// magic): footers read from the files.
func (r *recordingSource) tailReads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for name, rs := range r.reads {
		if !strings.HasPrefix(name, "data/") {
			continue
		}
		for _, x := range rs {
			if x.Len == 8 { // readFooter's first read: length and magic
				n++
			}
		}
	}
	return n
}

// TestFootersShared: plans and unit reads through one Footers read each
// footer once, whatever the number of concurrent plans; units do not hold
// their footers (the store keeps a bounded number of unused ones, and
// reads a dropped one again); a second store over the same side cache
// (another process of the node) reads no footer from the files; a damaged
// side cache entry is read from the file instead. The batches are those
// of a plain Plan every time.
func TestFootersShared(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	o := datagen.DefaultOptions()
	o.Episodes, o.MinFrames, o.MaxFrames, o.FramesPerFile, o.Cameras, o.Seed = 12, 20, 40, 80, []string{}, 3
	ctx := context.Background()
	if _, err := datagen.Generate(ctx, dir, o); err != nil {
		t.Fatal(err)
	}
	plain := mustDir(t, dir)
	ds, want := readAll(t, plain, Selection{}, Options{})
	files := map[string]bool{}
	for _, b := range want {
		files[b.File] = true
	}
	if len(files) < 3 {
		t.Fatalf("%d data files, want several", len(files))
	}
	read := func(t *testing.T, src *sideSource, store *Footers, clients int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, clients)
		got := make([][]*Batch, clients)
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				units, err := PlanWith(ctx, src, ds, Selection{}, PlanOptions{Footers: store})
				if err != nil {
					errs[c] = err
					return
				}
				for _, u := range units {
					if u.pq == nil || u.pq.footer != nil || u.meta == nil {
						t.Errorf("unit %s/%d holds its file's footer", u.File, u.RowGroup)
					}
					b, err := ReadUnit(ctx, src, ds, u, Options{})
					if err != nil {
						errs[c] = err
						return
					}
					got[c] = append(got[c], b)
				}
			}(c)
		}
		wg.Wait()
		for c := range errs {
			if errs[c] != nil {
				t.Fatal(errs[c])
			}
			if !reflect.DeepEqual(got[c], want) {
				t.Fatalf("client %d: batches differ from a plain plan's", c)
			}
		}
	}
	newSide := func() *sideSource {
		return &sideSource{recordingSource: newRecording(plain), side: map[string][]byte{}}
	}
	t.Run("one store, four clients", func(t *testing.T) {
		src := newSide()
		store := NewFooters(0)
		read(t, src, store, 4)
		st := store.Stats()
		if st.Reads != int64(len(files)) || src.tailReads() != len(files) {
			t.Fatalf("%d footers read (%d tail reads) for %d files and 4 clients, want one each", st.Reads, src.tailReads(), len(files))
		}
		if src.writes != len(files) {
			t.Fatalf("%d side cache writes, want %d", src.writes, len(files))
		}
		// Another process of the node: its own store, the same side cache.
		src2 := &sideSource{recordingSource: newRecording(plain), side: src.side}
		store2 := NewFooters(0)
		read(t, src2, store2, 2)
		if st := store2.Stats(); st.Reads != 0 || st.SideHits != int64(len(files)) || src2.tailReads() != 0 {
			t.Fatalf("second process: %d footers read from the files, %d from the side cache; want 0 and %d", st.Reads, st.SideHits, len(files))
		}
		// Damaged side entries (cut short) are not used.
		for k, v := range src.side {
			src.side[k] = v[:len(v)/2]
		}
		store3 := NewFooters(0)
		read(t, &sideSource{recordingSource: newRecording(plain), side: src.side}, store3, 1)
		if st := store3.Stats(); st.Reads != int64(len(files)) || st.SideHits != 0 {
			t.Fatalf("damaged side cache: %d read, %d side hits; want %d and 0", st.Reads, st.SideHits, len(files))
		}
	})
	t.Run("nothing kept unused", func(t *testing.T) {
		src := newSide()
		store := NewFooters(-1)
		read(t, src, store, 1)
		read(t, src, store, 1) // the next epoch's plan
		st := store.Stats()
		if st.Held != 0 || st.Kept != 0 {
			t.Fatalf("a store keeping nothing holds %d footers (%d bytes) after the run", st.Held, st.Kept)
		}
		// Dropped footers come back from the side cache.
		if st.Reads != int64(len(files)) || st.SideHits != int64(len(files)) {
			t.Fatalf("%d footers read from the files, %d from the side cache, for %d files", st.Reads, st.SideHits, len(files))
		}
	})
	t.Run("bounded", func(t *testing.T) {
		src := newSide()
		one := footerCost(mustFooter(t, plain, want[0].File))
		store := NewFooters(2 * one)
		read(t, src, store, 1)
		if st := store.Stats(); st.Held > 2 || st.Kept > 2*one {
			t.Fatalf("store bounded to 2 footers holds %d (%d bytes)", st.Held, st.Kept)
		}
	})
}

func mustFooter(t *testing.T, src fetch.Source, name string) *footer {
	t.Helper()
	p, err := openFile(context.Background(), src, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	return p.footer
}

// TestUnitFootersConformance: units planned through a Footers, each
// reading with its own row group's footer (unitTail), decode every
// conformance dataset exactly as units holding their file's footer.
func TestUnitFootersConformance(t *testing.T) {
	ctx := context.Background()
	for _, dir := range conformanceDatasets(t) {
		src := mustDir(t, dir)
		ds, want := readAll(t, src, Selection{}, Options{})
		store := NewFooters(-1)
		units, err := PlanWith(ctx, src, ds, Selection{}, PlanOptions{Footers: store})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if len(units) != len(want) {
			t.Fatalf("%s: %d units, want %d", dir, len(units), len(want))
		}
		for i, u := range units {
			if u.meta == nil || len(u.meta) >= int(u.pq.size) {
				t.Fatalf("%s: unit %d has no footer of its own", dir, i)
			}
			b, err := ReadUnit(ctx, src, ds, u, Options{})
			if err != nil {
				t.Fatalf("%s: %v", dir, err)
			}
			if !reflect.DeepEqual(b, want[i]) {
				t.Fatalf("%s %s row group %d: decoded differently with its own footer", dir, u.File, u.RowGroup)
			}
		}
		if r := store.Stats().Resident; r != 0 {
			t.Fatalf("%s: %d reads used a resident footer; the store keeps none", dir, r)
		}
	}
}

// TestUnitFootersResident: units whose file's footer the store still holds
// read through it (no parse of their own row group's footer), with the
// same result.
func TestUnitFootersResident(t *testing.T) {
	ctx := context.Background()
	for _, dir := range conformanceDatasets(t) {
		src := mustDir(t, dir)
		ds, want := readAll(t, src, Selection{}, Options{})
		store := NewFooters(0)
		units, err := PlanWith(ctx, src, ds, Selection{}, PlanOptions{Footers: store})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for i, u := range units {
			b, err := ReadUnit(ctx, src, ds, u, Options{})
			if err != nil {
				t.Fatalf("%s: %v", dir, err)
			}
			if !reflect.DeepEqual(b, want[i]) {
				t.Fatalf("%s %s row group %d: decoded differently through the resident footer", dir, u.File, u.RowGroup)
			}
		}
		if r := store.Stats().Resident; r != int64(len(units)) {
			t.Fatalf("%s: %d of %d unit reads used the resident footer", dir, r, len(units))
		}
	}
}
