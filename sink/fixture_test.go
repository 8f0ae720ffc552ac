package sink

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/schema"
)

// Test fixtures: a realistic stream of batches with messages (text,
// multimodal blocks, tool calls), 14-dim state/action and raw language.

const dim = 14

var fixtureFeatures = []collate.Feature{
	{Name: "observation.state", DType: "<f4", Shape: []int{dim}},
	{Name: "action", DType: "<f4", Shape: []int{dim}},
	{Name: "observation.flag", DType: "|b1", Shape: []int{}},
	{Name: "observation.grid", DType: "<i4", Shape: []int{2, 3}},
}

func fixtureSample(i int) *schema.Sample {
	s := &schema.Sample{
		Messages: []schema.Message{
			{Role: "user", Kind: schema.TextContent, Text: fmt.Sprintf("Task: pick up the red cube and put it in the bin (frame %d) — ünïcødé 🤖 \"quoted\" <tag>", i)},
			{Role: "assistant", Kind: schema.TextContent, Text: "Plan: 1. reach\n2. grasp\n3. lift"},
			{Role: "user", Kind: schema.BlockContent, Blocks: []schema.Map{
				{Keys: []string{"type", "feature"}, Values: []any{"image", "observation.images.front"}},
				{Keys: []string{"type", "text"}, Values: []any{"text", "What is in the gripper?"}},
				{Keys: []string{"type", "n", "f", "ok", "nil", "list"}, Values: []any{"extra", int64(-5), 2.5, true, nil, []any{int64(1), "x"}}},
			}},
			{Role: "assistant", Kind: schema.TextContent, Text: "subtask: grasp the cube"},
		},
		Streams: []string{"high_level", "high_level", "low_level", "low_level"},
		Targets: []int{1, 3},
	}
	if i%3 == 0 {
		s.Messages = append(s.Messages, schema.Message{Role: "assistant", Kind: schema.NoContent,
			ToolCalls: json.RawMessage(`[{"type": "function", "function": {"name": "say", "arguments": {"text": "hello \u00e9\ud83e\udd16", "z": 1, "a": [1.5, -2, 1e400, null, true]}}}]`)})
		s.Streams = append(s.Streams, "high_level")
	}
	return s
}

func fixtureFrame(i int) *collate.Frame {
	f := &collate.Frame{
		Index: int64(i), EpisodeIndex: int64(i / 50), FrameIndex: int64(i % 50), TaskIndex: int64(i % 3),
		Timestamp: float32(i%50) / 30, Task: fmt.Sprintf("task %d", i%3), Sample: fixtureSample(i),
	}
	var state, action, grid []byte
	for d := 0; d < dim; d++ {
		state = binary.LittleEndian.AppendUint32(state, math.Float32bits(float32(i)+float32(d)/100))
		action = binary.LittleEndian.AppendUint32(action, math.Float32bits(-float32(i)-float32(d)/100))
	}
	for d := 0; d < 6; d++ {
		grid = binary.LittleEndian.AppendUint32(grid, uint32(int32(i*10-d)))
	}
	f.Features = [][]byte{state, action, {byte(i % 2)}, grid}
	f.Strings = []string{[]string{"ds_a", "ds_b"}[i%2]}
	f.Persistent = []schema.Row{
		{Role: "assistant", Content: schema.Str("grasp the cube"), Style: schema.Str("subtask"), Timestamp: 0.5, HasTimestamp: true},
		{Role: "assistant", Content: nil, Style: schema.Str("memory"), Timestamp: 1, HasTimestamp: true,
			ToolCalls: json.RawMessage(`[{"type":"function","function":{"name":"note","arguments":{"k":"v"}}}]`)},
	}
	if i%4 == 0 {
		f.Events = []schema.Row{{Role: "user", Content: schema.Str("wait!"), Style: schema.Str("interjection"), Camera: schema.Str("front")}}
	}
	return f
}

func fixtureHeader(b *collate.Batcher) Header {
	return Header{
		Version: "test", Dataset: "lrstream/fixture", Revision: "0123abcd", FPS: 30,
		Recipe: "fixture.yaml", RecipeSHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Mode: "fallback", BatchSize: b.Config().BatchSize, KeepLanguage: b.Config().KeepLanguage,
		Features:   b.Columns(),
		Strings:    b.Config().Strings,
		Tools:      json.RawMessage(`[{"type": "function", "function": {"name": "say", "description": "Speak", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}]`),
		Options:    json.RawMessage(`{"shuffle": false, "seed": 0, "episodes": null}`),
		Components: []string{"low", "high"},
		Share:      Share{Rank: 0, WorldSize: 1, Worker: 0, NumWorkers: 1},
	}
}

// writeFixture streams n frames in batches of bs to s and returns the
// batches it produced (already encoded, so callers may inspect them before
// they are recycled only through the returned copies of their indices).
func writeFixture(t testing.TB, s Sink, n, bs int, keepLanguage bool) {
	t.Helper()
	b, err := collate.NewBatcher(collate.Config{BatchSize: bs, Features: fixtureFeatures, Strings: []string{"dataset"}, KeepLanguage: keepLanguage})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Header(fixtureHeader(b)); err != nil {
		t.Fatal(err)
	}
	var seq int64
	emit := func(bt *collate.Batch) {
		if err := s.Batch(bt, BatchMeta{Seq: seq, Resume: fmt.Sprintf("tok-%d", seq)}); err != nil {
			t.Fatal(err)
		}
		seq++
		b.Recycle(bt)
	}
	for i := 0; i < n; i++ {
		if i%7 == 6 {
			b.AddNone()
			continue
		}
		bt, err := b.Add(fixtureFrame(i))
		if err != nil {
			t.Fatal(err)
		}
		if bt != nil {
			emit(bt)
		}
	}
	bt, err := b.Flush()
	if err != nil {
		t.Fatal(err)
	}
	if bt != nil {
		emit(bt)
	}
	c := b.Counts()
	if err := s.End(End{Frames: int64(n), Rendered: c.Kept, Dropped: c.None, Batches: c.Batches, Samples: c.Kept,
		Components: []ComponentCount{{"low", c.Kept / 2}, {"high", c.Kept - c.Kept/2}}}); err != nil {
		t.Fatal(err)
	}
}
