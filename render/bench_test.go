package render

import (
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/lrstream/lrstream/schema"
)

// benchEpisode is one episode of the public conformance dataset
// pub_inferred_front_wrist (15 fps, front/wrist cameras): its decoded
// persistent rows and per-frame events, with frame timestamps rebuilt as
// float32(frame/fps) like the parquet column.
type benchEpisode struct {
	persistent []schema.Row
	frames     []Frame
	lang       []bool
}

func loadBenchEpisodes(b *testing.B) []benchEpisode {
	b.Helper()
	dir := filepath.Join(sharedDir(b), "conformance", "datasets", "pub_inferred_front_wrist", "expected")
	type persLine struct {
		Episode    int             `json:"episode_index"`
		Persistent json.RawMessage `json:"language_persistent"`
	}
	type evLine struct {
		Index   int64           `json:"index"`
		Episode int             `json:"episode_index"`
		Frame   int             `json:"frame_index"`
		T       float64         `json:"timestamp"`
		Events  json.RawMessage `json:"language_events"`
	}
	t := &testing.T{}
	pers := readJSONL[persLine](t, filepath.Join(dir, "decoded_persistent.jsonl"))
	evs := readJSONL[evLine](t, filepath.Join(dir, "decoded_events.jsonl"))
	if len(pers) == 0 {
		b.Skip("conformance dataset not available")
	}
	const fps = 15
	task := "put the red cube in the bowl"
	var out []benchEpisode
	var index int64
	for _, p := range pers {
		rows, err := RowsFromJSON(p.Persistent, true)
		if err != nil {
			b.Fatal(err)
		}
		last := 0.0
		for _, r := range rows {
			last = math.Max(last, r.Timestamp)
		}
		n := int(last*fps) + 2*fps
		ep := benchEpisode{persistent: rows}
		for k := 0; k < n; k++ {
			f := Frame{T: float64(float32(float64(k) / fps)), SampleIdx: index}
			f.SetCanonicalTask(task, false)
			for _, e := range evs {
				if e.Episode == p.Episode && e.Frame == k {
					er, err := RowsFromJSON(e.Events, false)
					if err != nil {
						b.Fatal(err)
					}
					f.Events = er
				}
			}
			ep.frames = append(ep.frames, f)
			ep.lang = append(ep.lang, len(rows) > 0 || len(f.Events) > 0)
			index++
		}
		out = append(out, ep)
	}
	return out
}

func benchRecipe(b *testing.B, file string) {
	rec, err := LoadFile(filepath.Join(sharedDir(b), "recipes", file))
	if err != nil {
		b.Fatal(err)
	}
	eps := loadBenchEpisodes(b)
	compiled := make([]*Episode, len(eps))
	frames := 0
	for i, ep := range eps {
		if compiled[i], err = rec.Episode(ep.persistent); err != nil {
			b.Fatal(err)
		}
		frames += len(ep.frames)
	}
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		for i, ep := range eps {
			for k := range ep.frames {
				if done == b.N {
					return
				}
				_ = compiled[i].Apply(ModeFallback, ep.frames[k], ep.lang[k])
				done++
			}
		}
	}
}

func BenchmarkRenderSubtask(b *testing.B)      { benchRecipe(b, "subtask.yaml") }
func BenchmarkRenderSubtaskJoint(b *testing.B) { benchRecipe(b, "subtask_joint.yaml") }
func BenchmarkRenderSubtaskMem(b *testing.B)   { benchRecipe(b, "subtask_mem.yaml") }
func BenchmarkRenderSubtaskMemVQASpeech(b *testing.B) {
	benchRecipe(b, "subtask_mem_vqa_speech.yaml")
}
func BenchmarkRenderPi05HiRobot(b *testing.B) { benchRecipe(b, "pi05_hirobot.yaml") }

// BenchmarkEpisodeCompile measures Recipe.Episode per episode.
func BenchmarkEpisodeCompile(b *testing.B) {
	rec, err := LoadFile(filepath.Join(sharedDir(b), "recipes", "subtask_mem_vqa_speech.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	eps := loadBenchEpisodes(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := rec.Episode(eps[i%len(eps)].persistent); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad measures loading the largest real recipe.
func BenchmarkLoad(b *testing.B) {
	path := filepath.Join(sharedDir(b), "recipes", "pi05_hirobot.yaml")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := LoadFile(path); err != nil {
			b.Fatal(err)
		}
	}
}
