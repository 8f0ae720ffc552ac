package pipeline

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
)

// Delta asks for a feature at several time offsets around each frame, as
// LeRobotDataset's delta_timestamps: the output feature KEY gains a leading
// dimension len(Offsets), and a boolean KEY_is_pad column marks the
// offsets that fall outside the frame's episode (their values repeat the
// episode's first or last frame).
type Delta struct {
	Key string
	// Seconds are the offsets as given; Offsets the same in frames,
	// round(seconds*fps) (see ResolveDeltas).
	Seconds []float64
	Offsets []int
}

// DefaultTolerance is LeRobot's default tolerance_s: a delta timestamp
// must be a multiple of 1/fps within this many seconds.
const DefaultTolerance = 1e-4

// ParseDeltaTimestamps parses the --delta-timestamps syntax: KEY=ITEM,...
// where the items up to the next KEY= belong to KEY (keys may also be
// separated by ';'). An item is seconds: a number ("0.1", "-1/30") or a
// range "A:B/D" (A/D, (A+1)/D, ... (B-1)/D) or "A:B:S/D" with step S.
// Example: "action=0:50/30,observation.state=-1/30,0".
func ParseDeltaTimestamps(spec string) ([]Delta, error) {
	var out []Delta
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	for _, tok := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == ';' }) {
		tok = strings.TrimSpace(tok)
		if k, v, ok := strings.Cut(tok, "="); ok {
			k = strings.TrimSpace(k)
			if k == "" {
				return nil, fmt.Errorf("--delta-timestamps: empty key in %q", tok)
			}
			for _, d := range out {
				if d.Key == k {
					return nil, fmt.Errorf("--delta-timestamps: key %s given twice", k)
				}
			}
			out = append(out, Delta{Key: k})
			tok = strings.TrimSpace(v)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("--delta-timestamps: %q comes before any KEY=", tok)
		}
		secs, err := parseDeltaItem(tok)
		if err != nil {
			return nil, fmt.Errorf("--delta-timestamps %s: %w", out[len(out)-1].Key, err)
		}
		out[len(out)-1].Seconds = append(out[len(out)-1].Seconds, secs...)
	}
	for _, d := range out {
		if len(d.Seconds) == 0 {
			return nil, fmt.Errorf("--delta-timestamps: no offsets for %s", d.Key)
		}
	}
	return out, nil
}

func parseDeltaItem(s string) ([]float64, error) {
	num, den := s, 1.0
	if a, b, ok := strings.Cut(s, "/"); ok {
		d, err := strconv.ParseFloat(strings.TrimSpace(b), 64)
		if err != nil || d == 0 || math.IsInf(d, 0) || math.IsNaN(d) {
			return nil, fmt.Errorf("bad divisor in %q", s)
		}
		num, den = strings.TrimSpace(a), d
	}
	if strings.Contains(num, ":") {
		parts := strings.Split(num, ":")
		if len(parts) > 3 {
			return nil, fmt.Errorf("bad range %q", s)
		}
		var v [3]int
		v[2] = 1
		for i, p := range parts {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				return nil, fmt.Errorf("bad range %q: %w", s, err)
			}
			v[i] = n
		}
		if v[2] == 0 {
			return nil, fmt.Errorf("range step 0 in %q", s)
		}
		var out []float64
		for i := v[0]; (v[2] > 0 && i < v[1]) || (v[2] < 0 && i > v[1]); i += v[2] {
			out = append(out, float64(i)/den)
			if len(out) > 1<<16 {
				return nil, fmt.Errorf("range %q too long", s)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("empty range %q", s)
		}
		return out, nil
	}
	x, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
		return nil, fmt.Errorf("bad offset %q", s)
	}
	return []float64{x / den}, nil
}

