package render

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lrstream/lrstream/schema"
)

// TestRecentCacheIsExact renders a long episode with the shared
// subtask_mem_vqa_speech blend (task_aug rotation, several components,
// events on some frames) through one Episode, whose caches return shared
// samples, and compares every frame with a fresh Episode that has never
// rendered anything.
func TestRecentCacheIsExact(t *testing.T) {
	rec, err := LoadFile(filepath.Join(sharedDir(t), "recipes", "subtask_mem_vqa_speech.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []schema.Row
	for k := 0; k < 6; k++ {
		rows = append(rows, schema.Row{Role: "user", Content: schema.Str(fmt.Sprintf("rephrasing %d", k)), Style: schema.Str("task_aug"), HasTimestamp: true})
	}
	for k := 0; k < 5; k++ {
		ts := float64(k) * 2
		rows = append(rows,
			schema.Row{Role: "assistant", Content: schema.Str(fmt.Sprintf("subtask %d", k)), Style: schema.Str("subtask"), Timestamp: ts, HasTimestamp: true},
			schema.Row{Role: "assistant", Content: schema.Str(fmt.Sprintf("memory %d", k)), Style: schema.Str("memory"), Timestamp: ts + 1, HasTimestamp: true},
			schema.Row{Role: "assistant", Content: schema.Str(fmt.Sprintf("plan %d", k)), Style: schema.Str("plan"), Timestamp: ts, HasTimestamp: true})
	}
	ep, err := rec.Episode(rows)
	if err != nil {
		t.Fatal(err)
	}
	task := "put the cube in the bowl"
	shared := 0
	var prev *schema.Sample
	for i := 0; i < 600; i++ {
		f := Frame{T: float64(float32(float64(i) / 30)), SampleIdx: int64(1000 + i)}
		f.SetCanonicalTask(task, false)
		if i%37 == 0 {
			f.Events = []schema.Row{{Role: "user", Content: schema.Str("stop!"), Style: schema.Str("interjection")}}
		}
		got := ep.Apply(ModeFallback, f, true)
		fresh, err := rec.Episode(rows)
		if err != nil {
			t.Fatal(err)
		}
		want := fresh.Apply(ModeFallback, f, true)
		gb, _ := json.Marshal(got.Sample)
		wb, _ := json.Marshal(want.Sample)
		if got.Outcome != want.Outcome || got.Component != want.Component || string(gb) != string(wb) || (got.Err == nil) != (want.Err == nil) {
			t.Fatalf("frame %d: cached %v %d %s %v, fresh %v %d %s %v", i, got.Outcome, got.Component, gb, got.Err, want.Outcome, want.Component, wb, want.Err)
		}
		if got.Sample != nil && got.Sample == prev {
			shared++
		}
		prev = got.Sample
	}
	t.Logf("%d of 600 frames reused the previous frame's sample", shared)
}
