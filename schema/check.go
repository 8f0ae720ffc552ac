package schema

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Codebase versions.
const (
	// SupportedVersion is the LeRobot dataset format lrstream reads.
	SupportedVersion = "v3.0"
	// ConvertV21Module is LeRobot's v2.1 → v3.0 dataset converter (lerobot
	// 0.6: src/lerobot/scripts/convert_dataset_v21_to_v30.py).
	ConvertV21Module = "lerobot.scripts.convert_dataset_v21_to_v30"
)

// knownDTypes are the feature dtypes LeRobot writes (numeric numpy types,
// visual streams, strings) plus lrstream's language columns.
var knownDTypes = map[string]bool{
	"bool": true, "float16": true, "float32": true, "float64": true,
	"int8": true, "int16": true, "int32": true, "int64": true,
	"uint8": true, "uint16": true, "uint32": true, "uint64": true,
	DTypeVideo: true, DTypeImage: true, DTypeString: true, DTypeLanguage: true,
}

// MaxFPS bounds info.json's fps: no recording is sampled faster (the
// fastest LeRobot-style sensors, force/torque at a few kHz, stay below;
// cameras far below). With it every conversion of seconds × fps to frames
// stays exact in a float64 and far inside an int64 (SecondsToFrames).
const MaxFPS = 10000

// MaxFrameOffset bounds a frame count or offset converted from seconds
// (SecondsToFrames): 2^31-1 frames, 2.5 days at MaxFPS, 68 years at 1 fps.
const MaxFrameOffset = 1<<31 - 1

// SecondsToFrames converts a duration or offset in seconds to frames at
// fps, rounded to the nearest frame (halves to even, as numpy's round
// that LeRobot uses). ok is false when the result is not a finite number
// within ±MaxFrameOffset, so no float→int conversion of seconds × fps can
// overflow or take a NaN.
func SecondsToFrames(sec, fps float64) (frames int64, ok bool) {
	x := math.RoundToEven(sec * fps)
	if !(math.Abs(x) <= MaxFrameOffset) { // false for NaN and ±Inf
		return 0, false
	}
	return int64(x), true
}

// KnownDType reports whether dtype is a feature dtype lrstream knows.
func KnownDType(dtype string) bool { return knownDTypes[dtype] }

// VersionError is returned for a dataset whose codebase_version is not
// LeRobot v3.
type VersionError struct {
	// Version is info.json's codebase_version ("" when absent).
	Version string
}

// Error says what to do: convert a v2 dataset with LeRobot's converter.
func (e *VersionError) Error() string {
	switch {
	case e.Version == "":
		return "info.json has no codebase_version: lrstream reads LeRobot " + SupportedVersion + " datasets"
	case strings.HasPrefix(e.Version, "v2") || strings.HasPrefix(e.Version, "v1"):
		return fmt.Sprintf("codebase_version %q: lrstream reads LeRobot %s datasets; convert this one with LeRobot's converter: python -m %s --repo-id=ORG/NAME (lerobot >= 0.4)", e.Version, SupportedVersion, ConvertV21Module)
	}
	return fmt.Sprintf("codebase_version %q: lrstream reads LeRobot %s datasets (v3.x)", e.Version, SupportedVersion)
}

// CheckVersion returns a *VersionError unless v is a v3.x codebase_version.
func CheckVersion(v string) error {
	if !strings.HasPrefix(v, "v3.") && v != "v3" {
		return &VersionError{Version: v}
	}
	return nil
}

