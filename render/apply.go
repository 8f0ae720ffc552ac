package render

import (
	"fmt"

	"github.com/lrstream/lrstream/schema"
)

// Mode says what happens to a frame that renders to None or has no
// language at all.
type Mode int

const (
	// ModeDrop is the seed design: a None render drops the frame; a frame
	// without language passes through without messages.
	ModeDrop Mode = iota
	// ModeFallback is LeRobot main's RenderMessagesStep: the task becomes
	// a single low_level user message (no targets) for a None render and
	// for a frame without language; only frames without a task are
	// dropped (None render) or passed through (no language).
	ModeFallback
)

// ParseMode parses "drop" or "fallback".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "drop":
		return ModeDrop, nil
	case "fallback":
		return ModeFallback, nil
	}
	return 0, fmt.Errorf("render: unknown mode %q (want drop or fallback)", s)
}

// String returns "drop" or "fallback".
func (m Mode) String() string {
	switch m {
	case ModeDrop:
		return "drop"
	case ModeFallback:
		return "fallback"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Outcome is what became of one frame.
type Outcome int

const (
	// Rendered: the frame has a sample (possibly the task fallback).
	Rendered Outcome = iota
	// Dropped: the frame is skipped.
	Dropped
	// Passthrough: the frame is kept without messages.
	Passthrough
	// Failed: rendering raised; Result.Err says why.
	Failed
)

// String returns "rendered", "dropped", "passthrough" or "error", the
// spelling of the conformance kit.
func (o Outcome) String() string {
	switch o {
	case Rendered:
		return "rendered"
	case Dropped:
		return "dropped"
	case Passthrough:
		return "passthrough"
	case Failed:
		return "error"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is the outcome of Apply for one frame.
type Result struct {
	Outcome Outcome
	// Sample is set for Rendered (shared, read-only).
	Sample *schema.Sample
	// Fallback reports that Sample is the low-level task fallback.
	Fallback bool
	// Component is the blend component Render chose (for Rendered, Failed
	// and Dropped: the component that rendered None), -1 for a message
	// recipe, a frame without language or a fallback sample.
	Component int
	// Err is set for Failed.
	Err error
}

// Apply renders frame f and applies mode. hasLanguage reports whether the
// frame has at least one persistent or event row; without language the
// recipe is not consulted. The fallback task is f.Task when set, else
// f.DatasetTask (see Frame.SetCanonicalTask); an empty task counts as
// none.
func (e *Episode) Apply(mode Mode, f Frame, hasLanguage bool) Result {
	if !hasLanguage {
		if mode == ModeFallback {
			if s := e.fallbackSample(&f); s != nil {
				return Result{Outcome: Rendered, Sample: s, Fallback: true, Component: -1}
			}
		}
		return Result{Outcome: Passthrough, Component: -1}
	}
	s, ci, err := e.Render(f)
	switch {
	case err != nil:
		return Result{Outcome: Failed, Component: ci, Err: err}
	case s != nil:
		return Result{Outcome: Rendered, Sample: s, Component: ci}
	case mode == ModeFallback:
		if fs := e.fallbackSample(&f); fs != nil {
			return Result{Outcome: Rendered, Sample: fs, Fallback: true, Component: -1}
		}
	}
	return Result{Outcome: Dropped, Component: ci}
}

// fallbackSample is RenderMessagesStep's _fallback_low_level_render.
func (e *Episode) fallbackSample(f *Frame) *schema.Sample {
	task := f.Task
	if task == nil {
		task = f.DatasetTask
	}
	if task == nil || *task == "" {
		return nil
	}
	if fb := &e.fallback; fb.sample != nil && fb.task == *task {
		return fb.sample
	}
	s := FallbackSample(*task)
	e.fallback.task, e.fallback.sample = *task, s
	return s
}

var lowLevelStreams = []string{"low_level"}

// FallbackSample is the low-level task fallback: one user message holding
// the task on the low_level stream, with no targets.
func FallbackSample(task string) *schema.Sample {
	return &schema.Sample{
		Messages: []schema.Message{{Role: "user", Kind: schema.TextContent, Text: task}},
		Streams:  lowLevelStreams,
		Targets:  []int{},
	}
}
