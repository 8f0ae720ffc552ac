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
	fps := o.FPS
	minGap := max(3, fps/2)

	// Subtasks: a gap-free cover of the episode, every frame has exactly
	// one active subtask.
	nSub := 2 + r.IntN(3)
	if full {
		nSub = 3 + r.IntN(6)
	}
	nSub = max(1, min(nSub, len(t.steps), length/minGap))
	idx := r.Perm(len(t.steps))[:nSub]
	slices.Sort(idx)
	starts := make([]int, nSub)
	spare := length - nSub*minGap
	if spare < 0 {
		spare = 0
	}
	weights := make([]float64, nSub)
	var wsum float64
	for i := range weights {
		weights[i] = 0.3 + r.Float64()
		wsum += weights[i]
	}
	pos := 0
	for i := range nSub {
		starts[i] = pos
		pos += minGap + int(float64(spare)*weights[i]/wsum)
	}
	subtasks := make([]string, nSub)
	for i, si := range idx {
		subtasks[i] = subtaskText(r, t, t.steps[si])
		el.persistent = append(el.persistent, langRow{role: "assistant", content: subtasks[i], style: "subtask", frame: starts[i]})
	}
	el.persistent = append(el.persistent, langRow{role: "assistant", content: planText(subtasks, ""), style: "plan", frame: 0})
	if full {
		var done []string
		for i := 1; i < nSub; i++ {
			done = append(done, t.steps[idx[i-1]].done)
			el.persistent = append(el.persistent, langRow{role: "assistant", content: memoryText(r, done, nSub-i), style: "memory", frame: starts[i]})
		}
	}
	nAug := r.IntN(4)
	if full {
		nAug = 5 + r.IntN(6)
	}
	for _, i := range r.Perm(len(t.rephrasings))[:min(nAug, len(t.rephrasings))] {
		el.persistent = append(el.persistent, langRow{role: "user", content: t.rephrasings[i], style: "task_aug", frame: 0})
	}
	if full {
		for _, f := range spacedFrames(r, r.IntN(3), 1, length, minGap) {
			el.persistent = append(el.persistent, langRow{role: "assistant", content: motionText(r), style: "motion", frame: f})
		}
	}

	events := map[int][]langRow{}
	// Interjections, each with its spoken answer on the same frame and a
	// plan refresh at the same timestamp.
	nInt := 0
	if full {
		nInt = 1 + r.IntN(3)
	} else if r.IntN(10) < 3 {
		nInt = 1
	}
	if length > 2*fps {
		for _, f := range spacedFrames(r, nInt, fps, length-fps/2, fps) {
			in := makeInterjection(r, t)
			events[f] = append(events[f],
				langRow{role: "user", content: in.user, style: "interjection"},
				langRow{role: "assistant", noContent: true, say: in.say})
			cur, _ := slices.BinarySearch(starts, f+1)
			el.persistent = append(el.persistent, langRow{role: "assistant", content: planText(subtasks[max(0, cur-1):], in.note), style: "plan", frame: f})
		}
	}
	// VQA pairs: every camera at 1 Hz (full) or one camera every 5 s.
	if len(o.Cameras) > 0 {
		period := fps
		if !full {
			period = 5 * fps
		}
		for f := r.IntN(period); f < length; f += period {
			cams := o.Cameras
			if !full {
				cams = []string{pick(r, o.Cameras)}
			}
			for _, cam := range cams {
				q, a := vqaPair(r, t, o.VideoWidth, o.VideoHeight)
				events[f] = append(events[f],
					langRow{role: "user", content: q, style: "vqa", camera: cam},
					langRow{role: "assistant", content: a, style: "vqa", camera: cam})
			}
		}
		if full && r.IntN(10) < 3 {
			f := r.IntN(length)
			events[f] = append(events[f], langRow{role: "assistant", content: traceText(r, o.VideoWidth, o.VideoHeight), style: "trace", camera: pick(r, o.Cameras)})
		}
	}

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
	return el
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