// Check returns every problem of the info's meaning: fps positive and
// finite, feature shapes of positive sizes, known dtypes, data_path and
// video_path templates that format to relative paths inside the dataset,
// non-negative totals, chunks_size > 0 and the core frame columns present.
// ParseInfo fails on the first of them; validate reports them all.
func (in *Info) Check() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := CheckVersion(in.CodebaseVersion); err != nil {
		errs = append(errs, err)
	}
	if !(in.FPS > 0 && in.FPS <= MaxFPS) {
		add("fps %v: want a frame rate above 0 and at most %d frames per second", in.FPS, MaxFPS)
	}
	if in.ChunksSize <= 0 {
		add("chunks_size %d: want a positive number of files per chunk", in.ChunksSize)
	}
	for _, t := range []struct {
		name string
		v    int64
	}{{"total_episodes", in.TotalEpisodes}, {"total_frames", in.TotalFrames}, {"total_tasks", in.TotalTasks}} {
		if t.v < 0 {
			add("%s %d is negative", t.name, t.v)
		}
	}
	if in.TotalEpisodes == 0 && in.TotalFrames > 0 {
		add("total_frames %d with total_episodes 0", in.TotalFrames)
	}
	if in.TotalFrames < in.TotalEpisodes && in.TotalFrames >= 0 {
		add("total_frames %d < total_episodes %d: every episode holds at least one frame", in.TotalFrames, in.TotalEpisodes)
	}
	if in.DataPath != "" {
		if err := checkTemplate(in.DataPath, []string{"chunk_index", "file_index"}, ".parquet"); err != nil {
			add("data_path: %w", err)
		}
	}
	if in.VideoPath != "" {
		if err := checkTemplate(in.VideoPath, []string{"video_key", "chunk_index", "file_index"}, ""); err != nil {
			add("video_path: %w", err)
		}
	}
	hasVideo := false
	for _, f := range in.Features {
		if f.Name == "" {
			add("a feature has an empty name")
		}
		if !KnownDType(f.DType) && !f.IsLanguage() {
			add("feature %q: unknown dtype %q", f.Name, f.DType)
		}
		if f.Shape == nil && !f.IsLanguage() && f.DType != DTypeString {
			add("feature %q: no shape", f.Name)
		}
		if err := checkShape(f.Shape); err != nil {
			add("feature %q: shape %v: %w", f.Name, f.Shape, err)
		}
		hasVideo = hasVideo || f.DType == DTypeVideo
	}
	if hasVideo && in.VideoPath == "" {
		add("video features declared but no video_path")
	}
	for _, c := range []string{"timestamp", "frame_index", "episode_index", "index", "task_index"} {
		f, ok := in.Feature(c)
		if !ok {
			add("feature %q (a core frame column) is not declared", c)
			continue
		}
		if !f.IsNumeric() {
			add("feature %q: dtype %q, want a number", c, f.DType)
		}
	}
	return errs
}

// MaxFeatureValues bounds the values of one frame of a feature (the
// product of its shape): 2^30, beyond a 16K×16K RGB frame (8×10^8), far
// below what would overflow sizes computed from it.
const MaxFeatureValues = 1 << 30

// checkShape checks a declared shape: positive dimensions whose product
// is at most MaxFeatureValues.
func checkShape(shape []int) error {
	n := 1
	for _, d := range shape {
		if d <= 0 {
			return errors.New("every dimension must be positive")
		}
		if d > MaxFeatureValues/n {
			return fmt.Errorf("more than %d values per frame", MaxFeatureValues)
		}
		n *= d
	}
	return nil
}

// checkTemplate checks a str.format path template: only the given fields,
// and formatted paths relative, clean and inside the dataset.
func checkTemplate(tmpl string, fields []string, suffix string) error {
	vals := map[string]int64{}
	for _, f := range fields {
		if f != "video_key" {
			vals[f] = 7
		}
	}
	var p string
	var err error
	if contains(fields, "video_key") {
		p, err = formatVideoKey(tmpl, "observation.images.x", vals)
	} else {
		p, err = FormatPath(tmpl, vals)
	}
	if err != nil {
		return err
	}
	if suffix != "" && !strings.HasSuffix(p, suffix) {
		return fmt.Errorf("template %q does not name a %s file", tmpl, suffix)
	}
	if !SafeRelPath(p) {
		return fmt.Errorf("template %q gives %q, not a relative path inside the dataset", tmpl, p)
	}
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// SafeRelPath reports whether p is a clean, slash-separated relative path
// that stays inside its root: no leading '/', no '\\', no empty, '.' or
// '..' element.
func SafeRelPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return false
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." {
			return false
		}
	}
	return true
}

// VideoFile returns the relative path of a video file from the video_path
// template (e.g. "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4").
func (in *Info) VideoFile(key string, chunk, file int64) (string, error) {
	if in.VideoPath == "" {
		return "", errors.New("info.json has no video_path")
	}
	return formatVideoKey(in.VideoPath, key, map[string]int64{"chunk_index": chunk, "file_index": file})
}

// formatVideoKey substitutes {video_key} (a string field) then the
// integer fields.
func formatVideoKey(tmpl, key string, vals map[string]int64) (string, error) {
	if strings.Contains(key, "{") || strings.Contains(key, "}") {
		return "", fmt.Errorf("video key %q contains a brace", key)
	}
	return FormatPath(strings.ReplaceAll(tmpl, "{video_key}", key), vals)
}
