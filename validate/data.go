package validate

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
)

// episodeState follows one episode across the units holding it.
type episodeState struct {
	lastTS   float64
	seen     bool
	persist  []schema.Row // the first frame's persistent rows
	taskAug  bool
	language bool // some frame has persistent rows
}

// data checks every data file: its schema and footer against info.json and
// the index (shard.Plan's checks), then every frame (shard.ReadUnit's
// checks, timing, values, language invariants).
func (v *validator) data(ctx context.Context) {
	v.checked("data files: present, declared columns present (language too), row counts and episode_index statistics match the index, no unindexed files")
	v.checked("frames: episode in the index and in its file, index in the episode's range, frame_index consistent, task_index in tasks.parquet, finite non-negative timestamps")
	v.checked("timing: timestamps increase by 1/fps within each episode")
	v.checked("values: no NaN or infinite float feature values")
	if v.ds.Info.HasLanguage(schema.ColumnPersistent) || v.ds.Info.HasLanguage(schema.ColumnEvents) {
		v.checked("language: styles in the column column_for_style says, camera exactly on view-dependent styles and naming a camera feature, event rows stamped with their frame's time, persistent rows sorted and the same on every frame of an episode, tool calls naming catalog tools, task_aug coverage")
	} else {
		v.notChecked("language: the dataset has no language columns (info.json declares neither language_persistent nor language_events); a recipe renders every frame as its task (the fallback)")
	}
	ds := v.ds
	files := map[string][]schema.Episode{}
	var order []string
	for _, e := range ds.Episodes {
		p, err := ds.Info.DataFile(e.DataChunk, e.DataFile)
		if err != nil {
			v.c.add(Finding{Severity: Error, Check: CheckInfo, File: shard.InfoPath, Column: "data_path", Message: err.Error()})
			return
		}
		if _, ok := files[p]; !ok {
			order = append(order, p)
		}
		files[p] = append(files[p], e)
	}
	if names, err := v.src.List(ctx, "data"); err != nil {
		v.c.add(Finding{Severity: Warning, Check: CheckDataFile, File: "data", Message: "cannot list the data files: " + err.Error()})
	} else {
		for _, n := range names {
			if strings.HasSuffix(n, ".parquet") && files[n] == nil {
				v.c.add(Finding{Severity: Warning, Check: CheckDataFile, File: n, Message: fmt.Sprintf("no episode of %s is in this file: its frames are never read", shard.EpisodesDir)})
			}
		}
	}
	tools, _ := schema.ParseTools(v.raw)
	lc := &langChecker{v: v, tools: map[string]bool{}, cameras: map[string]bool{}}
	for _, t := range tools {
		lc.tools[t.Name] = true
	}
	for _, f := range ds.Info.Features {
		if f.IsVisual() {
			lc.cameras[f.Name] = true
		}
	}
	states := map[int64]*episodeState{}
	images := v.imageChecker()
	for _, p := range order {
		if ctx.Err() != nil {
			return
		}
		sub := *ds
		sub.Episodes = files[p]
		sub.Tolerate = func(err error) { v.c.addErr(Error, CheckDataFile, err) }
		units, err := shard.Plan(ctx, v.src, &sub, shard.Selection{})
		if err != nil {
			v.c.addErr(Error, CheckDataFile, err)
			continue
		}
		for _, u := range units {
			b, err := shard.ReadUnit(ctx, v.src, &sub, u, shard.Options{})
			if err != nil {
				v.c.addErr(Error, CheckFrame, err)
				continue
			}
			v.r.FramesRead += int64(b.Len())
			images.unit(ctx, u, b)
			v.timing(b, states)
			v.values(b)
			lc.batch(b, states)
		}
	}
	if v.r.FramesRead != v.r.Frames {
		v.c.add(Finding{Severity: Error, Check: CheckDataFile, Message: fmt.Sprintf("%d frames read from the data files, the episodes index promises %d (see the findings above)", v.r.FramesRead, v.r.Frames)})
	}
	lc.taskAug(states)
}

func (v *validator) timing(b *shard.Batch, states map[int64]*episodeState) {
	step := 1 / v.ds.Info.FPS
	for i := 0; i < b.Len(); i++ {
		ep := b.EpisodeIndex[i]
		st := states[ep]
		if st == nil {
			st = &episodeState{}
			states[ep] = st
		}
		ts := float64(b.Timestamp[i])
		if st.seen {
			d := ts - st.lastTS
			tol := 1e-4 + 1e-6*ts // LeRobot's tolerance_s, plus float32 rounding
			switch {
			case d <= 0:
				v.c.add(Finding{Severity: Warning, Check: CheckTiming, File: b.File, Episode: i64(ep), Index: i64(b.Index[i]), Column: shard.ColTimestamp,
					Message: "timestamp does not increase (duplicate or backwards frame)"})
			case math.Abs(d-step) > tol:
				v.c.add(Finding{Severity: Warning, Check: CheckTiming, File: b.File, Episode: i64(ep), Index: i64(b.Index[i]), Column: shard.ColTimestamp,
					Message: fmt.Sprintf("timestamp step differs from 1/fps = %.6g s (dropped frames or a wrong fps)", step)})
			}
		}
		st.seen, st.lastTS = true, ts
	}
}

