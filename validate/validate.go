package validate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/video"
)

// Severity grades a finding.
type Severity string

// Severities. Errors make lrstream (or LeRobot) fail, or lose or
// misrender frames; warnings are suspicious but streamable; info findings
// describe the dataset.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
	Info    Severity = "info"
)

// Check names, the "check" field of a finding.
const (
	CheckInfo     = "info"     // meta/info.json
	CheckTasks    = "tasks"    // meta/tasks.parquet
	CheckIndex    = "index"    // meta/episodes against itself and info.json
	CheckDataFile = "data"     // data files against info.json and the index
	CheckFrame    = "frame"    // decoded frames against the metadata
	CheckTiming   = "timing"   // timestamps within episodes
	CheckValues   = "values"   // numeric feature values
	CheckLanguage = "language" // language column invariants
	CheckVideo    = "video"    // video files
	CheckImage    = "image"    // image features (encoded images in the data files)
	CheckRecipe   = "recipe"   // what --recipe does on the dataset
)

// Finding is one problem (or fact) found. Location fields that do not apply
// are omitted from JSON.
type Finding struct {
	Severity Severity `json:"severity"`
	Check    string   `json:"check"`
	// File is the dataset-relative file concerned.
	File     string `json:"file,omitempty"`
	RowGroup *int   `json:"row_group,omitempty"`
	Episode  *int64 `json:"episode,omitempty"`
	// Index is the global frame index of the first frame concerned.
	Index  *int64 `json:"index,omitempty"`
	Column string `json:"column,omitempty"`
	// Message says what is wrong (and, where it helps, what to do).
	Message string `json:"message"`
	// Count is how many times the same finding occurred (frames of the
	// episode, for a per-frame finding); 1 when it occurred once.
	Count int `json:"count"`
}

// String formats the finding on one line.
func (f Finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-7s %-8s ", f.Severity, f.Check)
	if f.File != "" {
		b.WriteString(f.File)
		b.WriteByte(' ')
	}
	if f.RowGroup != nil {
		fmt.Fprintf(&b, "row group %d ", *f.RowGroup)
	}
	if f.Episode != nil {
		fmt.Fprintf(&b, "episode %d ", *f.Episode)
	}
	if f.Index != nil {
		fmt.Fprintf(&b, "index %d ", *f.Index)
	}
	if f.Column != "" {
		fmt.Fprintf(&b, "column %s ", f.Column)
	}
	b.WriteString("— ")
	b.WriteString(f.Message)
	if f.Count > 1 {
		fmt.Fprintf(&b, " (%d times)", f.Count)
	}
	return b.String()
}

// Report is the outcome of Run.
type Report struct {
	Dataset  string `json:"dataset"`
	Revision string `json:"revision,omitempty"`
	// Episodes and Frames count the episodes index; FramesRead the frames
	// decoded from the data files.
	Episodes   int64 `json:"episodes"`
	Frames     int64 `json:"frames"`
	FramesRead int64 `json:"frames_read"`
	// Checked lists the checks run; NotChecked says what could not be
	// checked, and why.
	Checked    []string  `json:"checked"`
	NotChecked []string  `json:"not_checked"`
	Findings   []Finding `json:"findings"`
	// Errors and Warnings count the findings of each severity.
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	// Omitted counts findings not listed past MaxFindings per check.
	Omitted int `json:"omitted"`
	// StreamLeavesOut, set by the caller (lrstream validate), says what
	// `lrstream stream` with its default flags leaves out of the dataset
	// (cameras --cameras auto does not decode, and why), or that it
	// refuses it.
	StreamLeavesOut []string `json:"stream_leaves_out,omitempty"`
}

// Clean reports whether no error was found.
func (r *Report) Clean() bool { return r.Errors == 0 }

// Options control Run.
type Options struct {
	// Recipe, when set, is run over every frame in Mode (see recipeChecks).
	Recipe    *render.Recipe
	Mode      render.Mode
	NoTaskAug bool
	// Video, when set, reads the present video files for the per-file
	// checks (ffprobe: stream against the index, packets; with Deep,
	// every frame decoded), each through fetch.Materialize (a local
	// dataset's own file; a Hub dataset's downloaded); nil leaves them
	// unchecked, VideoNote saying why.
	Video     *video.FFmpeg
	VideoNote string
	// Deep decodes every frame where a cheap check cannot tell: every
	// video frame (damaged media bytes), every image whole.
	Deep bool
	// MaxFindings caps the findings listed per check (default 50); the
	// others are counted in Report.Omitted.
	MaxFindings int
}

