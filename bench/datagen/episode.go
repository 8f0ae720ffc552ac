package datagen

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// Random streams; every episode draws from its own generators so episodes
// can be produced independently and in any order.
const (
	streamTasks uint64 = iota + 1
	streamLength
	streamLang
	streamMotion
)

func newRand(seed, stream, n uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15*stream, n*0x2545f4914f6cdd1d+stream))
}

// langRow is one row of language_persistent or language_events.
type langRow struct {
	role    string
	content string
	// noContent makes content null (speech atoms).
	noContent bool
	// style "" is null.
	style string
	// frame is the frame the row is stamped with (persistent rows only).
	frame int
	// camera "" is null.
	camera string
	// say, when non-empty, makes tool_calls [say(text=say)].
	say string
}

// eventFrame is the set of event rows on one frame.
type eventFrame struct {
	frame int
	rows  []langRow
}

// episodeLang is the language of one episode.
type episodeLang struct {
	persistent []langRow
	events     []eventFrame // sorted by frame
}

// frameTime is LeRobot's frame timestamp: frame_index / fps stored as
// float32.
func frameTime(frame, fps int) float32 { return float32(float64(frame) / float64(fps)) }

// annotate generates the language of an episode the way the annotation
// pipeline lays it out.
func annotate(seed uint64, ep int, length int, o *Options, t *taskSpec) episodeLang {
	var el episodeLang
	if o.Density == DensityNone {
		return el
	}
	r := newRand(seed, streamLang, uint64(ep))
	full := o.Density == DensityFull
	if !full && r.IntN(4) == 0 {
		return el // unannotated episode
	}
	a := annotator{r: r, o: o, t: t, el: &el, length: length, full: full, fps: o.FPS, minGap: max(3, o.FPS/2)}
	starts, subtasks := a.subtasks()
	a.taskAugAndMotion()
	a.events = map[int][]langRow{}
	a.interjections(starts, subtasks)
	a.vqa()
	sortLanguage(&el, a.events)
	return el
}

// annotator is what the steps of annotate share: the episode's random
// stream, options and task, and the language being built.
type annotator struct {
	r           *rand.Rand
	o           *Options
	t           *taskSpec
	el          *episodeLang
	events      map[int][]langRow // language_events rows by frame
	length      int               // frames of the episode
	full        bool              // DensityFull
	fps, minGap int
}

// subtasks adds the subtask rows (a gap-free cover of the episode), the
// plan and, with full density, the memory rows; it returns the subtasks'
// start frames and texts.
func (a *annotator) subtasks() (starts []int, subtasks []string) {
	// Subtasks: a gap-free cover of the episode, every frame has exactly
	// one active subtask.
	nSub := 2 + a.r.IntN(3)
	if a.full {
		nSub = 3 + a.r.IntN(6)
	}
	nSub = max(1, min(nSub, len(a.t.steps), a.length/a.minGap))
	idx := a.r.Perm(len(a.t.steps))[:nSub]
	slices.Sort(idx)
	starts = make([]int, nSub)
	spare := a.length - nSub*a.minGap
	if spare < 0 {
		spare = 0
	}
	weights := make([]float64, nSub)
	var wsum float64
	for i := range weights {
		weights[i] = 0.3 + a.r.Float64()
		wsum += weights[i]
	}
	pos := 0
	for i := range nSub {
		starts[i] = pos
		pos += a.minGap + int(float64(spare)*weights[i]/wsum)
	}
	subtasks = make([]string, nSub)
	for i, si := range idx {
		subtasks[i] = subtaskText(a.r, a.t, a.t.steps[si])
		a.el.persistent = append(a.el.persistent, langRow{role: "assistant", content: subtasks[i], style: "subtask", frame: starts[i]})
	}
	a.el.persistent = append(a.el.persistent, langRow{role: "assistant", content: planText(subtasks, ""), style: "plan", frame: 0})
	if a.full {
		var done []string
		for i := 1; i < nSub; i++ {
			done = append(done, a.t.steps[idx[i-1]].done)
			a.el.persistent = append(a.el.persistent, langRow{role: "assistant", content: memoryText(a.r, done, nSub-i), style: "memory", frame: starts[i]})
		}
	}
	return starts, subtasks
}

// taskAugAndMotion adds the task rephrasings (task_aug) and, with full
// density, the motion rows.
func (a *annotator) taskAugAndMotion() {
	nAug := a.r.IntN(4)
	if a.full {
		nAug = 5 + a.r.IntN(6)
	}
	for _, i := range a.r.Perm(len(a.t.rephrasings))[:min(nAug, len(a.t.rephrasings))] {
		a.el.persistent = append(a.el.persistent, langRow{role: "user", content: a.t.rephrasings[i], style: "task_aug", frame: 0})
	}
	if a.full {
		for _, f := range spacedFrames(a.r, a.r.IntN(3), 1, a.length, a.minGap) {
			a.el.persistent = append(a.el.persistent, langRow{role: "assistant", content: motionText(a.r), style: "motion", frame: f})
		}
	}
}