// ResolveDeltas converts the offsets to frames at fps, refusing offsets
// that are not multiples of 1/fps within tolerance seconds (LeRobot's
// check_delta_timestamps), and checks every key is one of features.
func ResolveDeltas(ds []Delta, fps, tolerance float64, features []collate.Feature) ([]Delta, error) {
	out := make([]Delta, len(ds))
	for i, d := range ds {
		found := false
		for _, f := range features {
			found = found || f.Name == d.Key
		}
		if !found {
			return nil, fmt.Errorf("--delta-timestamps: %s is not one of the emitted numeric features", d.Key)
		}
		d.Offsets = make([]int, len(d.Seconds))
		var bad []float64
		for j, s := range d.Seconds {
			r, ok := schema.SecondsToFrames(s, fps)
			if !ok {
				return nil, fmt.Errorf("--delta-timestamps %s: offset %g s is beyond ±%d frames at %g fps", d.Key, s, schema.MaxFrameOffset, fps)
			}
			if math.Abs(s*fps-float64(r))/fps > tolerance {
				bad = append(bad, s)
			}
			d.Offsets[j] = int(r)
		}
		if len(bad) > 0 {
			return nil, fmt.Errorf("--delta-timestamps %s: %v are not multiples of 1/%g s within tolerance %g s", d.Key, bad, fps, tolerance)
		}
		out[i] = d
	}
	return out, nil
}

// filler fills a collate.Frame from a decoded chunk, gathering
// --delta-timestamps windows within the frame's episode.
type filler struct {
	in  []collate.Feature // the chunk's features
	out []collate.Feature // the stream's features: windowed, then the pad masks
	// window[i] are the frame offsets of input feature i (nil: the frame
	// itself); pad[i] is the output column of its pad mask.
	window  [][]int
	pad     []int
	scratch [][]byte
	size    []int // bytes per frame of each input feature
	// checked is the last batch whose features were checked against in
	// (once per chunk, not per frame).
	checked *shard.Batch
}

func newFiller(in []collate.Feature, deltas []Delta) *filler {
	fl := &filler{in: in, window: make([][]int, len(in)), pad: make([]int, len(in))}
	for i, f := range in {
		fl.pad[i] = -1
		o := f
		for _, d := range deltas {
			if d.Key == f.Name {
				fl.window[i] = d.Offsets
				o.Shape = append([]int{len(d.Offsets)}, f.Shape...)
			}
		}
		fl.out = append(fl.out, o)
	}
	for i, f := range in {
		if fl.window[i] != nil {
			fl.pad[i] = len(fl.out)
			fl.out = append(fl.out, collate.Feature{Name: f.Name + "_is_pad", DType: "|b1", Shape: []int{len(fl.window[i])}})
		}
	}
	fl.scratch = make([][]byte, len(fl.out))
	fl.size = make([]int, len(in))
	for i, f := range in {
		fl.size[i] = f.FrameBytes()
	}
	return fl
}

// episodeBounds returns, per frame of c, the chunk offsets [start, end)
// of the frame's episode; computed once per chunk.
func (c *Chunk) episodeBounds() (start, end []int32) {
	if c.epStart == nil {
		ep := c.Batch.EpisodeIndex
		n := len(ep)
		c.epStart, c.epEnd = make([]int32, n), make([]int32, n)
		for s := 0; s < n; {
			e := s + 1
			for e < n && ep[e] == ep[s] {
				e++
			}
			for j := s; j < e; j++ {
				c.epStart[j], c.epEnd[j] = int32(s), int32(e)
			}
			s = e
		}
	}
	return c.epStart, c.epEnd
}

// fill sets f.Features for frame j of c. Feature slices point into c's
// buffers or into the filler's scratch space, valid until the next fill.
func (fl *filler) fill(f *collate.Frame, c *Chunk, j int) error {
	bt := c.Batch
	if err := fl.check(c); err != nil {
		return err
	}
	fl.reset(f)
	// The camera columns (the chunk's last frameCols) are owned by
	// c.frames: a batch may borrow a frame itself, not a window gathered
	// into the scratch space.
	cams := len(bt.Features) - c.frameCols
	f.Owner = nil // not c.frames when nil: a nil *frameOwner is not a nil Owner
	if c.frames != nil {
		f.Owner = c.frames
	}
	for k := range fl.in {
		fd := &bt.Features[k]
		size := fl.size[k]
		if fl.window[k] != nil {
			if err := fl.gather(f, c, j, k, cams); err != nil {
				return err
			}
			continue
		}
		f.Features[k] = fd.Data[j*size : (j+1)*size]
		f.Borrow[k] = k >= cams
		// A frame stored as decoded goes with its conversion.
		if conv := c.frameConv(k-cams, j+c.convLo); conv != nil {
			src, _ := conv.Sizes()
			f.Features[k] = f.Features[k][:src:src]
			f.Conv[k] = conv
		}
	}
	return nil
}

