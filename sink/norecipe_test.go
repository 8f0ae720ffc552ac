package sink

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/collate"
)

// writeNoRecipe streams n frames without messages (no recipe) in batches
// of bs to s, with a header of mode ModeNoRecipe.
func writeNoRecipe(t *testing.T, s Sink, n, bs int) {
	t.Helper()
	b, err := collate.NewBatcher(collate.Config{BatchSize: bs, Features: fixtureFeatures, Strings: []string{"dataset"}})
	if err != nil {
		t.Fatal(err)
	}
	h := fixtureHeader(b)
	h.Recipe, h.RecipeSHA256, h.Mode, h.Components = "", "", ModeNoRecipe, nil
	if err := s.Header(h); err != nil {
		t.Fatal(err)
	}
	var seq int64
	for i := 0; i <= n; i++ {
		var bt *collate.Batch
		if i < n {
			f := fixtureFrame(i)
			f.Sample = nil
			bt, err = b.Add(f)
		} else {
			bt, err = b.Flush()
		}
		if err != nil {
			t.Fatal(err)
		}
		if bt != nil {
			if err := s.Batch(bt, BatchMeta{Seq: seq}); err != nil {
				t.Fatal(err)
			}
			seq++
			b.Recycle(bt)
		}
	}
	c := b.Counts()
	if err := s.End(End{Frames: int64(n), Passthrough: int64(n), Batches: c.Batches, Samples: c.Kept}); err != nil {
		t.Fatal(err)
	}
}

// TestNoRecipeStream: a stream without a recipe says so in the preview's
// header line, calls its batches neither rendered nor passthrough, and
// its msgpack batches carry no rendered column.
func TestNoRecipeStream(t *testing.T) {
	var buf bytes.Buffer
	writeNoRecipe(t, NewPreview(&buf, 2), 10, 4)
	out := buf.String()
	for _, want := range []string{"30 fps, no recipe (nothing rendered, no messages), batch size 4", "batch 0 (epoch 0): 4 samples, index 0..3",
		`[1] index 1, episode 0, frame 1, t=0.033s, task "task 1"`, "end: 10 frames read, 0 rendered, 0 dropped, 10 passthrough"} {
		if !strings.Contains(out, want) {
			t.Errorf("preview lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"recipe  (sha256", "mode none", "passthrough samples", "rendered samples"} {
		if strings.Contains(out, bad) {
			t.Errorf("preview has %q:\n%s", bad, out)
		}
	}

	buf.Reset()
	writeNoRecipe(t, NewMsgpack(&buf), 10, 4)
	s, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if s.Header.Mode != ModeNoRecipe || s.Header.Recipe != "" || len(s.Batches) != 3 {
		t.Fatalf("header %+v, %d batches", s.Header, len(s.Batches))
	}
	for _, b := range s.Batches {
		var names []string
		for _, f := range b.Columns {
			names = append(names, f.Name)
		}
		if got := strings.Join(names, ","); got != "index,episode_index,frame_index,timestamp,task_index,observation.state,action,observation.flag,observation.grid,task,dataset" {
			t.Errorf("batch %d columns %s", b.Meta.Seq, got)
		}
	}
}
