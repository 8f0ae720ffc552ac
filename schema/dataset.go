package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Dataset is a LeRobot v3 dataset's metadata: meta/info.json, the task
// table (meta/tasks.parquet) and the episodes index
// (meta/episodes/chunk-*/file-*.parquet). It is read once and then shared,
// read-only, by every worker.
type Dataset struct {
	// ID names the dataset (a directory path or a Hub repo id).
	ID string
	// Revision is the resolved revision ("" for a local directory).
	Revision string
	Info     Info
	// Tasks is sorted by Task.Index.
	Tasks []Task
	// Episodes is sorted by Episode.Index.
	Episodes []Episode
	// Tolerate, when set, receives the metadata inconsistencies a user
	// chose to be warned about instead of failing on (--on-inconsistent
	// warn): totals that disagree with the episodes index, episodes that
	// the data files and the index place differently. Readers then
	// continue; the frames concerned are reported through it, not
	// streamed. nil means every inconsistency is an error. It must be safe
	// for concurrent use.
	Tolerate func(error)
}

// Inconsistent returns err, or nil after passing err to d.Tolerate when
// the user chose to be warned about inconsistencies.
func (d *Dataset) Inconsistent(err error) error {
	if err == nil || d.Tolerate == nil {
		return err
	}
	d.Tolerate(err)
	return nil
}

// Info is the content of meta/info.json that lrstream uses.
type Info struct {
	CodebaseVersion string
	RobotType       string
	FPS             float64
	// Features in the order info.json lists them.
	Features      []Feature
	DataPath      string
	VideoPath     string
	ChunksSize    int64
	TotalEpisodes int64
	TotalFrames   int64
	TotalTasks    int64
	// Tools is the raw JSON of info.json's "tools" catalog; nil when absent.
	Tools json.RawMessage
}

// Feature is one entry of info.json's "features" object.
type Feature struct {
	Name  string
	DType string
	Shape []int
	// Names is the raw JSON of the feature's "names" (a list, an object or
	// null); nil when absent.
	Names json.RawMessage
	// Info and VideoInfo are the raw JSON of the feature's "info" and
	// (legacy) "video_info" objects; nil when absent. Video features keep
	// their encoding there (e.g. a depth map's quantization, video.DepthOf).
	Info, VideoInfo json.RawMessage
}

// Feature dtypes with a special meaning.
const (
	DTypeVideo    = "video"
	DTypeImage    = "image"
	DTypeString   = "string"
	DTypeLanguage = "language"
)

// Names of the language columns.
const (
	ColumnPersistent = "language_persistent"
	ColumnEvents     = "language_events"
)

// IsVisual reports whether the feature is a video or image stream (stored
// outside the data parquet files, never decoded by lrstream).
func (f Feature) IsVisual() bool { return f.DType == DTypeVideo || f.DType == DTypeImage }

// IsLanguage reports whether the feature is a language column.
func (f Feature) IsLanguage() bool {
	return f.DType == DTypeLanguage || f.Name == ColumnPersistent || f.Name == ColumnEvents
}

// IsNumeric reports whether the feature holds numbers (or booleans) in the
// data files: every dtype except video, image, string and language.
func (f Feature) IsNumeric() bool {
	switch f.DType {
	case "bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
		"uint8", "uint16", "uint32", "uint64":
		return !f.IsLanguage()
	}
	return false
}

// FeatureNames returns the names of the features whose dtype is one of
// dtypes, in info.json order.
func (in *Info) FeatureNames(dtypes ...string) []string {
	var out []string
	for _, f := range in.Features {
		if slices.Contains(dtypes, f.DType) {
			out = append(out, f.Name)
		}
	}
	return out
}

// Feature returns the feature named name.
func (in *Info) Feature(name string) (Feature, bool) {
	for _, f := range in.Features {
		if f.Name == name {
			return f, true
		}
	}
	return Feature{}, false
}