// check checks c's features against the stream's (once per chunk).
func (fl *filler) check(c *Chunk) error {
	bt := c.Batch
	if bt == fl.checked {
		return nil
	}
	if len(bt.Features) != len(fl.in) {
		return fmt.Errorf("%s row group %d: %d numeric features, the stream has %d", c.Unit.File, c.Unit.RowGroup, len(bt.Features), len(fl.in))
	}
	for k := range fl.in {
		fd := &bt.Features[k]
		if fd.DType != fl.in[k].DType || !slices.Equal(fd.Shape, fl.in[k].Shape) {
			return fmt.Errorf("%s row group %d: feature %s is %s%v here but %s%v earlier in the stream",
				c.Unit.File, c.Unit.RowGroup, fd.Name, fd.DType, fd.Shape, fl.in[k].DType, fl.in[k].Shape)
		}
	}
	fl.checked = bt
	return nil
}

// reset sizes f's Features, Borrow and Conv to the stream's features,
// none borrowed or converted.
func (fl *filler) reset(f *collate.Frame) {
	n := len(fl.out)
	if cap(f.Features) < n {
		f.Features = make([][]byte, n)
	}
	if cap(f.Borrow) < n {
		f.Borrow = make([]bool, n)
	}
	if cap(f.Conv) < n {
		f.Conv = make([]collate.Conv, n)
	}
	f.Features, f.Borrow, f.Conv = f.Features[:n], f.Borrow[:n], f.Conv[:n]
	clear(f.Borrow)
	clear(f.Conv)
}

// gather sets feature k of frame j of c to its --delta-timestamps window
// (rows clamped to the frame's episode, converted) and its pad mask, in
// the filler's scratch space; cams is the first camera column.
func (fl *filler) gather(f *collate.Frame, c *Chunk, j, k, cams int) error {
	bt, fd, size := c.Batch, &c.Batch.Features[k], fl.size[k]
	// Rows are gathered from the chunk, or for a piece of a longer group
	// (c.ext) from the group's rows around it.
	// conv0 is the row of data's first frame in the column's buffer
	// (Chunk.frameConvs).
	data, jj, first, conv0 := fd.Data, j, 0, c.convLo
	var starts, ends []int32
	if x := c.ext; x != nil {
		data, jj, first, conv0 = x.data[k], j+x.lo, x.first[k], 0
		starts, ends = x.start, x.end
	} else {
		starts, ends = c.episodeBounds()
	}
	s, e := int(starts[jj]), int(ends[jj])
	buf := fl.scratch[k][:0]
	mask := fl.scratch[fl.pad[k]][:0]
	for _, off := range fl.window[k] {
		q := jj + off
		isPad := q < s || q >= e
		q = min(max(q, s), e-1)
		if q < first || (q-first+1)*size > len(data) {
			return fmt.Errorf("%s row group %d: episode %d, index %d: internal error: %s offset %d reaches beyond the decoded rows", c.Unit.File, c.Unit.RowGroup, bt.EpisodeIndex[j], bt.Index[j], fd.Name, off)
		}
		q -= first
		// A window's frames are converted as they are gathered.
		if conv := c.frameConv(k-cams, conv0+q); conv != nil {
			src, _ := conv.Sizes()
			n := len(buf)
			buf = slices.Grow(buf, size)[:n+size]
			conv.Convert(buf[n:], data[q*size:q*size+src])
		} else {
			buf = append(buf, data[q*size:(q+1)*size]...)
		}
		if isPad {
			mask = append(mask, 1)
		} else {
			mask = append(mask, 0)
		}
	}
	fl.scratch[k], fl.scratch[fl.pad[k]] = buf, mask
	f.Features[k], f.Features[fl.pad[k]] = buf, mask
	return nil
}
