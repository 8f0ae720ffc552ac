// Package datagen writes synthetic LeRobot v3 datasets with language
// annotations shaped like the ones LeRobot's annotation pipeline
// (lerobot-annotate) writes: a persistent subtask/plan/memory/task_aug
// timeline broadcast on every frame of an episode, and interjections, `say`
// speech atoms, per-camera VQA pairs and traces on the exact frames where
// they fire.
//
// Output is a complete dataset directory (meta/info.json, meta/stats.json,
// meta/tasks.parquet, meta/episodes/chunk-000/file-000.parquet,
// data/chunk-XXX/file-XXX.parquet, and meta/datagen.json recording the
// options) with one parquet row group per episode.
// Camera features are declared in info.json but no video is written.
//
// Generation is deterministic: the same Options (including Seed) produce
// byte-identical files, whatever the number of workers. It streams episode
// by episode, so memory stays bounded whatever the dataset size.
package datagen

import (
	"fmt"
	"runtime"
	"strings"
)

// Density selects how much language annotation episodes carry.
type Density string

const (
	// DensityNone writes no language columns at all (an unannotated
	// dataset, like most datasets on the Hub).
	DensityNone Density = "none"
	// DensitySparse annotates about three quarters of the episodes with a
	// short subtask timeline, one plan, a few task rephrasings, rare
	// interjections and VQA on one camera every five seconds.
	DensitySparse Density = "sparse"
	// DensityFull annotates every episode the way the annotation pipeline
	// does with its defaults: 3–8 subtasks, plan (refreshed at each
	// interjection), memory at subtask boundaries, 5–10 task rephrasings,
	// motion rows, 1–3 interjections with `say` responses, VQA pairs for
	// every camera at 1 Hz and occasional traces.
	DensityFull Density = "full"
)

// Variant selects the Arrow schema of the language columns.
type Variant string

const (
	// VariantDocumented is the schema declared in lerobot.datasets.language
	// with the JSON fallback: persistent timestamp float32 (non-null), role
	// non-null, tool_calls list<string> of JSON text.
	VariantDocumented Variant = "documented"
	// VariantInferred is what pyarrow (>= 24) infers from lists of Python
	// dicts: every field nullable, persistent timestamp float64, fields
	// that are null in every row of a file typed as Arrow null, tool_calls
	// as list<struct<type, function: struct<name, arguments: struct<text>>>>,
	// and list<null> for a language column without any row in the file.
	VariantInferred Variant = "inferred"
	// VariantInferredSorted is VariantInferred as pyarrow 21–23 inferred
	// it: the fields of every struct sorted by name (apache/arrow GH-40053).
	VariantInferredSorted Variant = "inferred-sorted"
	// VariantJSONExt is VariantDocumented with tool_calls elements of the
	// canonical arrow.json extension type (storage utf8).
	VariantJSONExt Variant = "json-ext"
)