func (v *validator) values(b *shard.Batch) {
	n := b.Len()
	if n == 0 {
		return
	}
	for _, f := range b.Features {
		var size int
		switch f.DType {
		case "<f4":
			size = 4
		case "<f8":
			size = 8
		default:
			continue
		}
		per := len(f.Data) / size / n
		for i := 0; i < n; i++ {
			for k := 0; k < per; k++ {
				off := (i*per + k) * size
				var x float64
				if size == 4 {
					x = float64(math.Float32frombits(binary.LittleEndian.Uint32(f.Data[off:])))
				} else {
					x = math.Float64frombits(binary.LittleEndian.Uint64(f.Data[off:]))
				}
				if math.IsNaN(x) || math.IsInf(x, 0) {
					v.c.add(Finding{Severity: Warning, Check: CheckValues, File: b.File, Episode: i64(b.EpisodeIndex[i]), Index: i64(b.Index[i]), Column: f.Name,
						Message: "NaN or infinite value"})
					break
				}
			}
		}
	}
}

// langChecker checks the language columns' invariants.
type langChecker struct {
	v       *validator
	tools   map[string]bool
	cameras map[string]bool
}

func (lc *langChecker) add(b *shard.Batch, i int, col, msg string) {
	lc.v.c.add(Finding{Severity: Error, Check: CheckLanguage, File: b.File, Episode: i64(b.EpisodeIndex[i]), Index: i64(b.Index[i]), Column: col, Message: msg})
}

func (lc *langChecker) batch(b *shard.Batch, states map[int64]*episodeState) {
	prevK := int32(-2)
	for i := 0; i < b.Len(); i++ {
		st := states[b.EpisodeIndex[i]]
		if b.HasPersistent {
			if k := b.PersistentOf[i]; k != prevK {
				prevK = k
				rows := b.PersistentRows(i)
				if !st.language {
					st.language, st.persist = true, rows
					lc.persistent(b, i, rows, st)
				} else if !reflect.DeepEqual(rows, st.persist) {
					lc.add(b, i, schema.ColumnPersistent, "persistent rows differ from the episode's first frame (LeRobot broadcasts one list to every frame)")
					lc.persistent(b, i, rows, st)
				}
			}
		}
		if b.HasEvents {
			for _, r := range b.EventRows(i) {
				lc.row(b, i, &r, false)
				if r.HasTimestamp && float32(r.Timestamp) != b.Timestamp[i] {
					lc.add(b, i, schema.ColumnEvents, "event row's timestamp is not its frame's timestamp")
				}
			}
		}
	}
}

func (lc *langChecker) persistent(b *shard.Batch, i int, rows []schema.Row, st *episodeState) {
	for j := range rows {
		r := &rows[j]
		lc.row(b, i, r, true)
		if r.Style != nil && *r.Style == schema.StyleTaskAug {
			st.taskAug = true
		}
		if !r.HasTimestamp {
			lc.add(b, i, schema.ColumnPersistent, "persistent row without a timestamp")
		} else if j > 0 && rows[j-1].HasTimestamp && r.Timestamp < rows[j-1].Timestamp {
			lc.add(b, i, schema.ColumnPersistent, "persistent rows are not sorted by timestamp")
		}
	}
}

func (lc *langChecker) row(b *shard.Batch, i int, r *schema.Row, persistent bool) {
	col := schema.ColumnEvents
	if persistent {
		col = schema.ColumnPersistent
	}
	if err := schema.ValidateRow(r, persistent); err != nil {
		lc.add(b, i, col, err.Error())
	}
	if r.Camera != nil && *r.Camera != "" && !lc.cameras[*r.Camera] {
		lc.add(b, i, col, fmt.Sprintf("camera %q is not a video or image feature of info.json", *r.Camera))
	}
	if r.ToolCalls != nil {
		if msg := lc.toolCalls(r.ToolCalls); msg != "" {
			lc.add(b, i, col, msg)
		}
	}
}

// toolCalls checks a row's tool calls: a list of {"function": {"name"}}
// objects naming tools of the catalog.
func (lc *langChecker) toolCalls(raw json.RawMessage) string {
	if string(raw) == "null" {
		return ""
	}
	var calls []json.RawMessage
	if err := json.Unmarshal(raw, &calls); err != nil {
		return "tool_calls is not a list: " + err.Error()
	}
	for _, c := range calls {
		if string(c) == "null" {
			continue
		}
		var call struct {
			Function *struct {
				Name *string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(c, &call); err != nil {
			return "tool call is not an object: " + err.Error()
		}
		if call.Function == nil || call.Function.Name == nil {
			return "tool call without function.name"
		}
		if !lc.tools[*call.Function.Name] {
			return fmt.Sprintf("tool call names %q, which is not in the tool catalog (info.json tools, or LeRobot's default say)", *call.Function.Name)
		}
	}
	return ""
}

// taskAug reports task_aug coverage: rows on some episodes but not all
// make the rotated task depend on the episode.
func (lc *langChecker) taskAug(states map[int64]*episodeState) {
	var with, lang int
	for _, st := range states {
		if st.language {
			lang++
		}
		if st.taskAug {
			with++
		}
	}
	if lang == 0 {
		return
	}
	f := Finding{Severity: Info, Check: CheckLanguage, Column: schema.ColumnPersistent,
		Message: fmt.Sprintf("task_aug rows in %d of the %d episodes with persistent rows", with, lang)}
	if with > 0 && with < lang {
		f.Message += " (episodes without them always render the canonical task)"
	}
	lc.v.c.add(f)
}