// interjections adds interjection events, each with its spoken answer on
// the same frame and a plan refresh at the same timestamp.
func (a *annotator) interjections(starts []int, subtasks []string) {
	nInt := 0
	if a.full {
		nInt = 1 + a.r.IntN(3)
	} else if a.r.IntN(10) < 3 {
		nInt = 1
	}
	if a.length > 2*a.fps {
		for _, f := range spacedFrames(a.r, nInt, a.fps, a.length-a.fps/2, a.fps) {
			in := makeInterjection(a.r, a.t)
			a.events[f] = append(a.events[f],
				langRow{role: "user", content: in.user, style: "interjection"},
				langRow{role: "assistant", noContent: true, say: in.say})
			cur, _ := slices.BinarySearch(starts, f+1)
			a.el.persistent = append(a.el.persistent, langRow{role: "assistant", content: planText(subtasks[max(0, cur-1):], in.note), style: "plan", frame: f})
		}
	}
}

// vqa adds the VQA pairs (every camera at 1 Hz with full density, else
// one camera every 5 s) and, with full density, sometimes a trace.
func (a *annotator) vqa() {
	if len(a.o.Cameras) > 0 {
		period := a.fps
		if !a.full {
			period = 5 * a.fps
		}
		for f := a.r.IntN(period); f < a.length; f += period {
			cams := a.o.Cameras
			if !a.full {
				cams = []string{pick(a.r, a.o.Cameras)}
			}
			for _, cam := range cams {
				q, ans := vqaPair(a.r, a.t, a.o.VideoWidth, a.o.VideoHeight)
				a.events[f] = append(a.events[f],
					langRow{role: "user", content: q, style: "vqa", camera: cam},
					langRow{role: "assistant", content: ans, style: "vqa", camera: cam})
			}
		}
		if a.full && a.r.IntN(10) < 3 {
			f := a.r.IntN(a.length)
			a.events[f] = append(a.events[f], langRow{role: "assistant", content: traceText(a.r, a.o.VideoWidth, a.o.VideoHeight), style: "trace", camera: pick(a.r, a.o.Cameras)})
		}
	}
}

// sortLanguage sorts the persistent rows by frame, style and role, and
// the event frames by frame.
func sortLanguage(el *episodeLang, events map[int][]langRow) {
	slices.SortStableFunc(el.persistent, func(a, b langRow) int {
		if a.frame != b.frame {
			return a.frame - b.frame
		}
		if c := strings.Compare(a.style, b.style); c != 0 {
			return c
		}
		return strings.Compare(a.role, b.role)
	})
	for f, rows := range events {
		slices.SortStableFunc(rows, compareEvents)
		el.events = append(el.events, eventFrame{frame: f, rows: rows})
	}
	slices.SortFunc(el.events, func(a, b eventFrame) int { return a.frame - b.frame })
}

func compareEvents(a, b langRow) int {
	if c := strings.Compare(a.style, b.style); c != 0 {
		return c
	}
	if c := strings.Compare(a.role, b.role); c != 0 {
		return c
	}
	return strings.Compare(a.camera, b.camera)
}

// spacedFrames draws up to n distinct frames in [lo, hi) at least gap
// apart, sorted.
func spacedFrames(r *rand.Rand, n, lo, hi, gap int) []int {
	var out []int
	for try := 0; len(out) < n && try < 20*n; try++ {
		if hi <= lo {
			break
		}
		f := lo + r.IntN(hi-lo)
		ok := true
		for _, g := range out {
			if f-g < gap && g-f < gap {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// trajectory fills state and action (length×dim, row-major) with smooth
// joint trajectories: per-joint sinusoids plus noise, the action leading the
// state by one frame.
func trajectory(seed uint64, ep, length, dim, fps int, state, action []float32) {
	r := newRand(seed, streamMotion, uint64(ep))
	type joint struct{ amp, freq, phase, off float64 }
	js := make([]joint, dim)
	for d := range js {
		js[d] = joint{amp: 5 + 45*r.Float64(), freq: 0.05 + 0.4*r.Float64(), phase: 2 * math.Pi * r.Float64(), off: 20*r.Float64() - 10}
	}
	for f := range length {
		tt := float64(f) / float64(fps)
		tn := float64(f+1) / float64(fps)
		for d, j := range js {
			state[f*dim+d] = float32(j.off + j.amp*math.Sin(2*math.Pi*j.freq*tt+j.phase) + 0.2*r.NormFloat64())
			action[f*dim+d] = float32(j.off + j.amp*math.Sin(2*math.Pi*j.freq*tn+j.phase) + 0.5*r.NormFloat64())
		}
	}
}
