package pipeline

import (
	"errors"
	"math"
	"strconv"

	"github.com/lrstream/lrstream/render"
)

// AppendFrameJSON appends frame i of c as one JSON object (no newline) in
// the format of the conformance kit's expected/<recipe>.<mode>.jsonl files:
// {"index", "episode_index", "outcome", "rendered", "error", "fallback"}.
func AppendFrameJSON(dst []byte, c *Chunk, i int) ([]byte, error) {
	r := &c.Results[i]
	dst = append(dst, `{"index": `...)
	dst = strconv.AppendInt(dst, c.Batch.Index[i], 10)
	dst = append(dst, `, "episode_index": `...)
	dst = strconv.AppendInt(dst, c.Batch.EpisodeIndex[i], 10)
	dst = append(dst, `, "outcome": "`...)
	dst = append(dst, r.Outcome.String()...)
	dst = append(dst, `", "rendered": `...)
	if r.Outcome == render.Rendered && r.Sample != nil {
		var err error
		if dst, err = r.Sample.AppendJSON(dst); err != nil {
			return dst, err
		}
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `, "error": `...)
	if r.Outcome == render.Failed && r.Err != nil {
		dst = strconv.AppendQuote(dst, RootMessage(r.Err))
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `, "fallback": `...)
	dst = strconv.AppendBool(dst, r.Fallback)
	if len(c.Frames) > 0 {
		dst = append(dst, `, "video_frames": {`...)
		for k, f := range c.Frames {
			if k > 0 {
				dst = append(dst, ", "...)
			}
			dst = strconv.AppendQuote(dst, f.Camera)
			if math.IsNaN(f.PTS[i]) {
				dst = append(dst, ": null"...)
				continue
			}
			dst = append(dst, `: {"file": `...)
			dst = strconv.AppendQuote(dst, f.File[i])
			dst = append(dst, `, "timestamp": `...)
			dst = strconv.AppendFloat(dst, f.PTS[i], 'g', -1, 64)
			dst = append(dst, '}')
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// RootMessage returns the message of the innermost error wrapped by err:
// for a render failure, the message LeRobot's renderer raises, without the
// component and binding context lrstream adds around it.
func RootMessage(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// MaxErrorGroups and MaxGroupFrames bound ErrorGroups: distinct messages
// kept, and frames kept per message.
const (
	MaxErrorGroups = 50
	MaxGroupFrames = 3
)

// ErrorGroup is the frames that failed with one error message.
type ErrorGroup struct {
	// Message is the root error message (RootMessage).
	Message string
	// Count is the number of frames that failed with it.
	Count int64
	// First holds the first MaxGroupFrames of them.
	First []*FrameError
}

// ErrorGroups groups failed frames by error message, in order of first
// appearance, with bounded memory: at most MaxErrorGroups messages of at
// most MaxGroupFrames frames each; frames with further messages are only
// counted in Other.
type ErrorGroups struct {
	Groups []ErrorGroup
	// Other counts the frames whose message did not fit in Groups.
	Other int64
	index map[string]int
}

// Add records one failed frame.
func (g *ErrorGroups) Add(fe *FrameError) {
	msg := RootMessage(fe)
	i, ok := g.index[msg]
	if !ok {
		if len(g.Groups) >= MaxErrorGroups {
			g.Other++
			return
		}
		if g.index == nil {
			g.index = map[string]int{}
		}
		i = len(g.Groups)
		g.index[msg] = i
		g.Groups = append(g.Groups, ErrorGroup{Message: msg})
	}
	gr := &g.Groups[i]
	gr.Count++
	if len(gr.First) < MaxGroupFrames {
		gr.First = append(gr.First, fe)
	}
}

// Total returns the number of frames added.
func (g *ErrorGroups) Total() int64 {
	n := g.Other
	for _, gr := range g.Groups {
		n += gr.Count
	}
	return n
}