// Options configures a generated dataset. Zero-valued fields take the
// values of DefaultOptions, except Seed (0 is a valid seed), Force and
// Progress.
type Options struct {
	// Episodes is the number of episodes.
	Episodes int
	// MinFrames and MaxFrames bound the length of each episode (inclusive).
	MinFrames, MaxFrames int
	// FPS is the frame rate; frame timestamps are float32(frame_index/FPS).
	FPS int
	// Cameras are camera names; each becomes a video feature
	// "observation.images.<name>" in info.json (no video is written) and
	// the camera of VQA and trace rows. A name that already starts with
	// "observation.images." is used as is. nil means the default cameras;
	// an empty non-nil slice means none.
	Cameras []string
	// Dim is the width of the float32 fixed_size_list features
	// observation.state and action.
	Dim int
	// Density is the annotation density.
	Density Density
	// Variant is the Arrow schema variant of the language columns.
	Variant Variant
	// Tasks is the number of distinct task strings to draw episodes from.
	Tasks int
	// FilesPerChunk is info.json's chunks_size: data files per chunk
	// directory.
	FilesPerChunk int
	// FramesPerFile is the target number of rows per data file; a file is
	// closed before the episode that would push it past this number
	// (episodes are never split, so a file holds at least one episode).
	FramesPerFile int
	// Videos writes one mp4 per camera and data file (through the ffmpeg
	// executable), holding the file's episodes back to back, as LeRobot
	// does; without it cameras are declared but no video is written.
	Videos bool
	// VideoWidth and VideoHeight are the cameras' frame size (default
	// 640×480, LeRobot's usual).
	VideoWidth, VideoHeight int
	// VideoCodec is "h264" (libx264, the default: fast to write) or "av1"
	// (libsvtav1, LeRobot's default encoder).
	VideoCodec string
	// VideoGOP is the keyframe interval of the videos (default 2, what
	// LeRobot's encoder writes: fast seeks, large files); a longer one makes
	// small files (the embedded demo's videos use 100).
	VideoGOP int
	// Seed seeds every random choice; equal Options give identical bytes.
	Seed uint64
	// Workers is the number of data files written concurrently (0 means
	// GOMAXPROCS). It does not change the output.
	Workers int
	// Force allows replacing a non-empty output directory.
	Force bool
	// Progress, if set, is called (serially) after each episode is
	// written.
	Progress func(Progress)
}

// Progress reports how far Generate is.
type Progress struct {
	// Episodes and Frames written so far.
	Episodes int
	Frames   int64
	// TotalEpisodes and TotalFrames of the whole dataset.
	TotalEpisodes int
	TotalFrames   int64
}

// DefaultOptions returns the options Generate uses for zero-valued fields:
// 50 episodes of 400–800 frames at 30 fps, cameras front and wrist, 14-dim
// state and action, full density, documented schema, 8 tasks, 100,000
// frames per file, 1000 files per chunk.
func DefaultOptions() Options {
	return Options{
		Episodes:      50,
		MinFrames:     400,
		MaxFrames:     800,
		FPS:           30,
		Cameras:       []string{"front", "wrist"},
		Dim:           14,
		Density:       DensityFull,
		Variant:       VariantDocumented,
		Tasks:         8,
		FilesPerChunk: 1000,
		FramesPerFile: 100_000,
	}
}

// BenchOptions returns the benchmark dataset shape of the throughput
// budget: 500 episodes of 400–800 frames (about 300k frames) at 30 fps,
// 14-dim state and action, cameras front and wrist, full density.
func BenchOptions() Options {
	o := DefaultOptions()
	o.Episodes = 500
	return o
}

// CameraKey returns the feature key of a camera name:
// "front" -> "observation.images.front".
func CameraKey(name string) string {
	if strings.HasPrefix(name, cameraPrefix) {
		return name
	}
	return cameraPrefix + name
}

const cameraPrefix = "observation.images."

// withDefaults fills zero fields and validates.
func (o Options) withDefaults() (Options, error) {
	o = o.filled()
	if err := o.checkVideo(); err != nil {
		return o, err
	}
	if err := o.checkCounts(); err != nil {
		return o, err
	}
	cams, err := cameraKeys(o.Cameras)
	if err != nil {
		return o, err
	}
	o.Cameras = cams
	return o, nil
}

