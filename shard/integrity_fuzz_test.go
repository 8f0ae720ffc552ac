package shard

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/schema"
)

// metaFS returns the inferred conformance dataset's metadata files.
func metaFS(t testing.TB) fstest.MapFS {
	dir := inferredDir(t)
	fsys := fstest.MapFS{}
	for _, n := range []string{InfoPath, TasksPath, "meta/episodes/chunk-000/file-000.parquet"} {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		fsys[n] = &fstest.MapFile{Data: data}
	}
	return fsys
}

// FuzzTasksParquet feeds meta/tasks.parquet bytes to OpenDataset: no
// panic, and an accepted table has unique task indices, sorted, each with
// its text found by TaskText.
func FuzzTasksParquet(f *testing.F) {
	base := metaFS(f)
	seed := base[TasksPath].Data
	f.Add(seed)
	f.Add(seed[:len(seed)-9])
	f.Add(append([]byte(nil), seed[len(seed)/3:]...))
	f.Add([]byte("PAR1PAR1"))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := withFile(base, TasksPath, data)
		ds, err := OpenDatasetWith(ctx, fetch.NewFS("fuzz", fsys), OpenOptions{Tolerate: func(error) {}})
		if err != nil {
			return
		}
		for i, tk := range ds.Tasks {
			if i > 0 && tk.Index <= ds.Tasks[i-1].Index {
				t.Fatalf("tasks not sorted or not unique: %d after %d", tk.Index, ds.Tasks[i-1].Index)
			}
			if txt, ok := ds.TaskText(tk.Index); !ok || txt != tk.Text {
				t.Fatalf("TaskText(%d) = %q, %v", tk.Index, txt, ok)
			}
		}
	})
}

// FuzzEpisodesIndex feeds episodes index bytes to OpenDataset and Plan:
// no panic, and an index accepted without tolerance is consistent
// (lengths match ranges, no overlap, totals match info.json); a plan of an
// accepted index only has units of indexed episodes.
func FuzzEpisodesIndex(f *testing.F) {
	base := metaFS(f)
	name := "meta/episodes/chunk-000/file-000.parquet"
	seed := base[name].Data
	f.Add(seed)
	f.Add(seed[:len(seed)-1])
	flip := append([]byte(nil), seed...)
	for i := len(flip) - 400; i < len(flip)-8; i += 37 {
		flip[i] ^= 0x10
	}
	f.Add(flip)
	f.Add([]byte("PAR1PAR1"))
	dataDir := inferredDir(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := withFile(base, name, data)
		ds, err := OpenDataset(ctx, fetch.NewFS("fuzz", fsys))
		if err != nil {
			return
		}
		var frames int64
		for i, e := range ds.Episodes {
			if e.Length != e.ToIndex-e.FromIndex || e.Length <= 0 {
				t.Fatalf("episode %d: length %d for [%d, %d)", e.Index, e.Length, e.FromIndex, e.ToIndex)
			}
			if i > 0 && e.Index <= ds.Episodes[i-1].Index {
				t.Fatalf("episodes not sorted or not unique")
			}
			frames += e.Length
		}
		if frames != ds.Info.TotalFrames || int64(len(ds.Episodes)) != ds.Info.TotalEpisodes {
			t.Fatalf("accepted %d episodes / %d frames, info.json says %d / %d", len(ds.Episodes), frames, ds.Info.TotalEpisodes, ds.Info.TotalFrames)
		}
		// Plan against the real data files.
		src := mustDir(t, dataDir)
		units, err := Plan(ctx, &overlay{Source: src, fsys: fsys}, ds, Selection{})
		if err != nil {
			return
		}
		for _, u := range units {
			for _, e := range u.Episodes {
				if _, ok := ds.Episode(e); !ok {
					t.Fatalf("unit %s/%d lists unindexed episode %d", u.File, u.RowGroup, e)
				}
			}
		}
	})
}

// overlay serves fsys's files over a source's.
type overlay struct {
	fetch.Source
	fsys fstest.MapFS
}

func (o *overlay) Open(ctx context.Context, name string) (fetch.File, error) {
	if _, ok := o.fsys[name]; ok {
		return fetch.NewFS("fuzz", o.fsys).Open(ctx, name)
	}
	return o.Source.Open(ctx, name)
}

func (o *overlay) List(ctx context.Context, dir string) ([]string, error) {
	if dir == EpisodesDir {
		return fetch.NewFS("fuzz", o.fsys).List(ctx, dir)
	}
	return o.Source.List(ctx, dir)
}

