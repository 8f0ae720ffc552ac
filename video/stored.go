package video

import "fmt"

// FrameConv makes a camera frame's batch bytes from the frame as its
// decoder gave it (Set.FillStored): RGB CHW planes from YUV 4:2:0 planes
// (YUV.ToCHW's arithmetic) or from RGB24 rows (ToCHW's transpose), float32
// depth from 12-bit gray codes (DepthTable.Fill, resized by nearest
// neighbour when the sizes differ). The bytes are those ToCHW or the
// depth table would have written when the frame was decoded: only when
// and where the conversion happens changes. It is a collate.Conv; a
// FrameConv is immutable, so frames of one form share one.
type FrameConv struct {
	yuv      *YUV        // YUV 4:2:0 → RGB (nil: RGB24 rows, or depth)
	depth    *DepthTable // 12-bit gray → float32 (depth)
	sw, sh   int         // the stored frame's size
	w, h     int         // the batch frame's size
	src, dst int         // bytes read and written
}

// Sizes returns the stored frame's bytes and the batch frame's.
func (c *FrameConv) Sizes() (src, dst int) { return c.src, c.dst }

// Convert writes the batch frame (c.dst bytes) of the stored frame src.
func (c *FrameConv) Convert(dst, src []byte) {
	dst, src = dst[:c.dst], src[:c.src]
	switch {
	case c.depth != nil:
		c.depth.Fill(dst, src, c.sw, c.sh, c.w, c.h)
	case c.yuv != nil:
		c.yuv.toCHW(dst, src, c.w, c.h, hasYUVVector)
	default:
		toCHW(dst, Frame{Width: c.w, Height: c.h, Pix: src}, hasSSSE3)
	}
}

// String describes the conversion (for errors and tests).
func (c *FrameConv) String() string {
	switch {
	case c.depth != nil:
		return fmt.Sprintf("gray12le %dx%d → depth %dx%d", c.sw, c.sh, c.w, c.h)
	case c.yuv != nil:
		return fmt.Sprintf("yuv420p %dx%d (%s) → RGB CHW", c.w, c.h, c.yuv.Name)
	}
	return fmt.Sprintf("rgb24 %dx%d → RGB CHW", c.w, c.h)
}

// frameConv returns the conversion of frame f for camera c (checked as
// putFrame checks it), or nil when f's stored form would not fit in a
// batch frame's slot or f is not the size its form says: such a frame is
// converted at once (putFrame).
func frameConv(c Camera, f Frame) (*FrameConv, error) {
	fc := &FrameConv{sw: f.Width, sh: f.Height, w: c.W, h: c.H, dst: c.FrameBytes()}
	if c.Depth == nil {
		if f.Gray12 {
			return nil, fmt.Errorf("a gray12le frame for an RGB camera")
		}
		switch {
		case f.Width != c.W || f.Height != c.H:
			return nil, nil // not expected: Fill checks the size first
		case f.YUV != nil && c.W%2 == 0 && c.H%2 == 0:
			fc.yuv, fc.src = f.YUV, yuvSize(c.W, c.H)
		case f.YUV != nil:
			return nil, nil
		default:
			fc.src = 3 * c.W * c.H
		}
	} else {
		if !f.Gray12 {
			return nil, fmt.Errorf("depth camera: the decoder gave a frame that is not gray12le")
		}
		fc.depth, fc.src = c.Depth, 2*f.Width*f.Height
	}
	if fc.src > fc.dst || len(f.Pix) < fc.src {
		return nil, nil
	}
	return fc, nil
}

// same reports whether c converts as d does.
func (c *FrameConv) same(d *FrameConv) bool {
	return d != nil && *c == *d
}

// storeFrame puts frame f of camera c in dst (a FrameBytes slot) in its
// stored form and returns its conversion (last, when it converts the
// same way), or converts it into dst and returns nil when its stored form
// does not fit (frameConv).
func storeFrame(dst []byte, c Camera, f Frame, last *FrameConv) (*FrameConv, error) {
	fc, err := frameConv(c, f)
	if err != nil {
		return nil, err
	}
	if fc == nil {
		return nil, putFrame(dst, c, f)
	}
	copy(dst, f.Pix[:fc.src])
	if fc.same(last) {
		return last, nil
	}
	return fc, nil
}