// collector gathers findings, merging repeats.
type collector struct {
	r     *Report
	max   int
	byKey map[string]int // finding key -> index in r.Findings
	per   map[string]int // listed findings per check
}

func (c *collector) add(f Finding) {
	if f.Count == 0 {
		f.Count = 1
	}
	key := fmt.Sprint(f.Severity, "|", f.Check, "|", f.File, "|", ptr(f.Episode), "|", f.Column, "|", f.Message)
	if i, ok := c.byKey[key]; ok {
		c.r.Findings[i].Count += f.Count
		return
	}
	switch f.Severity {
	case Error:
		c.r.Errors++
	case Warning:
		c.r.Warnings++
	}
	if c.per[f.Check] >= c.max {
		c.r.Omitted++
		return
	}
	c.per[f.Check]++
	c.byKey[key] = len(c.r.Findings)
	c.r.Findings = append(c.r.Findings, f)
}

func ptr(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func i64(v int64) *int64 { return &v }
func iptr(v int) *int    { return &v }

// addErr turns a read error into a finding, with the location a
// *shard.Error carries.
func (c *collector) addErr(sev Severity, check string, err error) {
	f := Finding{Severity: sev, Check: check, Message: err.Error()}
	var se *shard.Error
	if errors.As(err, &se) {
		f.File, f.Column, f.Message = se.File, se.Column, se.Err.Error()
		if se.RowGroup >= 0 {
			f.RowGroup = iptr(se.RowGroup)
		}
		if se.Episode >= 0 {
			f.Episode = i64(se.Episode)
		}
		if se.Index >= 0 {
			f.Index = i64(se.Index)
		}
	}
	c.add(f)
}

// Run validates the dataset src and returns the report. The error is only
// for a cancelled context: every problem of the dataset is a finding.
func Run(ctx context.Context, src fetch.Source, opts Options) (*Report, error) {
	if opts.MaxFindings <= 0 {
		opts.MaxFindings = 50
	}
	r := &Report{Dataset: src.ID(), Revision: src.Revision(), Checked: []string{}, NotChecked: []string{}, Findings: []Finding{}}
	c := &collector{r: r, max: opts.MaxFindings, byKey: map[string]int{}, per: map[string]int{}}
	v := &validator{src: src, opts: opts, c: c, r: r}
	v.run(ctx)
	if err := ctx.Err(); err != nil {
		return r, err
	}
	sort.SliceStable(r.Findings, func(i, j int) bool { return sevRank(r.Findings[i].Severity) < sevRank(r.Findings[j].Severity) })
	return r, nil
}

func sevRank(s Severity) int {
	switch s {
	case Error:
		return 0
	case Warning:
		return 1
	}
	return 2
}

type validator struct {
	src  fetch.Source
	opts Options
	c    *collector
	r    *Report
	ds   *schema.Dataset
	raw  []byte // info.json
	// backendNoted are the cameras whose videos LeRobot's backends
	// decode differently, already reported (once a camera).
	backendNoted map[string]bool
}

func (v *validator) checked(what string)    { v.r.Checked = append(v.r.Checked, what) }
func (v *validator) notChecked(what string) { v.r.NotChecked = append(v.r.NotChecked, what) }

func (v *validator) run(ctx context.Context) {
	if !v.info(ctx) {
		v.notChecked("everything past meta/info.json: it cannot be used")
		return
	}
	if !v.open(ctx) {
		v.notChecked("the data files: the metadata cannot be read")
		return
	}
	v.tasks()
	v.episodeIDs()
	v.data(ctx)
	v.videos(ctx)
	v.cameraKinds()
	if v.opts.Recipe != nil {
		v.recipe(ctx)
	} else {
		v.notChecked("recipe: no --recipe given")
	}
}

// requiredInfo are the info.json keys LeRobot (and lerobot-doctor)
// require.
var requiredInfo = []string{"codebase_version", "fps", "total_episodes", "total_frames", "total_tasks", "chunks_size", "features", "data_path"}

// info checks meta/info.json; false when nothing past it can be checked.
func (v *validator) info(ctx context.Context) bool {
	v.checked("info.json: required keys, codebase_version, fps, shapes, dtypes, path templates, totals, chunks_size")
	data, err := fetch.ReadAll(ctx, v.src, shard.InfoPath)
	if err != nil {
		v.c.add(Finding{Severity: Error, Check: CheckInfo, File: shard.InfoPath, Message: err.Error()})
		return false
	}
	v.raw = data
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		v.c.add(Finding{Severity: Error, Check: CheckInfo, File: shard.InfoPath, Message: "not a JSON object: " + err.Error()})
		return false
	}
	for _, k := range requiredInfo {
		if _, ok := keys[k]; !ok {
			v.c.add(Finding{Severity: Error, Check: CheckInfo, File: shard.InfoPath, Message: fmt.Sprintf("required key %q is missing", k)})
		}
	}
	in, err := schema.ParseInfoUnchecked(data)
	if err != nil {
		v.c.add(Finding{Severity: Error, Check: CheckInfo, File: shard.InfoPath, Message: err.Error()})
		return false
	}
	ok := true
	for _, e := range in.Check() {
		v.c.add(Finding{Severity: Error, Check: CheckInfo, File: shard.InfoPath, Message: e.Error()})
		var ve *schema.VersionError
		if errors.As(e, &ve) {
			ok = false
		}
	}
	if _, err := schema.ParseTools(data); err != nil {
		v.c.add(Finding{Severity: Error, Check: CheckInfo, File: shard.InfoPath, Column: "tools", Message: err.Error()})
	}
	return ok
}

