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
