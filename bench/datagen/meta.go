package datagen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// vecStats accumulates min/max/sum/sum of squares per dimension.
type vecStats struct {
	min, max, sum, sq []float64
	n                 int64
}

func newVecStats(dim int) *vecStats {
	v := &vecStats{min: make([]float64, dim), max: make([]float64, dim), sum: make([]float64, dim), sq: make([]float64, dim)}
	for i := range dim {
		v.min[i], v.max[i] = math.Inf(1), math.Inf(-1)
	}
	return v
}

func (v *vecStats) add(x []float32) {
	dim := len(v.min)
	for i, f := range x {
		d := i % dim
		g := float64(f)
		v.min[d] = min(v.min[d], g)
		v.max[d] = max(v.max[d], g)
		v.sum[d] += g
		v.sq[d] += g * g
	}
	v.n += int64(len(x) / dim)
}

func (v *vecStats) addScalar(g float64, count int64, sum, sq float64) {
	v.min[0] = min(v.min[0], g)
	v.max[0] = max(v.max[0], g)
	v.sum[0] += sum
	v.sq[0] += sq
	v.n += count
}

func (v *vecStats) merge(w *vecStats) {
	for d := range v.min {
		v.min[d] = min(v.min[d], w.min[d])
		v.max[d] = max(v.max[d], w.max[d])
		v.sum[d] += w.sum[d]
		v.sq[d] += w.sq[d]
	}
	v.n += w.n
}

func (v *vecStats) json(integer bool) obj {
	dim := len(v.min)
	mean, std := make([]float64, dim), make([]float64, dim)
	for d := range dim {
		if v.n > 0 {
			mean[d] = v.sum[d] / float64(v.n)
			std[d] = math.Sqrt(max(0, v.sq[d]/float64(v.n)-mean[d]*mean[d]))
		}
	}
	var mn, mx any = v.min, v.max
	if integer {
		a, b := make([]int64, dim), make([]int64, dim)
		for d := range dim {
			a[d], b[d] = int64(v.min[d]), int64(v.max[d])
		}
		mn, mx = a, b
	}
	return obj{{"min", mn}, {"max", mx}, {"mean", mean}, {"std", std}, {"count", []int64{v.n}}}
}

// featureStats are the meta/stats.json statistics of the numeric features.
type featureStats struct {
	action, state, ts, frame, episode, index, task *vecStats
}

func newFeatureStats(dim int) *featureStats {
	return &featureStats{action: newVecStats(dim), state: newVecStats(dim), ts: newVecStats(1),
		frame: newVecStats(1), episode: newVecStats(1), index: newVecStats(1), task: newVecStats(1)}
}

func (s *featureStats) addEpisode(ep int, from, task int64, n, fps int, state, action []float32) {
	s.state.add(state)
	s.action.add(action)
	var tsum, tsq float64
	for f := range n {
		t := float64(frameTime(f, fps))
		tsum += t
		tsq += t * t
	}
	s.ts.addScalar(0, int64(n), tsum, tsq)
	s.ts.addScalar(float64(frameTime(n-1, fps)), 0, 0, 0)
	// sums of 0..n-1 and their squares
	nn := float64(n)
	fs, fq := nn*(nn-1)/2, (nn-1)*nn*(2*nn-1)/6
	s.frame.addScalar(0, int64(n), fs, fq)
	s.frame.addScalar(nn-1, 0, 0, 0)
	e := float64(ep)
	s.episode.addScalar(e, int64(n), e*nn, e*e*nn)
	a := float64(from)
	s.index.addScalar(a, int64(n), a*nn+fs, a*a*nn+2*a*fs+fq)
	s.index.addScalar(a+nn-1, 0, 0, 0)
	t := float64(task)
	s.task.addScalar(t, int64(n), t*nn, t*t*nn)
}

func (s *featureStats) merge(t *featureStats) {
	s.action.merge(t.action)
	s.state.merge(t.state)
	s.ts.merge(t.ts)
	s.frame.merge(t.frame)
	s.episode.merge(t.episode)
	s.index.merge(t.index)
	s.task.merge(t.task)
}