// open reads the task table and the episodes index, collecting the
// index's inconsistencies.
func (v *validator) open(ctx context.Context) bool {
	v.checked("meta/tasks.parquet and meta/episodes: readable, unique indices, lengths match ranges, no overlaps, no empty episodes, totals match info.json")
	ds, err := shard.OpenDatasetWith(ctx, v.src, shard.OpenOptions{
		SkipInfoCheck: true,
		Tolerate:      func(err error) { v.c.addErr(Error, CheckIndex, err) },
	})
	if err != nil {
		check := CheckIndex
		if strings.Contains(err.Error(), shard.TasksPath) {
			check = CheckTasks
		}
		v.c.addErr(Error, check, err)
		return false
	}
	v.ds = ds
	v.r.Episodes = int64(len(ds.Episodes))
	for _, e := range ds.Episodes {
		v.r.Frames += e.ToIndex - e.FromIndex
	}
	return true
}

// placeholderTasks are task strings that say nothing (lerobot-lint's
// MissingTaskCheck list).
var placeholderTasks = map[string]bool{"": true, "test": true, "asdf": true, "todo": true, "tbd": true, "n/a": true, "na": true, "xxx": true, "placeholder": true}

func (v *validator) tasks() {
	v.checked("tasks: no empty or placeholder task strings, every episode's tasks in the table")
	known := map[string]bool{}
	for _, t := range v.ds.Tasks {
		known[t.Text] = true
		if placeholderTasks[strings.ToLower(strings.TrimSpace(t.Text))] {
			v.c.add(Finding{Severity: Warning, Check: CheckTasks, File: shard.TasksPath, Message: fmt.Sprintf("task_index %d has an empty or placeholder task string %q", t.Index, t.Text)})
		}
	}
	for i := range v.ds.Episodes {
		e := &v.ds.Episodes[i]
		for _, t := range e.Tasks {
			if !known[t] {
				v.c.add(Finding{Severity: Warning, Check: CheckIndex, File: e.IndexFile, Episode: i64(e.Index), Column: "tasks", Message: fmt.Sprintf("task %q is not in %s", t, shard.TasksPath)})
			}
		}
	}
}

func (v *validator) episodeIDs() {
	v.checked("episode ids: contiguous from 0")
	var missing shard.Ranges
	next := int64(0)
	for _, e := range v.ds.Episodes {
		if e.Index > next {
			missing = append(missing, shard.Range{Lo: next, Hi: e.Index - 1})
		}
		next = e.Index + 1
	}
	if len(missing) > 0 {
		v.c.add(Finding{Severity: Warning, Check: CheckIndex, File: shard.EpisodesDir, Message: fmt.Sprintf("episode ids are not contiguous: %s missing", missing)})
	}
}