// filled is o with every zero field set to its default.
func (o Options) filled() Options {
	d := DefaultOptions()
	if o.Episodes == 0 {
		o.Episodes = d.Episodes
	}
	if o.MinFrames == 0 && o.MaxFrames == 0 {
		o.MinFrames, o.MaxFrames = d.MinFrames, d.MaxFrames
	} else if o.MaxFrames == 0 {
		o.MaxFrames = o.MinFrames
	} else if o.MinFrames == 0 {
		o.MinFrames = min(d.MinFrames, o.MaxFrames)
	}
	if o.FPS == 0 {
		o.FPS = d.FPS
	}
	if o.Cameras == nil {
		o.Cameras = d.Cameras
	}
	if o.Dim == 0 {
		o.Dim = d.Dim
	}
	if o.Density == "" {
		o.Density = d.Density
	}
	if o.Variant == "" {
		o.Variant = d.Variant
	}
	if o.Tasks == 0 {
		o.Tasks = d.Tasks
	}
	if o.FilesPerChunk == 0 {
		o.FilesPerChunk = d.FilesPerChunk
	}
	if o.FramesPerFile == 0 {
		o.FramesPerFile = d.FramesPerFile
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.VideoWidth == 0 && o.VideoHeight == 0 {
		o.VideoWidth, o.VideoHeight = 640, 480
	}
	if o.VideoCodec == "" {
		o.VideoCodec = "h264"
	}
	if o.VideoGOP == 0 {
		o.VideoGOP = DefaultVideoGOP
	}
	return o
}

// checkVideo refuses video settings FFmpeg's encoders cannot honour.
func (o Options) checkVideo() error {
	if o.VideoGOP < 1 || o.VideoGOP > 1000 {
		return fmt.Errorf("datagen: video GOP %d: want 1 to 1000 frames", o.VideoGOP)
	}
	if o.VideoWidth < 16 || o.VideoHeight < 16 || o.VideoWidth%2 != 0 || o.VideoHeight%2 != 0 {
		return fmt.Errorf("datagen: video size %dx%d: want even dimensions of at least 16", o.VideoWidth, o.VideoHeight)
	}
	if o.VideoCodec != "h264" && o.VideoCodec != "av1" {
		return fmt.Errorf("datagen: unknown video codec %q (want h264 or av1)", o.VideoCodec)
	}
	if o.VideoCodec == "av1" && o.VideoHeight < 64 {
		return fmt.Errorf("datagen: av1 (libsvtav1) needs a height of at least 64, got %d", o.VideoHeight)
	}
	return nil
}

// checkCounts refuses counts, densities and schema variants out of range.
func (o Options) checkCounts() error {
	switch {
	case o.Episodes < 0:
		return fmt.Errorf("datagen: episodes must be positive, got %d", o.Episodes)
	case o.MinFrames < 1 || o.MaxFrames < o.MinFrames:
		return fmt.Errorf("datagen: need 1 <= min frames <= max frames, got %d..%d", o.MinFrames, o.MaxFrames)
	case o.FPS < 1:
		return fmt.Errorf("datagen: fps must be positive, got %d", o.FPS)
	case o.Dim < 1:
		return fmt.Errorf("datagen: dim must be positive, got %d", o.Dim)
	case o.Tasks < 1:
		return fmt.Errorf("datagen: tasks must be positive, got %d", o.Tasks)
	case o.FilesPerChunk < 1:
		return fmt.Errorf("datagen: files per chunk must be positive, got %d", o.FilesPerChunk)
	case o.FramesPerFile < 1:
		return fmt.Errorf("datagen: frames per file must be positive, got %d", o.FramesPerFile)
	}
	switch o.Density {
	case DensityNone, DensitySparse, DensityFull:
	default:
		return fmt.Errorf("datagen: unknown density %q (want none, sparse or full)", o.Density)
	}
	switch o.Variant {
	case VariantDocumented, VariantInferred, VariantInferredSorted, VariantJSONExt:
	default:
		return fmt.Errorf("datagen: unknown schema variant %q (want documented, inferred, inferred-sorted or json-ext)", o.Variant)
	}
	return nil
}

// cameraKeys turns camera names into feature keys, refusing empty and
// duplicate ones.
func cameraKeys(names []string) ([]string, error) {
	seen := map[string]bool{}
	cams := make([]string, 0, len(names))
	for _, c := range names {
		c = strings.TrimSpace(c)
		if c == "" || c == cameraPrefix {
			return nil, fmt.Errorf("datagen: empty camera name")
		}
		k := CameraKey(c)
		if seen[k] {
			return nil, fmt.Errorf("datagen: duplicate camera %q", c)
		}
		seen[k] = true
		cams = append(cams, k)
	}
	return cams, nil
}