// obj is a JSON object that keeps its key order.
type obj []kv

type kv struct {
	k string
	v any
}

// MarshalJSON implements json.Marshaler.
func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(e.k)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return fmt.Errorf("datagen: %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	return nil
}

func jointNames(dim int) ([]string, string) {
	switch dim {
	case 6:
		return []string{"shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"}, "so101_follower"
	case 14:
		var n []string
		for _, side := range []string{"left", "right"} {
			for _, j := range []string{"waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate", "gripper"} {
				n = append(n, side+"_"+j+".pos")
			}
		}
		return n, "aloha"
	}
	n := make([]string, dim)
	for i := range n {
		n[i] = fmt.Sprintf("joint_%d.pos", i)
	}
	return n, "synthetic"
}

// sayTool is the canonical `say` tool schema the annotation pipeline
// keeps in meta/info.json["tools"].
var sayTool = map[string]any{
	"type": "function",
	"function": obj{
		{"name", "say"},
		{"description", "Speak a short utterance to the user via the TTS executor."},
		{"parameters", obj{
			{"type", "object"},
			{"properties", obj{{"text", obj{{"type", "string"}, {"description", "The verbatim text to speak."}}}}},
			{"required", []string{"text"}},
		}},
	},
}

func (p *plan) info() obj {
	o := &p.o
	names, robot := jointNames(o.Dim)
	scalar := func(dtype string) obj { return obj{{"dtype", dtype}, {"shape", []int{1}}, {"names", nil}} }
	vec := obj{{"dtype", "float32"}, {"names", names}, {"shape", []int{o.Dim}}}
	feats := obj{{"action", vec}, {"observation.state", vec}}
	for _, cam := range o.Cameras {
		feats = append(feats, kv{cam, obj{
			{"dtype", "video"},
			{"shape", []int{o.VideoHeight, o.VideoWidth, 3}},
			{"names", []string{"height", "width", "channels"}},
			{"info", obj{
				{"video.height", o.VideoHeight}, {"video.width", o.VideoWidth}, {"video.codec", videoCodecName(o)},
				{"video.pix_fmt", "yuv420p"}, {"video.is_depth_map", false}, {"video.fps", o.FPS},
				{"video.channels", 3}, {"has_audio", false},
			}},
		}})
	}
	feats = append(feats,
		kv{"timestamp", scalar("float32")},
		kv{"frame_index", scalar("int64")},
		kv{"episode_index", scalar("int64")},
		kv{"index", scalar("int64")},
		kv{"task_index", scalar("int64")})
	if o.Density != DensityNone {
		feats = append(feats, kv{"language_persistent", scalar("language")}, kv{"language_events", scalar("language")})
	}
	var videoPath any
	if len(o.Cameras) > 0 {
		videoPath = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
	}
	info := obj{
		{"codebase_version", "v3.0"},
		{"robot_type", robot},
		{"total_episodes", o.Episodes},
		{"total_frames", p.frames},
		{"total_tasks", len(p.tasks)},
		{"chunks_size", o.FilesPerChunk},
		{"data_files_size_in_mb", 100},
		{"video_files_size_in_mb", 500},
		{"fps", o.FPS},
		{"splits", obj{{"train", fmt.Sprintf("0:%d", o.Episodes)}}},
		{"data_path", "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"},
		{"video_path", videoPath},
		{"features", feats},
	}
	if o.Density != DensityNone {
		info = append(info, kv{"tools", []any{sayTool}})
	}
	return info
}

func (p *plan) writeMeta(root string, st *featureStats) error {
	meta := filepath.Join(root, "meta")
	if err := os.MkdirAll(filepath.Join(meta, "episodes", "chunk-000"), 0o755); err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	if err := writeJSON(filepath.Join(meta, "info.json"), p.info()); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(meta, "datagen.json"), p.o.recordJSON(), 0o644); err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	stats := obj{
		{"action", st.action.json(false)},
		{"observation.state", st.state.json(false)},
		{"timestamp", st.ts.json(false)},
		{"frame_index", st.frame.json(true)},
		{"episode_index", st.episode.json(true)},
		{"index", st.index.json(true)},
		{"task_index", st.task.json(true)},
	}
	if err := writeJSON(filepath.Join(meta, "stats.json"), stats); err != nil {
		return err
	}
	if err := p.writeTasks(filepath.Join(meta, "tasks.parquet")); err != nil {
		return err
	}
	return p.writeEpisodes(filepath.Join(meta, "episodes", "chunk-000", "file-000.parquet"))
}