// toolCallsDataset writes a two-frame, one-episode dataset whose frame 0
// has one language_events row with tool_calls = [text], JSON text as the
// documented schema stores it.
func toolCallsDataset(t testing.TB, text string) fstest.MapFS {
	mem := memory.DefaultAllocator
	write := func(rec arrow.RecordBatch) []byte {
		return writeParquet(t, rec, parquet.NewWriterProperties(parquet.WithStats(true)), pqarrow.NewArrowWriterProperties())
	}
	ints := func(v ...int64) arrow.Array {
		b := array.NewInt64Builder(mem)
		b.AppendValues(v, nil)
		return b.NewArray()
	}
	i64 := arrow.PrimitiveTypes.Int64
	rowType := arrow.StructOf(
		arrow.Field{Name: "role", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "content", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "style", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "camera", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "tool_calls", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	)
	lb := array.NewListBuilder(mem, rowType)
	sb := lb.ValueBuilder().(*array.StructBuilder)
	lb.Append(true)
	sb.Append(true)
	sb.FieldBuilder(0).(*array.StringBuilder).Append("assistant")
	sb.FieldBuilder(1).AppendNull()
	sb.FieldBuilder(2).AppendNull()
	sb.FieldBuilder(3).AppendNull()
	tc := sb.FieldBuilder(4).(*array.ListBuilder)
	tc.Append(true)
	tc.ValueBuilder().(*array.StringBuilder).Append(text)
	lb.Append(true) // frame 1: no events
	events := lb.NewArray()
	ts := array.NewFloat32Builder(mem)
	ts.AppendValues([]float32{0, 0.1}, nil)
	dataSchema := arrow.NewSchema([]arrow.Field{
		{Name: ColIndex, Type: i64}, {Name: ColTimestamp, Type: arrow.PrimitiveTypes.Float32},
		{Name: ColEpisodeIndex, Type: i64}, {Name: ColFrameIndex, Type: i64}, {Name: ColTaskIndex, Type: i64},
		{Name: schema.ColumnEvents, Type: events.DataType(), Nullable: true},
	}, nil)
	data := write(array.NewRecordBatch(dataSchema, []arrow.Array{ints(0, 1), ts.NewArray(), ints(0, 0), ints(0, 1), ints(0, 0), events}, 2))
	epSchema := arrow.NewSchema([]arrow.Field{
		{Name: "episode_index", Type: i64}, {Name: "length", Type: i64}, {Name: "dataset_from_index", Type: i64},
		{Name: "dataset_to_index", Type: i64}, {Name: "data/chunk_index", Type: i64}, {Name: "data/file_index", Type: i64},
	}, nil)
	eps := write(array.NewRecordBatch(epSchema, []arrow.Array{ints(0), ints(2), ints(0), ints(2), ints(0), ints(0)}, 1))
	tb := array.NewStringBuilder(mem)
	tb.Append("do it")
	tasks := write(array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "task_index", Type: i64}, {Name: "task", Type: arrow.BinaryTypes.String}}, nil),
		[]arrow.Array{ints(0), tb.NewArray()}, 1))
	info := `{"codebase_version": "v3.0", "fps": 10, "chunks_size": 1000, "total_episodes": 1, "total_frames": 2, "total_tasks": 1,
		"data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
		"features": {"timestamp": {"dtype": "float32", "shape": [1]}, "frame_index": {"dtype": "int64", "shape": [1]},
		"episode_index": {"dtype": "int64", "shape": [1]}, "index": {"dtype": "int64", "shape": [1]},
		"task_index": {"dtype": "int64", "shape": [1]}, "language_events": {"dtype": "language", "shape": [1]}}}`
	return fstest.MapFS{
		InfoPath:  {Data: []byte(info)},
		TasksPath: {Data: tasks},
		"meta/episodes/chunk-000/file-000.parquet": {Data: eps},
		"data/chunk-000/file-000.parquet":          {Data: data},
	}
}

// FuzzToolCallsJSONText reads a language_events row whose tool_calls
// element is arbitrary JSON text: an error or valid JSON, never a panic,
// and a valid JSON object element comes back as the same JSON value.
func FuzzToolCallsJSONText(f *testing.F) {
	for _, s := range []string{
		`{"type": "function", "function": {"name": "say", "arguments": {"text": "Got it", "volume": 6}}}`,
		`{"a": [1, 2.5, -3e10, null, true], "b": "\u00e9\ud83d\ude00"}`,
		`{}`, `[]`, `"x"`, `1`, `null`, `{"a":`, ``, `{"a": 1} trailing`, "\xff",
	} {
		f.Add(s)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, text string) {
		fsys := toolCallsDataset(t, text)
		src := fetch.NewFS("fuzz", fsys)
		ds, err := OpenDataset(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		units, err := Plan(ctx, src, ds, Selection{})
		if err != nil || len(units) != 1 {
			t.Fatalf("plan: %d units, %v", len(units), err)
		}
		b, err := ReadUnit(ctx, src, ds, units[0], Options{})
		if err != nil {
			return
		}
		rows := b.EventRows(0)
		if len(rows) != 1 {
			t.Fatalf("%d event rows", len(rows))
		}
		tc := rows[0].ToolCalls
		if !json.Valid(tc) {
			t.Fatalf("tool_calls %q is not valid JSON", tc)
		}
		var calls []json.RawMessage
		if err := json.Unmarshal(tc, &calls); err != nil || len(calls) != 1 {
			t.Fatalf("tool_calls %s: want a one-element list (%v)", tc, err)
		}
		var in, out any
		if json.Unmarshal([]byte(text), &in) == nil {
			if _, isObj := in.(map[string]any); isObj {
				if err := json.Unmarshal(calls[0], &out); err != nil || !jsonEqual(in, out) {
					t.Fatalf("tool call %s read back as %s", text, calls[0])
				}
			}
		}
	})
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestToolCallsJSONText: the fuzz fixture reads back (the fuzz body is
// reached, not skipped by an error).
func TestToolCallsJSONText(t *testing.T) {
	call := `{"type": "function", "function": {"name": "say", "arguments": {"text": "Got it", "volume": 6}}}`
	src := fetch.NewFS("t", toolCallsDataset(t, call))
	ctx := context.Background()
	ds, units := mustPlan(t, src)
	b, err := ReadUnit(ctx, src, ds, units[0], Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b.EventRows(0)[0].ToolCalls); canonJSON(t, []byte(got)) != canonJSON(t, []byte("["+call+"]")) {
		t.Fatalf("tool_calls %s", got)
	}
}
