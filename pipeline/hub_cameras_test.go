package pipeline

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
)

// miniHub serves a local dataset directory with the Hub's paths and
// headers (the subset fetch.Hub uses: revision, tree, resolve with LFS
// redirects for parquet and mp4 files, ranges), counting the GETs of
// each file. fetch's own tests cover the protocol and its faults.
type miniHub struct {
	srv   *httptest.Server
	id    string
	sha   string
	files map[string][]byte
	paths []string
	mu    sync.Mutex
	gets  map[string]int // full or ranged GETs per path
}

func newMiniHub(t *testing.T, dir, id string) *miniHub {
	t.Helper()
	h := &miniHub{id: id, sha: strings.Repeat("ab", 20), files: map[string][]byte{}, gets: map[string]int{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		h.files[filepath.ToSlash(rel)] = b
		h.paths = append(h.paths, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(h.paths)
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func lfs(p string) bool { return strings.HasSuffix(p, ".parquet") || strings.HasSuffix(p, ".mp4") }

func hashes(b []byte) (string, string) {
	s2 := sha256.Sum256(b)
	h1 := sha1.New()
	fmt.Fprintf(h1, "blob %d\x00", len(b))
	h1.Write(b)
	return hex.EncodeToString(h1.Sum(nil)), hex.EncodeToString(s2[:])
}

func (h *miniHub) serve(w http.ResponseWriter, r *http.Request) {
	api, resolve := "/api/datasets/"+h.id+"/", "/datasets/"+h.id+"/resolve/"
	switch p := r.URL.Path; {
	case strings.HasPrefix(p, api+"revision/"):
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": h.id, "sha": h.sha})
	case strings.HasPrefix(p, api+"tree/"):
		_, dir, _ := strings.Cut(strings.TrimPrefix(p, api+"tree/"), "/")
		dir = strings.Trim(dir, "/")
		recursive := r.URL.Query().Get("recursive") == "true"
		entries := []map[string]any{}
		dirs := map[string]bool{}
		for _, f := range h.paths {
			if dir != "" && !strings.HasPrefix(f, dir+"/") {
				continue
			}
			rel := strings.TrimPrefix(f, dir+"/")
			if i := strings.Index(rel, "/"); i >= 0 && !recursive {
				d := rel[:i]
				if dir != "" {
					d = dir + "/" + d
				}
				dirs[d] = true
				continue
			}
			s1, s2 := hashes(h.files[f])
			e := map[string]any{"type": "file", "oid": s1, "size": len(h.files[f]), "path": f}
			if lfs(f) {
				e["lfs"] = map[string]any{"oid": s2, "size": len(h.files[f]), "pointerSize": 134}
			}
			entries = append(entries, e)
		}
		for d := range dirs {
			entries = append(entries, map[string]any{"type": "directory", "oid": strings.Repeat("d", 40), "size": 0, "path": d})
		}
		if len(entries) == 0 {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, dir+" does not exist", 404)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(entries)
	case strings.HasPrefix(p, resolve):
		_, f, _ := strings.Cut(strings.TrimPrefix(p, resolve), "/")
		b, ok := h.files[f]
		if !ok {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, f+" does not exist", 404)
			return
		}
		s1, s2 := hashes(b)
		w.Header().Set("X-Repo-Commit", h.sha)
		if lfs(f) {
			w.Header().Set("X-Linked-Etag", `"`+s2+`"`)
			w.Header().Set("X-Linked-Size", fmt.Sprint(len(b)))
			w.Header().Set("ETag", `"`+s2+`"`)
			w.Header().Set("Location", h.srv.URL+"/blobs/"+f)
			w.WriteHeader(http.StatusFound)
			return
		}
		w.Header().Set("ETag", `"`+s1+`"`)
		h.content(w, r, f, b)
	case strings.HasPrefix(p, "/blobs/"):
		f := strings.TrimPrefix(p, "/blobs/")
		b, ok := h.files[f]
		if !ok {
			http.Error(w, "no such blob", 404)
			return
		}
		h.content(w, r, f, b)
	default:
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "Repository not found", 404)
	}
}

func (h *miniHub) content(w http.ResponseWriter, r *http.Request, f string, b []byte) {
	if r.Method == http.MethodGet {
		h.mu.Lock()
		h.gets[f]++
		h.mu.Unlock()
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

// videosFetched returns the mp4 files GET from the hub.
func (h *miniHub) videosFetched() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for f := range h.gets {
		if strings.HasSuffix(f, ".mp4") {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// cameraColumns returns every sample's camera bytes by dataset index.
func cameraColumns(t *testing.T, raw []byte) map[string][]byte {
	t.Helper()
	_, bs := decodeAll(t, raw)
	out := map[string][]byte{}
	for _, b := range bs {
		idx := batchIndexes(t, b)
		for _, c := range []string{"observation.images.front", "observation.images.wrist"} {
			col, ok := b.Column(c).(*sink.Array)
			if !ok {
				t.Fatalf("no column %s", c)
			}
			fb := len(col.Data) / b.Size
			for i, x := range idx {
				out[fmt.Sprint(c, x)] = col.Data[i*fb : (i+1)*fb]
			}
		}
	}
	return out
}

// TestCamerasHub: a Hub dataset's cameras are decoded from video files
// materialized through fetch.Materialize — into the Hugging Face cache
// with --download full, into temporary files removed after the run with
// --download none — with the same pixels as the local copy; only the
// video files of the selected episodes are downloaded.
func TestCamerasHub(t *testing.T) {
	dir := videoDataset(t, func(o *datagen.Options) { o.Episodes, o.MinFrames, o.MaxFrames, o.FramesPerFile = 4, 10, 14, 25 })
	local, err := cameraConfig(t, dir, "all")
	if err != nil {
		t.Fatal(err)
	}
	// Episodes of the last data file only: its video files alone.
	last := local.Dataset.Episodes[len(local.Dataset.Episodes)-1]
	var sel []int64
	for _, e := range local.Dataset.Episodes {
		if e.DataFile == last.DataFile {
			sel = append(sel, e.Index)
		}
	}
	local.Selection = episodeSelection(sel)
	want, _, err := streamBytes(local, 8)
	if err != nil {
		t.Fatal(err)
	}
	wantCols := cameraColumns(t, want)
	rec, err := render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []fetch.CacheMode{fetch.CacheFull, fetch.CacheNone} {
		t.Run(string(mode), func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			hub := newMiniHub(t, dir, "org/cams")
			cache := t.TempDir()
			src, err := fetch.OpenDataset(context.Background(), "org/cams", fetch.HubOptions{Endpoint: hub.srv.URL, CacheDir: cache, Cache: mode})
			if err != nil {
				t.Fatal(err)
			}
			ds, err := shard.OpenDataset(context.Background(), src)
			if err != nil {
				t.Fatal(err)
			}
			cfg := &Config{Source: src, Dataset: ds, Recipe: rec, Mode: render.ModeFallback, Workers: 2, Selection: episodeSelection(sel)}
			if err := SetupCameras(context.Background(), cfg, CameraOptions{}); err != nil {
				t.Fatal(err)
			}
			if cfg.Cameras == nil || len(cfg.Cameras.Cameras) != 2 {
				t.Fatalf("auto on the Hub: cameras %+v", cfg.CameraStatus)
			}
			got, _, err := streamBytes(cfg, 8)
			if err != nil {
				t.Fatal(err)
			}
			gotCols := cameraColumns(t, got)
			if len(gotCols) != len(wantCols) || len(gotCols) == 0 {
				t.Fatalf("%d camera frames from the Hub, %d locally", len(gotCols), len(wantCols))
			}
			for k, v := range wantCols {
				if !bytes.Equal(gotCols[k], v) {
					t.Fatalf("%s: Hub pixels differ from the local copy's", k)
				}
			}
			wantFiles := []string{
				fmt.Sprintf("videos/observation.images.front/chunk-000/file-%03d.mp4", last.DataFile),
				fmt.Sprintf("videos/observation.images.wrist/chunk-000/file-%03d.mp4", last.DataFile),
			}
			if f := hub.videosFetched(); fmt.Sprint(f) != fmt.Sprint(wantFiles) {
				t.Fatalf("video files downloaded %v, want %v (the selected episodes' only)", f, wantFiles)
			}
			var cached []string
			filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
				if err == nil && strings.HasSuffix(p, ".mp4") {
					cached = append(cached, p)
				}
				return nil
			})
			left, _ := os.ReadDir(tmp)
			switch mode {
			case fetch.CacheFull:
				if len(cached) != 2 {
					t.Fatalf("--download full: %d videos in the cache, want 2: %v", len(cached), cached)
				}
			case fetch.CacheNone:
				if len(cached) != 0 {
					t.Fatalf("--download none: videos in the cache: %v", cached)
				}
				if len(left) != 0 {
					t.Fatalf("--download none: temporary files left after the run: %v", left)
				}
			}
		})
	}
}