// pandasTasksMeta is the pandas metadata pyarrow stores with
// meta/tasks.parquet, whose task strings are the DataFrame index.
const pandasTasksMeta = `{"index_columns": ["__index_level_0__"], "column_indexes": [{"name": null, "field_name": null, "pandas_type": "unicode", "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}], "columns": [{"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": null}, {"name": null, "field_name": "__index_level_0__", "pandas_type": "unicode", "numpy_type": "object", "metadata": null}], "attributes": {}, "creator": {"library": "pyarrow", "version": "22.0.0"}, "pandas_version": "2.3.3"}`

func (p *plan) writeTasks(path string) error {
	md := arrow.NewMetadata([]string{"pandas"}, []string{pandasTasksMeta})
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "task_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "__index_level_0__", Type: arrow.BinaryTypes.String, Nullable: true},
	}, &md)
	rb := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
	defer rb.Release()
	for i, t := range p.tasks {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		rb.Field(1).(*array.StringBuilder).Append(t.text)
	}
	return writeParquet(path, rb)
}

func (p *plan) writeEpisodes(path string) error {
	o := &p.o
	fs := []arrow.Field{
		{Name: "episode_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "tasks", Type: listOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "length", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "data/chunk_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "data/file_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "dataset_from_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "dataset_to_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}
	for _, cam := range o.Cameras {
		fs = append(fs,
			arrow.Field{Name: "videos/" + cam + "/chunk_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "videos/" + cam + "/file_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "videos/" + cam + "/from_timestamp", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
			arrow.Field{Name: "videos/" + cam + "/to_timestamp", Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	}
	fs = append(fs,
		arrow.Field{Name: "meta/episodes/chunk_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "meta/episodes/file_index", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	sc := arrow.NewSchema(fs, nil)
	rb := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
	defer rb.Release()
	i64 := func(i int, v int64) { rb.Field(i).(*array.Int64Builder).Append(v) }
	tasks := rb.Field(1).(*array.ListBuilder)
	taskVals := tasks.ValueBuilder().(*array.StringBuilder)
	for _, f := range p.files {
		for ep := f.first; ep < f.end; ep++ {
			n := int64(p.epLen[ep])
			from := p.epFrom[ep]
			i64(0, int64(ep))
			tasks.Append(true)
			taskVals.Append(p.tasks[p.epTask[ep]].text)
			i64(2, n)
			i64(3, int64(f.chunk))
			i64(4, int64(f.index))
			i64(5, from)
			i64(6, from+n)
			c := 7
			for range o.Cameras {
				i64(c, int64(f.chunk))
				i64(c+1, int64(f.index))
				rb.Field(c + 2).(*array.Float64Builder).Append(float64(from-f.from) / float64(o.FPS))
				rb.Field(c + 3).(*array.Float64Builder).Append(float64(from-f.from+n) / float64(o.FPS))
				c += 4
			}
			i64(c, 0)
			i64(c+1, 0)
		}
	}
	return writeParquet(path, rb)
}

// writeParquet writes the builder's content as a single row group.
func writeParquet(path string, rb *array.RecordBuilder) error {
	rec := rb.NewRecordBatch()
	defer rec.Release()
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	defer fh.Close()
	bw := bufio.NewWriter(fh)
	fw, err := pqarrow.NewFileWriter(rec.Schema(), bw, writerProps(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return fmt.Errorf("datagen: %s: %w", path, err)
	}
	if err := fw.Write(rec); err != nil {
		fw.Close()
		return fmt.Errorf("datagen: %s: %w", path, err)
	}
	if err := fw.Close(); err != nil {
		return fmt.Errorf("datagen: %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	return nil
}
