package video

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/lrstream/lrstream/fetch"
)

// openCounter counts the opens of each file of a source that is not a
// local directory (Materialize copies its files to temporary files).
type openCounter struct {
	fetch.Source
	mu sync.Mutex
	n  map[string]int
}

func (s *openCounter) Open(ctx context.Context, name string) (fetch.File, error) {
	s.mu.Lock()
	s.n[name]++
	s.mu.Unlock()
	return s.Source.Open(ctx, name)
}

func (s *openCounter) opens(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[name]
}

func TestMaterializer(t *testing.T) {
	fsys := fstest.MapFS{"videos/a.mp4": {Data: []byte("aaaa")}, "videos/b.mp4": {Data: []byte("bb")}}
	type step struct {
		op    string // locate, held, release, close
		name  string
		opens int  // opens of name after the step
		gone  bool // locate: the path of the previous locate of name no longer exists
		held  bool // held: Held finds the file
	}
	tests := []struct {
		name  string
		keep  int
		steps []step
	}{
		{"reused while idle", 2, []step{
			{op: "locate", name: "videos/a.mp4", opens: 1},
			{op: "release", name: "videos/a.mp4"},
			{op: "locate", name: "videos/a.mp4", opens: 1},
			{op: "release", name: "videos/a.mp4"},
		}},
		{"evicted beyond keep", 1, []step{
			{op: "locate", name: "videos/a.mp4", opens: 1},
			{op: "release", name: "videos/a.mp4"},
			{op: "locate", name: "videos/b.mp4", opens: 1},
			{op: "release", name: "videos/b.mp4"},
			{op: "locate", name: "videos/a.mp4", opens: 2, gone: true},
		}},
		{"in use is never evicted", 1, []step{
			{op: "locate", name: "videos/a.mp4", opens: 1},
			{op: "locate", name: "videos/b.mp4", opens: 1},
			{op: "release", name: "videos/b.mp4"},
			{op: "locate", name: "videos/a.mp4", opens: 1},
		}},
		{"close removes idle files", 4, []step{
			{op: "locate", name: "videos/a.mp4", opens: 1},
			{op: "release", name: "videos/a.mp4"},
			{op: "close"},
			{op: "locate", name: "videos/a.mp4", opens: 2, gone: true},
		}},
		{"held: only files located, never fetched", 1, []step{
			{op: "held", name: "videos/a.mp4", opens: 0},
			{op: "locate", name: "videos/a.mp4", opens: 1},
			{op: "held", name: "videos/a.mp4", opens: 1, held: true},
			{op: "release", name: "videos/a.mp4"},
			{op: "release", name: "videos/a.mp4"},
			{op: "locate", name: "videos/b.mp4", opens: 1},
			{op: "release", name: "videos/b.mp4"},
			{op: "held", name: "videos/a.mp4", opens: 1}, // evicted: not fetched again
		}},
		{"a held file is in use", 1, []step{
			{op: "locate", name: "videos/a.mp4", opens: 1},
			{op: "release", name: "videos/a.mp4"},
			{op: "held", name: "videos/a.mp4", opens: 1, held: true}, // idle, taken back
			{op: "locate", name: "videos/b.mp4", opens: 1},
			{op: "release", name: "videos/b.mp4"},
			{op: "locate", name: "videos/a.mp4", opens: 1},
		}},
		{"a failure is retried", 4, []step{
			{op: "fail", name: "videos/missing.mp4", opens: 1},
			{op: "fail", name: "videos/missing.mp4", opens: 2},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TMPDIR", t.TempDir())
			src := &openCounter{Source: fetch.NewFS("test/fs", fsys), n: map[string]int{}}
			m := NewMaterializer(src, tc.keep)
			paths := map[string][]string{}
			releases := map[string][]func(){}
			for i, s := range tc.steps {
				switch s.op {
				case "locate":
					p, rel, err := m.Locate(context.Background(), s.name)
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if prev := paths[s.name]; len(prev) > 0 {
						_, err := os.Stat(prev[len(prev)-1])
						if gone := os.IsNotExist(err); gone != s.gone {
							t.Fatalf("step %d: previous copy of %s gone=%t, want %t", i, s.name, gone, s.gone)
						}
					}
					b, err := os.ReadFile(p)
					if err != nil || string(b) != string(fsys[s.name].Data) {
						t.Fatalf("step %d: %s reads %q (%v)", i, p, b, err)
					}
					paths[s.name] = append(paths[s.name], p)
					releases[s.name] = append(releases[s.name], rel)
				case "release":
					r := releases[s.name]
					r[len(r)-1]()
					r[len(r)-1]() // idempotent
					releases[s.name] = r[:len(r)-1]
				case "held":
					p, rel, ok := m.Held(s.name)
					if ok != s.held {
						t.Fatalf("step %d: Held(%s) %t, want %t", i, s.name, ok, s.held)
					}
					if ok {
						if b, err := os.ReadFile(p); err != nil || string(b) != string(fsys[s.name].Data) {
							t.Fatalf("step %d: %s reads %q (%v)", i, p, b, err)
						}
						releases[s.name] = append(releases[s.name], rel)
					}
				case "close":
					m.Close()
				case "fail":
					if _, _, err := m.Locate(context.Background(), s.name); err == nil || !IsNotExist(err) {
						t.Fatalf("step %d: %v, want a not-exist error", i, err)
					}
				}
				if (s.op == "locate" || s.op == "fail" || s.op == "held") && src.opens(s.name) != s.opens {
					t.Fatalf("step %d (%s %s): %d opens, want %d", i, s.op, s.name, src.opens(s.name), s.opens)
				}
			}
		})
	}
}

// TestMaterializerConcurrent: workers locating one file at once share one
// copy.
func TestMaterializerConcurrent(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	src := &openCounter{Source: fetch.NewFS("test/fs", fstest.MapFS{"v.mp4": {Data: []byte("v")}}), n: map[string]int{}}
	m := NewMaterializer(src, 1)
	var wg sync.WaitGroup
	var distinct sync.Map
	var n atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, rel, err := m.Locate(context.Background(), "v.mp4")
			if err != nil {
				t.Error(err)
				return
			}
			distinct.Store(p, true)
			n.Add(1)
			rel()
		}()
	}
	wg.Wait()
	paths := 0
	distinct.Range(func(any, any) bool { paths++; return true })
	if n.Load() != 8 || src.opens("v.mp4") != 1 || paths != 1 {
		t.Fatalf("%d locates, %d opens, %d paths; want 8, 1, 1", n.Load(), src.opens("v.mp4"), paths)
	}
	m.Close()
}
