package shard

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

type expectedPersistent struct {
	Episode    int64           `json:"episode_index"`
	File       string          `json:"file"`
	Persistent json.RawMessage `json:"language_persistent"`
}

type expectedEvents struct {
	Index     int64           `json:"index"`
	Episode   int64           `json:"episode_index"`
	Frame     int64           `json:"frame_index"`
	Timestamp float64         `json:"timestamp"`
	Events    json.RawMessage `json:"language_events"`
}

func readJSONL[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConformanceDecodedRows checks that every conformance dataset decodes
// to exactly expected/decoded_persistent.jsonl and decoded_events.jsonl.
func TestConformanceDecodedRows(t *testing.T) {
	for _, dir := range conformanceDatasets(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ds, batches := readAll(t, mustDir(t, dir), Selection{}, Options{})
			gotPers := map[int64]string{}
			gotFile := map[int64]string{}
			var gotEvents []expectedEvents
			frames := 0
			prevIndex := int64(-1)
			for _, b := range batches {
				for i := 0; i < b.Len(); i++ {
					frames++
					if b.Index[i] <= prevIndex {
						t.Fatalf("index %d after %d: not in global index order", b.Index[i], prevIndex)
					}
					prevIndex = b.Index[i]
					ep := b.EpisodeIndex[i]
					p := rowsJSON(b.PersistentRows(i), true)
					if old, ok := gotPers[ep]; ok && old != p {
						t.Fatalf("episode %d: persistent list differs between frames", ep)
					}
					gotPers[ep] = p
					gotFile[ep] = b.File
					if ev := b.EventRows(i); len(ev) > 0 {
						gotEvents = append(gotEvents, expectedEvents{
							Index: b.Index[i], Episode: ep, Frame: b.FrameIndex[i],
							Timestamp: float64(b.Timestamp[i]),
							Events:    json.RawMessage(rowsJSON(ev, false)),
						})
					}
				}
			}
			if int64(frames) != ds.Info.TotalFrames {
				t.Errorf("read %d frames, info.json says %d", frames, ds.Info.TotalFrames)
			}
			wantPers := readJSONL[expectedPersistent](t, filepath.Join(dir, "expected", "decoded_persistent.jsonl"))
			if len(wantPers) != len(gotPers) {
				t.Errorf("%d episodes decoded, expected %d", len(gotPers), len(wantPers))
			}
			fails := 0
			for _, w := range wantPers {
				got, ok := gotPers[w.Episode]
				if !ok {
					t.Errorf("episode %d missing", w.Episode)
					continue
				}
				if gotFile[w.Episode] != w.File {
					t.Errorf("episode %d read from %s, expected %s", w.Episode, gotFile[w.Episode], w.File)
				}
				if g, e := canonJSON(t, []byte(got)), canonJSON(t, w.Persistent); g != e {
					fails++
					if fails < 4 {
						t.Errorf("episode %d persistent:\n got %s\nwant %s", w.Episode, g, e)
					}
				}
			}
			wantEv := readJSONL[expectedEvents](t, filepath.Join(dir, "expected", "decoded_events.jsonl"))
			if len(wantEv) != len(gotEvents) {
				t.Errorf("%d frames with events, expected %d", len(gotEvents), len(wantEv))
			}
			for i := 0; i < len(wantEv) && i < len(gotEvents); i++ {
				w, g := wantEv[i], gotEvents[i]
				if w.Index != g.Index || w.Episode != g.Episode || w.Frame != g.Frame || w.Timestamp != g.Timestamp {
					t.Fatalf("event frame %d: got index %d ep %d frame %d t %v, want index %d ep %d frame %d t %v",
						i, g.Index, g.Episode, g.Frame, g.Timestamp, w.Index, w.Episode, w.Frame, w.Timestamp)
				}
				if ge, we := canonJSON(t, g.Events), canonJSON(t, w.Events); ge != we {
					fails++
					if fails < 8 {
						t.Errorf("index %d events:\n got %s\nwant %s", w.Index, ge, we)
					}
				}
			}
			if fails > 0 {
				t.Errorf("%d mismatches", fails)
			}
			t.Logf("%d frames, %d episodes, %d frames with events: %s", frames, len(gotPers), len(gotEvents), strconv.Quote(ds.Info.CodebaseVersion))
		})
	}
}

// TestPersistentDecodedOncePerEpisode checks that a batch holds one
// distinct persistent list per annotated episode.
func TestPersistentDecodedOncePerEpisode(t *testing.T) {
	for _, dir := range conformanceDatasets(t) {
		_, batches := readAll(t, mustDir(t, dir), Selection{}, Options{})
		for _, b := range batches {
			eps := map[int64]bool{}
			for i := 0; i < b.Len(); i++ {
				if b.PersistentOf != nil && b.PersistentOf[i] >= 0 {
					eps[b.EpisodeIndex[i]] = true
				}
			}
			if len(b.Persistent) != len(eps) {
				t.Errorf("%s %s rg %d: %d distinct persistent lists for %d annotated episodes", filepath.Base(dir), b.File, b.RowGroup, len(b.Persistent), len(eps))
			}
		}
	}
}

// TestPersistentDiffersWithinEpisode checks the fallback when the
// persistent list is not identical on every frame of an episode: the
// odd frame gets its own list, its neighbours keep the episode's.
func TestPersistentDiffersWithinEpisode(t *testing.T) {
	name := "data/chunk-000/file-000.parquet"
	dir := copyDataset(t, inferredDir(t))
	rewriteColumn(t, filepath.Join(dir, name), "language_persistent", func(a arrow.Array) arrow.Array {
		// Frame 10 (episode 0) gets frame 60's list (episode 1).
		parts := []arrow.Array{array.NewSlice(a, 0, 10), array.NewSlice(a, 60, 61), array.NewSlice(a, 11, int64(a.Len()))}
		out, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
	_, batches := readAll(t, mustDir(t, dir), Selection{}, Options{})
	b := batches[0]
	if b.File != name || b.EpisodeIndex[10] != 0 || b.EpisodeIndex[60] != 1 {
		t.Fatalf("unexpected layout: %s, episodes %d %d", b.File, b.EpisodeIndex[10], b.EpisodeIndex[60])
	}
	p9, p10, p11, p60 := rowsJSON(b.PersistentRows(9), true), rowsJSON(b.PersistentRows(10), true), rowsJSON(b.PersistentRows(11), true), rowsJSON(b.PersistentRows(60), true)
	if p10 != p60 || p9 != p11 || p9 == p10 {
		t.Fatal("frame 10 does not carry the substituted list")
	}
	if b.PersistentOf[9] == b.PersistentOf[10] || b.PersistentOf[10] == b.PersistentOf[11] {
		t.Fatalf("PersistentOf %v", b.PersistentOf[8:13])
	}
	if b.PersistentOf[0] != b.PersistentOf[9] {
		t.Fatal("identical frames not shared")
	}
}