// DataFile returns the relative path of a data file from the data_path
// template (Python str.format syntax, e.g.
// "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet").
func (in *Info) DataFile(chunk, file int64) (string, error) {
	tmpl := in.DataPath
	if tmpl == "" {
		tmpl = DefaultDataPath
	}
	return FormatPath(tmpl, map[string]int64{"chunk_index": chunk, "file_index": file})
}

// DefaultDataPath is LeRobot v3's data_path, used when info.json has none.
const DefaultDataPath = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"

// FormatPath substitutes integer fields into a Python str.format template.
// It supports "{name}" and "{name:0Nd}" / "{name:Nd}" / "{name:d}"; "{{" and
// "}}" are literal braces.
func FormatPath(tmpl string, vals map[string]int64) (string, error) {
	var b strings.Builder
	for i := 0; i < len(tmpl); i++ {
		c := tmpl[i]
		if c == '}' {
			if i+1 < len(tmpl) && tmpl[i+1] == '}' {
				b.WriteByte('}')
				i++
				continue
			}
			return "", fmt.Errorf("path template %q: single '}'", tmpl)
		}
		if c != '{' {
			b.WriteByte(c)
			continue
		}
		if i+1 < len(tmpl) && tmpl[i+1] == '{' {
			b.WriteByte('{')
			i++
			continue
		}
		end := strings.IndexByte(tmpl[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("path template %q: unclosed '{'", tmpl)
		}
		field := tmpl[i+1 : i+end]
		i += end
		name, spec, _ := strings.Cut(field, ":")
		v, ok := vals[name]
		if !ok {
			return "", fmt.Errorf("path template %q: unknown field %q", tmpl, name)
		}
		spec = strings.TrimSuffix(spec, "d")
		zero := strings.HasPrefix(spec, "0")
		width := 0
		if spec != "" {
			w, err := strconv.Atoi(spec)
			if err != nil || w < 0 || w > 64 {
				return "", fmt.Errorf("path template %q: unsupported format spec %q", tmpl, field)
			}
			width = w
		}
		s := strconv.FormatInt(v, 10)
		neg := v < 0
		if neg {
			s = s[1:]
			width--
		}
		if neg {
			b.WriteByte('-')
		}
		for n := len(s); n < width; n++ {
			if zero {
				b.WriteByte('0')
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// Task is one row of meta/tasks.parquet.
type Task struct {
	Index int64
	Text  string
}

// Episode is one row of the episodes index.
type Episode struct {
	Index  int64
	Length int64
	// FromIndex and ToIndex delimit the episode's frames in the global
	// "index" column: [FromIndex, ToIndex).
	FromIndex, ToIndex int64
	// DataChunk and DataFile locate the data file holding the episode.
	DataChunk, DataFile int64
	Tasks               []string
	// IndexFile is the meta/episodes file listing the episode.
	IndexFile string
}

// TaskText returns the canonical task string of task_index i.
func (d *Dataset) TaskText(i int64) (string, bool) {
	if i >= 0 && i < int64(len(d.Tasks)) && d.Tasks[i].Index == i {
		return d.Tasks[i].Text, true
	}
	k := sort.Search(len(d.Tasks), func(j int) bool { return d.Tasks[j].Index >= i })
	if k < len(d.Tasks) && d.Tasks[k].Index == i {
		return d.Tasks[k].Text, true
	}
	return "", false
}

// Episode returns the index entry of episode i.
func (d *Dataset) Episode(i int64) (*Episode, bool) {
	if i >= 0 && i < int64(len(d.Episodes)) && d.Episodes[i].Index == i {
		return &d.Episodes[i], true
	}
	k := sort.Search(len(d.Episodes), func(j int) bool { return d.Episodes[j].Index >= i })
	if k < len(d.Episodes) && d.Episodes[k].Index == i {
		return &d.Episodes[k], true
	}
	return nil, false
}

// HasLanguage reports whether info.json declares the language column name.
func (in *Info) HasLanguage(name string) bool {
	f, ok := in.Feature(name)
	return ok && f.IsLanguage()
}

type infoJSON struct {
	CodebaseVersion string          `json:"codebase_version"`
	RobotType       string          `json:"robot_type"`
	FPS             *float64        `json:"fps"`
	DataPath        string          `json:"data_path"`
	VideoPath       string          `json:"video_path"`
	ChunksSize      int64           `json:"chunks_size"`
	TotalEpisodes   int64           `json:"total_episodes"`
	TotalFrames     int64           `json:"total_frames"`
	TotalTasks      int64           `json:"total_tasks"`
	Features        json.RawMessage `json:"features"`
	Tools           json.RawMessage `json:"tools"`
}

type featureJSON struct {
	DType     string          `json:"dtype"`
	Shape     []int           `json:"shape"`
	Names     json.RawMessage `json:"names"`
	Info      json.RawMessage `json:"info"`
	VideoInfo json.RawMessage `json:"video_info"`
}

// ParseInfo parses meta/info.json, keeping the features in file order,
// and checks its meaning (Info.Check): it fails on the first problem, a
// *VersionError for a dataset that is not LeRobot v3.
func ParseInfo(data []byte) (Info, error) {
	in, err := ParseInfoUnchecked(data)
	if err != nil {
		return Info{}, err
	}
	if errs := in.Check(); len(errs) > 0 {
		more := ""
		if len(errs) > 1 {
			more = fmt.Sprintf(" (and %d more problems: lrstream validate lists them)", len(errs)-1)
		}
		return Info{}, fmt.Errorf("info.json: %w%s", errs[0], more)
	}
	return in, nil
}

// ParseInfoUnchecked parses meta/info.json like ParseInfo without checking
// its meaning: the caller runs Info.Check (lrstream validate reports every
// problem instead of the first).
func ParseInfoUnchecked(data []byte) (Info, error) {
	var raw infoJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return Info{}, fmt.Errorf("info.json: %w", err)
	}
	in := Info{
		CodebaseVersion: raw.CodebaseVersion,
		RobotType:       raw.RobotType,
		DataPath:        raw.DataPath,
		VideoPath:       raw.VideoPath,
		ChunksSize:      raw.ChunksSize,
		TotalEpisodes:   raw.TotalEpisodes,
		TotalFrames:     raw.TotalFrames,
		TotalTasks:      raw.TotalTasks,
	}
	if raw.FPS == nil {
		return Info{}, errors.New("info.json: missing fps")
	}
	in.FPS = *raw.FPS
	if len(raw.Tools) > 0 && !bytes.Equal(bytes.TrimSpace(raw.Tools), []byte("null")) {
		in.Tools = append(json.RawMessage(nil), raw.Tools...)
	}
	if len(raw.Features) == 0 {
		return Info{}, errors.New("info.json: missing features")
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Features))
	tok, err := dec.Token()
	if err != nil {
		return Info{}, fmt.Errorf("info.json: features: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return Info{}, errors.New("info.json: features is not an object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Info{}, fmt.Errorf("info.json: features: %w", err)
		}
		name, _ := tok.(string)
		var fj featureJSON
		if err := dec.Decode(&fj); err != nil {
			return Info{}, fmt.Errorf("info.json: feature %q: %w", name, err)
		}
		if seen[name] {
			return Info{}, fmt.Errorf("info.json: feature %q listed twice", name)
		}
		seen[name] = true
		f := Feature{Name: name, DType: fj.DType, Shape: fj.Shape}
		if len(fj.Names) > 0 {
			f.Names = append(json.RawMessage(nil), fj.Names...)
		}
		if len(fj.Info) > 0 {
			f.Info = append(json.RawMessage(nil), fj.Info...)
		}
		if len(fj.VideoInfo) > 0 {
			f.VideoInfo = append(json.RawMessage(nil), fj.VideoInfo...)
		}
		in.Features = append(in.Features, f)
	}
	return in, nil
}
